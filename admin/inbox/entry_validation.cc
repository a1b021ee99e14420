#include "admin/inbox/entry_validation.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/ids/uuid.h"

namespace ulticode::admin::inbox {
namespace {

constexpr const char* kRequiredFields[] = {"event_id", "owner",     "event_type", "schema_version",
                                           "envelope", "signature", "key_id"};
constexpr size_t kSignatureField = 5;

// Values are echoed into details; keep them short and printable.
std::string Shown(absl::string_view v) {
  std::string out;
  for (char c : v.substr(0, 64)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

// The contract's form: a lowercase, hyphenated UUID (what owners write and
// PostgreSQL returns), so ids compare equal as text everywhere.
bool IsCanonicalId(absl::string_view id) {
  return ids::IsValidUuid(id) && absl::AsciiStrToLower(id) == id;
}

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

Rejection Reject(PoisonReason reason, std::string detail, std::string event_id = "") {
  return Rejection{reason, std::move(detail), std::move(event_id)};
}

}  // namespace

absl::string_view PoisonReasonName(PoisonReason reason) {
  switch (reason) {
    case PoisonReason::kDeleted:
      return "deleted";
    case PoisonReason::kTooLarge:
      return "too_large";
    case PoisonReason::kMissingField:
      return "missing_field";
    case PoisonReason::kDuplicateField:
      return "duplicate_field";
    case PoisonReason::kBadEventId:
      return "bad_event_id";
    case PoisonReason::kOwnerMismatch:
      return "owner_mismatch";
    case PoisonReason::kUnknownEventType:
      return "unknown_event_type";
    case PoisonReason::kUnsupportedSchemaVersion:
      return "unsupported_schema_version";
    case PoisonReason::kEnvelopeUnparseable:
      return "envelope_unparseable";
    case PoisonReason::kEventIdMismatch:
      return "event_id_mismatch";
    case PoisonReason::kAuditIdMismatch:
      return "audit_id_mismatch";
    case PoisonReason::kEnvelopeOwnerMismatch:
      return "envelope_owner_mismatch";
    case PoisonReason::kFieldMismatch:
      return "field_mismatch";
    case PoisonReason::kBadTimestamp:
      return "bad_timestamp";
    case PoisonReason::kInvalidRecord:
      return "invalid_record";
    case PoisonReason::kConflict:
      return "conflict";
    case PoisonReason::kMissingSignature:
      return "missing_signature";
    case PoisonReason::kUnknownKey:
      return "unknown_key";
    case PoisonReason::kKeyOwnerMismatch:
      return "key_owner_mismatch";
    case PoisonReason::kBadSignature:
      return "bad_signature";
  }
  return "unknown";
}

Verdict ValidateEntry(audit::Owner stream_owner, const redis::StreamEntry& entry, absl::Time now,
                      const crypto::KeyDirectory& keys, const ValidationLimits& limits) {
  if (entry.deleted) {
    return Reject(PoisonReason::kDeleted,
                  "entry was deleted from the stream before it was acknowledged");
  }
  size_t total = 0;
  for (const auto& [name, value] : entry.fields) total += name.size() + value.size();
  if (total > limits.max_entry_bytes) {
    return Reject(
        PoisonReason::kTooLarge,
        absl::StrCat("entry is ", total, " bytes, over the limit of ", limits.max_entry_bytes));
  }

  // Each required field exactly once; unknown extra fields are tolerated
  // (a producer may add routing hints) but never trusted.
  std::optional<std::string> fields[std::size(kRequiredFields)];
  for (const auto& [name, value] : entry.fields) {
    for (size_t i = 0; i < std::size(kRequiredFields); ++i) {
      if (name != kRequiredFields[i]) continue;
      if (fields[i].has_value()) {
        return Reject(PoisonReason::kDuplicateField,
                      absl::StrCat("field ", name, " appears twice"));
      }
      fields[i] = value;
    }
  }
  const std::string claimed_id = fields[0].value_or("");
  for (size_t i = 0; i < std::size(kRequiredFields); ++i) {
    if (i >= kSignatureField && (!fields[i].has_value() || fields[i]->empty())) {
      return Reject(
          PoisonReason::kMissingSignature,
          absl::StrCat("field ", kRequiredFields[i], " is missing or empty: unsigned entry"),
          IsCanonicalId(claimed_id) ? claimed_id : "");
    }
    if (!fields[i].has_value()) {
      return Reject(PoisonReason::kMissingField,
                    absl::StrCat("required field ", kRequiredFields[i], " is missing"),
                    IsCanonicalId(claimed_id) ? claimed_id : "");
    }
  }
  const std::string& event_id = *fields[0];
  const std::string& owner = *fields[1];
  const std::string& event_type = *fields[2];
  const std::string& schema_version = *fields[3];
  const std::string& envelope = *fields[4];
  const std::string& signature = *fields[5];
  const std::string& key_id = *fields[6];

  if (!IsCanonicalId(event_id)) {
    return Reject(PoisonReason::kBadEventId,
                  absl::StrCat("event_id \"", Shown(event_id), "\" is not a lowercase UUID"));
  }
  const std::string stream_owner_name = audit::OwnerName(stream_owner);
  if (owner != stream_owner_name) {
    return Reject(PoisonReason::kOwnerMismatch,
                  absl::StrCat("owner field \"", Shown(owner), "\" arrived on the ",
                               stream_owner_name, " stream"),
                  event_id);
  }
  if (!audit::IsKnownEventType(stream_owner, event_type)) {
    return Reject(PoisonReason::kUnknownEventType,
                  absl::StrCat("event_type \"", Shown(event_type), "\" is not defined for owner ",
                               stream_owner_name),
                  event_id);
  }
  uint32_t version = 0;
  if (!absl::SimpleAtoi(schema_version, &version) || version != audit::kSchemaVersion ||
      schema_version != absl::StrCat(version)) {
    return Reject(PoisonReason::kUnsupportedSchemaVersion,
                  absl::StrCat("schema_version \"", Shown(schema_version), "\" is not supported (",
                               audit::kSchemaVersion, " is)"),
                  event_id);
  }
  if (envelope.size() > limits.max_event_bytes) {
    return Reject(PoisonReason::kTooLarge,
                  absl::StrCat("envelope is ", envelope.size(), " bytes, over the limit of ",
                               limits.max_event_bytes),
                  event_id);
  }
  const crypto::KeyDirectory::Entry* key = keys.Find(key_id);
  if (key == nullptr) {
    return Reject(PoisonReason::kUnknownKey,
                  absl::StrCat("key_id \"", Shown(key_id), "\" is not in the key directory"),
                  event_id);
  }
  if (key->party != stream_owner_name) {
    return Reject(PoisonReason::kKeyOwnerMismatch,
                  absl::StrCat("key ", key_id, " belongs to ", Shown(key->party), ", not to ",
                               stream_owner_name),
                  event_id);
  }
  if (!key->key.Verify(envelope, signature)) {
    return Reject(PoisonReason::kBadSignature,
                  absl::StrCat("signature does not verify with key ", key_id), event_id);
  }
  audit::AuditEvent event;
  if (envelope.empty() || !event.ParseFromString(envelope)) {
    return Reject(PoisonReason::kEnvelopeUnparseable,
                  "envelope is not a serialized ulticode.audit.v1.AuditEvent", event_id);
  }
  if (event.event_id() != event_id) {
    return Reject(PoisonReason::kEventIdMismatch,
                  absl::StrCat("envelope event_id \"", Shown(event.event_id()),
                               "\" differs from the event_id field"),
                  event_id);
  }
  if (event.record().audit_id() != event_id) {
    return Reject(PoisonReason::kAuditIdMismatch,
                  absl::StrCat("record.audit_id \"", Shown(event.record().audit_id()),
                               "\" differs from the event id"),
                  event_id);
  }
  if (event.owner() != stream_owner) {
    return Reject(PoisonReason::kEnvelopeOwnerMismatch,
                  absl::StrCat("envelope owner \"", audit::OwnerName(event.owner()),
                               "\" arrived on the ", stream_owner_name, " stream"),
                  event_id);
  }
  if (event.event_type() != event_type) {
    return Reject(
        PoisonReason::kFieldMismatch,
        absl::StrCat("event_type field \"", Shown(event_type), "\" differs from the envelope's \"",
                     Shown(event.event_type()), "\""),
        event_id);
  }
  if (event.schema_version() != version) {
    return Reject(PoisonReason::kFieldMismatch,
                  absl::StrCat("schema_version field ", version, " differs from the envelope's ",
                               event.schema_version()),
                  event_id);
  }
  const auto& ts = event.occurred_at();
  if (!event.has_occurred_at() || ts.nanos() < 0 || ts.nanos() > 999999999) {
    return Reject(PoisonReason::kBadTimestamp, "occurred_at is missing or malformed", event_id);
  }
  const absl::Time occurred = absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  if (occurred < limits.min_occurred_at) {
    return Reject(
        PoisonReason::kBadTimestamp,
        absl::StrCat("occurred_at ", Utc(occurred), " is before ", Utc(limits.min_occurred_at)),
        event_id);
  }
  if (occurred > now + limits.max_future_skew) {
    return Reject(PoisonReason::kBadTimestamp,
                  absl::StrCat("occurred_at ", Utc(occurred), " is more than ",
                               absl::FormatDuration(limits.max_future_skew), " in the future"),
                  event_id);
  }
  if (absl::Status s = audit::Validate(event); !s.ok()) {
    return Reject(PoisonReason::kInvalidRecord, std::string(s.message()), event_id);
  }
  return AcceptedEntry{event_id, stream_owner, event_type, occurred,
                       envelope, signature,    key_id,     std::move(event)};
}

}  // namespace ulticode::admin::inbox
