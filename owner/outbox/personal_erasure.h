// The stream side of an erasure (docs/personal-data.md): every entry of an
// owner's stream that carries a value of the erased subject (its
// `personal` field) is deleted. An entry Admin has not taken over yet is
// published again without the value: the erasure set its row PENDING
// (outbox::ErasePersonalData) and committed before this runs, and the
// dispatcher cycle that published it had finished (the erasure waits for
// it), so its entry is in the stream now.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"

namespace ulticode::outbox {

// Reads `stream` from its start, a page at a time, and deletes (XDEL) each
// entry whose values include one about `subject` of an event that occurred
// up to `through`. Returns how many it deleted.
absl::StatusOr<int64_t> ScrubStream(redis::Client& redis, const std::string& stream,
                                    const std::string& subject, absl::Time through);

}  // namespace ulticode::outbox
