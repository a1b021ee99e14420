// What Admin accepts from an owner stream. Admin trusts nothing on the wire:
// every entry is checked against the stream it came from before anything is
// taken over, and a failed check has its own reason so operators can tell a
// producer bug (missing field, stale schema) from a forgery (a seal that
// does not verify, a key of another party) in the poison store. An entry is
// the envelope, its seal and the key id (audit::kEnvelopeField...): the seal
// is checked first, then everything else is read from the sealed bytes.
//
// Pure logic, no I/O.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/crypto/key_directory.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"

namespace ulticode::admin::inbox {

enum class PoisonReason {
  kDeleted,                   // the entry vanished (XDEL/trim) before it was acknowledged
  kTooLarge,                  // entry or envelope over the size limit
  kMissingField,              // a required field is absent
  kDuplicateField,            // a field appears twice
  kBadEventId,                // the envelope's event_id is not a lowercase UUID
  kUnknownEventType,          // event_type is not defined for the stream's owner
  kUnsupportedSchemaVersion,  // schema_version is not one Admin reads
  kEnvelopeUnparseable,       // envelope is not a serialized AuditEvent
  kAuditIdMismatch,           // record.audit_id differs from the event id
  kEnvelopeOwnerMismatch,     // envelope.owner is not the stream's owner
  kBadTimestamp,              // occurred_at missing, malformed, too old or in the future
  kInvalidRecord,             // the record breaks the contract (audit::Validate)
  kConflict,                  // same event id already taken over with different bytes
  kMissingSignature,          // no seal or key_id field (or an empty one)
  kUnknownKey,                // key_id is not in Admin's key directory
  kKeyOwnerMismatch,          // the key belongs to another party than the stream's owner
  kBadSignature,              // the seal does not decode or verify over the envelope bytes
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
  std::string envelope;  // the owner's exact bytes
  std::string seal;      // its seal (common/seal/seal.h) by the owner's key
  std::string key_id;
  audit::AuditEvent event;  // `envelope`, parsed and validated
  // The entry's personal values (its `personal` field) that open a
  // commitment of the envelope (common/audit/personal.h), and why each
  // other one was left out. A value left out never costs the event: the
  // envelope is sealed, the values beside it are not.
  std::vector<audit::PersonalValue> personal;
  std::vector<std::string> refused_personal;
};

struct Rejection {
  PoisonReason reason;
  std::string detail;  // human-readable, names the offending field
  // The envelope's id, if it has one (for the poison row); claimed and
  // unverified when the seal did not verify.
  std::string event_id;
};

using Verdict = std::variant<AcceptedEntry, Rejection>;

// Checks `entry` read from `stream_owner`'s stream, at Admin time `now`: its
// form, then its seal against the keys `keys` lists for the stream's owner
// (a forger with Redis access but no owner key writes nothing; `seals`
// remembers verified bundle signatures, so a bundle costs one Ed25519
// verification), then the envelope against the stream and the contract.
Verdict ValidateEntry(audit::Owner stream_owner, const redis::StreamEntry& entry, absl::Time now,
                      const crypto::KeyDirectory& keys, seal::Verifier& seals,
                      const ValidationLimits& limits = {});

// Fills entry.personal from the entry's serialized PersonalValues `field`
// (empty: none) and entry.refused_personal with every value left out.
void OpenPersonalValues(absl::string_view field, AcceptedEntry& entry);

}  // namespace ulticode::admin::inbox
