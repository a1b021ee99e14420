// What Admin accepts from an owner stream. Admin trusts nothing on the wire:
// every entry is checked against the stream it came from before anything is
// taken over, and a failed check has its own reason so operators can tell a
// producer bug (missing field, stale schema) from a forgery (owner mismatch,
// id mismatch) in the poison store.
//
// Pure logic, no I/O.
#pragma once

#include <string>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/crypto/key_directory.h"
#include "common/redis/redis_client.h"

namespace ulticode::admin::inbox {

enum class PoisonReason {
  kDeleted,                   // the entry vanished (XDEL/trim) before it was acknowledged
  kTooLarge,                  // entry or envelope over the size limit
  kMissingField,              // a required field is absent
  kDuplicateField,            // a field appears twice
  kBadEventId,                // event_id is not a UUID
  kOwnerMismatch,             // the owner field is not the stream's owner
  kUnknownEventType,          // event_type is not defined for the stream's owner
  kUnsupportedSchemaVersion,  // schema_version is not one Admin reads
  kEnvelopeUnparseable,       // envelope is not a serialized AuditEvent
  kEventIdMismatch,           // envelope.event_id differs from the event_id field
  kAuditIdMismatch,           // record.audit_id differs from the event id
  kEnvelopeOwnerMismatch,     // envelope.owner is not the stream's owner
  kFieldMismatch,             // event_type / schema_version fields differ from the envelope
  kBadTimestamp,              // occurred_at missing, malformed, too old or in the future
  kInvalidRecord,             // the record breaks the contract (audit::Validate)
  kConflict,                  // same event id already taken over with different bytes
  kMissingSignature,          // no signature or key_id field (or an empty one)
  kUnknownKey,                // key_id is not in Admin's key directory
  kKeyOwnerMismatch,          // the key belongs to another party than the stream's owner
  kBadSignature,              // the signature does not verify over the envelope bytes
  kEventIdOfAnotherOwner,     // the event id is already taken over from another owner
};
// The last reason (keep it last): metrics initialise a series per reason.
inline constexpr PoisonReason kLastPoisonReason = PoisonReason::kEventIdOfAnotherOwner;

// Stable snake_case name, stored in poison_events.reason and used as a label.
absl::string_view PoisonReasonName(PoisonReason reason);

struct ValidationLimits {
  size_t max_event_bytes = audit::kMaxEventBytes;
  // Entry size over all field names and values (the envelope plus routing).
  size_t max_entry_bytes = audit::kMaxEventBytes + 4096;
  // occurred_at may be at most this far ahead of Admin's clock (clock skew).
  absl::Duration max_future_skew = absl::Minutes(10);
  // occurred_at before this is not sane for this system.
  absl::Time min_occurred_at = absl::FromUnixSeconds(1577836800);  // 2020-01-01
};

// An entry that passed every check.
struct AcceptedEntry {
  std::string event_id;
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  std::string event_type;
  absl::Time occurred_at;
  std::string envelope;   // the owner's exact bytes
  std::string signature;  // the owner's Ed25519 signature of `envelope`
  std::string key_id;
  audit::AuditEvent event;  // `envelope`, parsed and validated
};

struct Rejection {
  PoisonReason reason;
  std::string detail;    // human-readable, names the offending field
  std::string event_id;  // the id the entry claimed, if any (for the poison row)
};

using Verdict = std::variant<AcceptedEntry, Rejection>;

// Checks `entry` read from `stream_owner`'s stream, at Admin time `now`: its
// form, then its signature against the keys `keys` lists for the stream's
// owner (a forger with Redis access but no owner key writes nothing), then
// the envelope against the fields and the contract.
Verdict ValidateEntry(audit::Owner stream_owner, const redis::StreamEntry& entry, absl::Time now,
                      const crypto::KeyDirectory& keys, const ValidationLimits& limits = {});

}  // namespace ulticode::admin::inbox
