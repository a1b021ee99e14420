// The audit event contract in code: which owners and event types exist,
// which stream each owner publishes to, how an event is built from a call,
// and what makes an event valid. Owners validate before writing to their
// outbox; Admin validates again on arrival (it trusts nothing on the wire).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::audit {

using ::ulticode::audit::v1::AuditEvent;
using ::ulticode::audit::v1::Owner;

// The version owners write: personal values committed to, not embedded
// (common/audit/personal.h). Version 1 (embedded) is still read.
inline constexpr uint32_t kSchemaVersion = 2;
inline constexpr uint32_t kEmbeddedPersonalDataSchemaVersion = 1;
// Largest serialized event an owner will publish or Admin will accept.
inline constexpr size_t kMaxEventBytes = 256 * 1024;
// 9999-12-31T23:59:59Z: the last second RFC 3339 and timestamptz agree on.
inline constexpr int64_t kMaxOccurredAtSeconds = 253402300799;

// An owner stream's entry: one event's exact bytes, its seal (common/seal:
// the path to a bundle root the owner's key signed) and that key's id.
// Everything Admin needs is inside the sealed bytes, but for the personal
// values a schema_version 2 envelope commits to: they travel unsealed in
// the optional `personal` field (a serialized PersonalValues), and each is
// kept only if it opens its commitment.
inline constexpr char kEnvelopeField[] = "envelope";
inline constexpr char kSealField[] = "seal";
inline constexpr char kKeyIdField[] = "key_id";
inline constexpr char kPersonalField[] = "personal";

// "auth" / "app"; "" for OWNER_UNSPECIFIED.
std::string OwnerName(Owner owner);
// Inverse of OwnerName; OWNER_UNSPECIFIED for anything else.
Owner OwnerFromName(absl::string_view name);
// "audit:auth" / "audit:app".
std::string StreamFor(Owner owner);

// One event type of the contract and the keys of its old/new values that
// hold personal data (docs/personal-data.md).
struct EventTypeContract {
  Owner owner;
  std::string type;
  std::vector<std::string> personal_value_keys;
};
// Every event type this binary knows.
const std::vector<EventTypeContract>& EventTypes();
// nullptr when `owner` has no `event_type`.
const EventTypeContract* FindEventType(Owner owner, absl::string_view event_type);

// True when `event_type` is one this contract defines for `owner`.
bool IsKnownEventType(Owner owner, absl::string_view event_type);

// The event types a binary knows: IsKnownEventType, the types compiled into
// it. (Tests stand in an older release with a list that lacks some.)
using KnownEventTypes = std::function<bool(Owner owner, absl::string_view event_type)>;

// Who did what, from where: everything about a call that goes into the record.
struct Actor {
  std::string principal;  // the resolved caller principal id
  std::string client_ip;
  std::string user_agent;
  std::string request_id;
  std::string trace_id;
};

// Starts an event with a fresh v7 event id (= audit id), the envelope filled
// in and the record's actor fields set, personal values embedded
// (schema_version 1) until CommitPersonalData (personal.h). The caller fills action, entity and
// old/new values.
AuditEvent NewEvent(Owner owner, absl::string_view event_type, const Actor& actor,
                    absl::Time occurred_at);

// Checks the envelope and the record agree and are complete, and that every
// string and value is one Admin's writer can store exactly (valid UTF-8, no
// NUL or other control characters, no bidi controls in names, finite numbers,
// bounded nesting, a representable time), and that its personal data is
// where its schema_version puts it (personal.h). The invariant: an event that
// validates here is always written by Admin. INVALID_ARGUMENT names the first
// problem found; UNIMPLEMENTED (IsNewerThanKnown) when the event is of a type
// or schema version newer than this binary knows, written by a newer release
// of its owner: during a rolling upgrade it is left, or passed on untouched,
// for a binary that knows it, never declared dead.
absl::Status Validate(const AuditEvent& event, const KnownEventTypes& known = IsKnownEventType);
bool IsNewerThanKnown(const absl::Status& status);

// Deterministic serialization: the bytes that are stored, published and
// (later) signed. Never re-serialize a received event; keep its bytes.
std::string Serialize(const AuditEvent& event);

}  // namespace ulticode::audit
