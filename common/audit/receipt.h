// The receipt contract: how Admin tells an owner "these events are durably
// in my inbox" (see docs/guarantees.md).
//
// Receipts travel on a stream beside the owner's audit stream
// (`<audit stream>:receipts`, e.g. `audit:auth:receipts`); Admin is its only
// writer, the owner its only reader, and the owner remains the only writer of
// its own tables. One entry per inbox batch carries the ids of every event of
// that batch that is now in the inbox (new or duplicate). Receipts are
// idempotent: applying one twice, late or never is harmless (a missing one
// only causes a re-send, which the inbox absorbs).
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/redis/redis_client.h"

namespace ulticode::audit {

// "<stream>:receipts".
std::string ReceiptStreamFor(absl::string_view audit_stream);

// The stream entry for a batch of event ids: {"event_ids": "id,id,..."}.
redis::StreamFields EncodeReceipt(const std::vector<std::string>& event_ids);

// The event ids of a receipt entry. Anything that is not a canonical
// (lowercase) UUID is skipped and counted in `*rejected` when given.
std::vector<std::string> DecodeReceipt(const redis::StreamFields& fields, int* rejected = nullptr);

}  // namespace ulticode::audit
