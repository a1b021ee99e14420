#include "admin/inbox/entry_validation.h"

#include <optional>
#include <string>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/audit/personal.h"
#include "common/ids/uuid.h"

namespace ulticode::admin::inbox {
namespace {

// The fields read: the three every entry has, then the optional one.
constexpr const char* kRequiredFields[] = {audit::kEnvelopeField, audit::kSealField,
                                           audit::kKeyIdField, audit::kPersonalField};
constexpr size_t kEnvelope = 0, kSeal = 1, kKeyId = 2, kPersonal = 3;

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

// The id an envelope claims, unverified, for the poison row of an entry
// refused before its seal was checked; "" when it has none. Parsed only on
// that path.
std::string ClaimedId(absl::string_view envelope, const ValidationLimits& limits) {
  audit::AuditEvent event;
  if (envelope.size() > limits.max_event_bytes ||
      !event.ParseFromArray(envelope.data(), envelope.size())) {
    return "";
  }
  return IsCanonicalId(event.event_id()) ? event.event_id() : "";
}

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

Rejection Reject(PoisonReason reason, std::string detail, std::string event_id = "") {
  return Rejection{reason, std::move(detail), std::move(event_id)};
}

// The fields of an entry that has its form.
struct Fields {
  std::string envelope;
  std::string seal;
  std::string key_id;
  std::string personal;  // serialized PersonalValues; empty when absent
};

using FieldsOrRejection = std::variant<Fields, Rejection>;

// Form: not deleted, within the size limits, each field exactly once, a
// non-empty seal and key id, an optional personal field. Unknown extra fields are tolerated (a
// producer may add routing hints) but never read.
FieldsOrRejection ReadFields(const redis::StreamEntry& entry, const ValidationLimits& limits) {
  if (entry.deleted) {
    return Reject(PoisonReason::kDeleted,
                  "entry was deleted from the stream before it was acknowledged");
  }
  if (!entry.omitted.empty()) {
    return Reject(PoisonReason::kTooLarge,
                  absl::StrCat("entry not read: its fields are ", entry.omitted,
                               " (over the limit of ", limits.max_entry_bytes, " bytes)"));
  }
  size_t total = 0;
  for (const auto& [name, value] : entry.fields) total += name.size() + value.size();
  if (total > limits.max_entry_bytes) {
    return Reject(
        PoisonReason::kTooLarge,
        absl::StrCat("entry is ", total, " bytes, over the limit of ", limits.max_entry_bytes));
  }
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
  if (!fields[kEnvelope].has_value()) {
    return Reject(PoisonReason::kMissingField,
                  absl::StrCat("required field ", audit::kEnvelopeField, " is missing"));
  }
  for (size_t i : {kSeal, kKeyId}) {
    if (!fields[i].has_value() || fields[i]->empty()) {
      return Reject(
          PoisonReason::kMissingSignature,
          absl::StrCat("field ", kRequiredFields[i], " is missing or empty: unsealed entry"),
          ClaimedId(*fields[kEnvelope], limits));
    }
  }
  if (fields[kEnvelope]->size() > limits.max_event_bytes) {
    return Reject(PoisonReason::kTooLarge,
                  absl::StrCat("envelope is ", fields[kEnvelope]->size(),
                               " bytes, over the limit of ", limits.max_event_bytes));
  }
  return Fields{*std::move(fields[kEnvelope]), *std::move(fields[kSeal]),
                *std::move(fields[kKeyId]), std::move(fields[kPersonal]).value_or("")};
}

// The seal, with a key the directory lists for the stream's owner: a forger
// with Redis access but no owner key writes nothing.
std::optional<Rejection> CheckSeal(audit::Owner stream_owner, const Fields& f,
                                   const crypto::KeyDirectory& keys, seal::Verifier& seals,
                                   const ValidationLimits& limits) {
  const crypto::KeyDirectory::Entry* key = keys.Find(f.key_id);
  if (key == nullptr) {
    return Reject(PoisonReason::kUnknownKey,
                  absl::StrCat("key_id \"", Shown(f.key_id), "\" is not in the key directory"),
                  ClaimedId(f.envelope, limits));
  }
  const std::string stream_owner_name = audit::OwnerName(stream_owner);
  if (key->party != stream_owner_name) {
    return Reject(PoisonReason::kKeyOwnerMismatch,
                  absl::StrCat("key ", f.key_id, " belongs to ", Shown(key->party), ", not to ",
                               stream_owner_name),
                  ClaimedId(f.envelope, limits));
  }
  if (absl::Status s = seals.Verify(key->key, f.envelope, f.seal); !s.ok()) {
    return Reject(PoisonReason::kBadSignature,
                  absl::StrCat("seal does not verify with key ", f.key_id, ": ", s.message()),
                  ClaimedId(f.envelope, limits));
  }
  return std::nullopt;
}

// The sealed envelope, parsed: an event of the stream's owner, of a type and
// schema version Admin reads.
std::optional<Rejection> ParseEnvelope(audit::Owner stream_owner, const Fields& f,
                                       audit::AuditEvent& event) {
  if (f.envelope.empty() || !event.ParseFromString(f.envelope)) {
    return Reject(PoisonReason::kEnvelopeUnparseable,
                  "envelope is not a serialized ulticode.audit.v1.AuditEvent");
  }
  const std::string& id = event.event_id();
  if (!IsCanonicalId(id)) {
    return Reject(PoisonReason::kBadEventId,
                  absl::StrCat("event_id \"", Shown(id), "\" is not a lowercase UUID"));
  }
  if (event.record().audit_id() != id) {
    return Reject(PoisonReason::kAuditIdMismatch,
                  absl::StrCat("record.audit_id \"", Shown(event.record().audit_id()),
                               "\" differs from the event id"),
                  id);
  }
  const std::string stream_owner_name = audit::OwnerName(stream_owner);
  if (event.owner() != stream_owner) {
    return Reject(PoisonReason::kEnvelopeOwnerMismatch,
                  absl::StrCat("envelope owner \"", audit::OwnerName(event.owner()),
                               "\" arrived on the ", stream_owner_name, " stream"),
                  id);
  }
  if (event.schema_version() < audit::kEmbeddedPersonalDataSchemaVersion ||
      event.schema_version() > audit::kSchemaVersion) {
    return Reject(PoisonReason::kUnsupportedSchemaVersion,
                  absl::StrCat("schema_version ", event.schema_version(), " is not supported (",
                               audit::kEmbeddedPersonalDataSchemaVersion, " to ",
                               audit::kSchemaVersion, " are)"),
                  id);
  }
  if (!audit::IsKnownEventType(stream_owner, event.event_type())) {
    return Reject(PoisonReason::kUnknownEventType,
                  absl::StrCat("event_type \"", Shown(event.event_type()),
                               "\" is not defined for owner ", stream_owner_name),
                  id);
  }
  return std::nullopt;
}

// occurred_at is well formed, not before the contract's floor and not too
// far in Admin's future.
std::optional<Rejection> CheckOccurredAt(const audit::AuditEvent& event, absl::Time now,
                                         const ValidationLimits& limits, absl::Time* occurred) {
  const auto& ts = event.occurred_at();
  if (!event.has_occurred_at() || ts.nanos() < 0 || ts.nanos() > 999999999) {
    return Reject(PoisonReason::kBadTimestamp, "occurred_at is missing or malformed",
                  event.event_id());
  }
  *occurred = absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  if (*occurred < limits.min_occurred_at) {
    return Reject(
        PoisonReason::kBadTimestamp,
        absl::StrCat("occurred_at ", Utc(*occurred), " is before ", Utc(limits.min_occurred_at)),
        event.event_id());
  }
  if (*occurred > now + limits.max_future_skew) {
    return Reject(PoisonReason::kBadTimestamp,
                  absl::StrCat("occurred_at ", Utc(*occurred), " is more than ",
                               absl::FormatDuration(limits.max_future_skew), " in the future"),
                  event.event_id());
  }
  return std::nullopt;
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
    case PoisonReason::kUnknownEventType:
      return "unknown_event_type";
    case PoisonReason::kUnsupportedSchemaVersion:
      return "unsupported_schema_version";
    case PoisonReason::kEnvelopeUnparseable:
      return "envelope_unparseable";
    case PoisonReason::kAuditIdMismatch:
      return "audit_id_mismatch";
    case PoisonReason::kEnvelopeOwnerMismatch:
      return "envelope_owner_mismatch";
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
    case PoisonReason::kEventIdOfAnotherOwner:
      return "event_id_of_another_owner";
  }
  return "unknown";
}

Verdict ValidateEntry(audit::Owner stream_owner, const redis::StreamEntry& entry, absl::Time now,
                      const crypto::KeyDirectory& keys, seal::Verifier& seals,
                      const ValidationLimits& limits) {
  FieldsOrRejection read = ReadFields(entry, limits);
  if (auto* r = std::get_if<Rejection>(&read)) return std::move(*r);
  Fields& f = std::get<Fields>(read);
  if (auto r = CheckSeal(stream_owner, f, keys, seals, limits)) return *std::move(r);
  audit::AuditEvent event;
  if (auto r = ParseEnvelope(stream_owner, f, event)) return *std::move(r);
  absl::Time occurred;
  if (auto r = CheckOccurredAt(event, now, limits, &occurred)) return *std::move(r);
  if (absl::Status s = audit::Validate(event); !s.ok()) {
    return Reject(PoisonReason::kInvalidRecord, std::string(s.message()), event.event_id());
  }
  std::string id = event.event_id(), type = event.event_type();
  AcceptedEntry accepted{
      std::move(id),         stream_owner,           std::move(type),     occurred,
      std::move(f.envelope), std::move(f.seal),      std::move(f.key_id), std::move(event),
      /*personal=*/{},       /*refused_personal=*/{}};
  OpenPersonalValues(f.personal, accepted);
  return accepted;
}

void OpenPersonalValues(absl::string_view field, AcceptedEntry& entry) {
  if (field.empty()) return;
  audit::PersonalValues values;
  if (!values.ParseFromArray(field.data(), static_cast<int>(field.size()))) {
    entry.refused_personal.push_back(
        absl::StrCat(audit::kPersonalField, ": not a serialized ulticode.audit.v1.PersonalValues"));
    return;
  }
  entry.personal = audit::OpenCommitments(entry.event, values, &entry.refused_personal);
}

}  // namespace ulticode::admin::inbox
