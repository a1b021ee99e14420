// Trims an owner stream without loss: XTRIM MINID up to the lowest, over
// every consumer group of the stream, of its oldest pending id (delivered,
// not acknowledged) and the id after its last-delivered one. No entry a
// group has not acknowledged is ever removed; entries no group has read yet
// stay too. A stream without groups is left alone (nobody has read it).
//
// A group created after the trim (e.g. re-created with id 0 after Redis lost
// its data) reads what is left; anything it missed is still unconfirmed on
// its owner, which publishes it again (docs/guarantees.md).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/redis/redis_client.h"

namespace ulticode::admin::maintenance {

struct TrimResult {
  std::string min_id;  // entries below it were removed ("" when none could be)
  int64_t removed = 0;
};

absl::StatusOr<TrimResult> TrimStream(redis::Client& redis, const std::string& stream);

}  // namespace ulticode::admin::maintenance
