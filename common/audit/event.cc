#include "common/audit/event.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/text/text.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::audit {
namespace {

// Every event type, with the keys of its old/new values that hold personal
// data (docs/personal-data.md). A new type must say which of its keys are
// personal, even when none is: personal_test checks every type the owners
// emit against this list.
const std::vector<EventTypeContract>& Contracts() {
  static const auto* const kContracts = new std::vector<EventTypeContract>{
      {v1::OWNER_AUTH, "auth.user.created", {"display_name", "email", "username"}},
      // The operator's free-text reason is about the user.
      {v1::OWNER_AUTH, "auth.user.disabled", {"reason"}},
      {v1::OWNER_AUTH, "auth.role.assigned", {}},
      {v1::OWNER_AUTH, "auth.role.revoked", {}},
      {v1::OWNER_AUTH, "auth.login_policy.updated", {}},
      {v1::OWNER_AUTH, "auth.outbox.redriven", {}},
      {v1::OWNER_AUTH, "auth.outbox.replayed", {}},
      {v1::OWNER_AUTH, "auth.outbox.numbers_voided", {}},
      {v1::OWNER_AUTH, "auth.personal_data.erased", {}},
      {v1::OWNER_APP, "app.problem.created", {}},
      {v1::OWNER_APP, "app.problem.updated", {}},
      {v1::OWNER_APP, "app.contest.created", {}},
      {v1::OWNER_APP, "app.contest.problem_added", {}},
      {v1::OWNER_APP, "app.contest.problem_removed", {}},
      {v1::OWNER_APP, "app.contest.published", {}},
      {v1::OWNER_APP, "app.outbox.redriven", {}},
      {v1::OWNER_APP, "app.outbox.replayed", {}},
      {v1::OWNER_APP, "app.outbox.numbers_voided", {}},
      {v1::OWNER_APP, "app.personal_data.erased", {}},
      {v1::OWNER_ADMIN, "admin.inbox.requeued", {}},
      {v1::OWNER_ADMIN, "admin.poison.discarded", {}},
      {v1::OWNER_ADMIN, "admin.poison.replayed", {}},
      {v1::OWNER_ADMIN, "admin.personal_data.erased", {}},
  };
  return *kContracts;
}

// Struct nesting Admin will store (jsonb and the JSON printer recurse).
constexpr int kMaxValueDepth = 32;

// Every string of a record: what PostgreSQL text and jsonb can hold (valid
// UTF-8, no NUL) and nothing that can disguise a record (other controls;
// bidi or invisible characters in names). Values may be multi-line.
constexpr text::Rule kNameRule{.min_chars = 1, .max_chars = 256, .identifier = true};
constexpr text::Rule kOptionalNameRule{.max_chars = 256, .identifier = true};
constexpr text::Rule kCallRule{.max_chars = 512};
constexpr text::Rule kValueRule{
    .max_chars = kMaxEventBytes, .max_bytes = kMaxEventBytes, .multiline = true};
constexpr text::Rule kKeyRule{.min_chars = 1, .max_chars = 128, .identifier = true};

absl::Status ValidateValue(const std::string& path, const google::protobuf::Value& v, int depth);

absl::Status ValidateStruct(const std::string& path, const google::protobuf::Struct& s, int depth) {
  if (depth > kMaxValueDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": nested deeper than ", kMaxValueDepth, " levels"));
  }
  for (const auto& [key, value] : s.fields()) {
    RETURN_IF_ERROR(text::Check(absl::StrCat(path, " key"), key, kKeyRule));
    RETURN_IF_ERROR(ValidateValue(absl::StrCat(path, ".", key), value, depth + 1));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(const std::string& path, const google::protobuf::Value& v, int depth) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue:
    case google::protobuf::Value::kBoolValue:
      return absl::OkStatus();
    case google::protobuf::Value::kNumberValue:
      if (!std::isfinite(v.number_value())) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": number is not finite"));
      }
      return absl::OkStatus();
    case google::protobuf::Value::kStringValue:
      return text::Check(path, v.string_value(), kValueRule);
    case google::protobuf::Value::kStructValue:
      return ValidateStruct(path, v.struct_value(), depth);
    case google::protobuf::Value::kListValue:
      if (depth > kMaxValueDepth) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": nested deeper than ", kMaxValueDepth, " levels"));
      }
      for (int i = 0; i < v.list_value().values_size(); ++i) {
        RETURN_IF_ERROR(
            ValidateValue(absl::StrCat(path, "[", i, "]"), v.list_value().values(i), depth + 1));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat(path, ": value has no kind"));
  }
}

absl::Status ValidateRecordText(const v1::AuditRecord& r) {
  RETURN_IF_ERROR(text::Check("record.actor", r.actor(), kNameRule));
  RETURN_IF_ERROR(text::Check("record.subject", r.subject(), kOptionalNameRule));
  RETURN_IF_ERROR(text::Check("record.action", r.action(), kNameRule));
  RETURN_IF_ERROR(text::Check("record.entity_type", r.entity_type(), kNameRule));
  RETURN_IF_ERROR(text::Check("record.entity_id", r.entity_id(), kNameRule));
  RETURN_IF_ERROR(text::Check("record.client_ip", r.client_ip(), kCallRule));
  RETURN_IF_ERROR(text::Check("record.user_agent", r.user_agent(), kCallRule));
  RETURN_IF_ERROR(text::Check("record.request_id", r.request_id(), kCallRule));
  RETURN_IF_ERROR(text::Check("record.trace_id", r.trace_id(), kCallRule));
  if (r.has_old_value()) RETURN_IF_ERROR(ValidateStruct("record.old_value", r.old_value(), 1));
  if (r.has_new_value()) RETURN_IF_ERROR(ValidateStruct("record.new_value", r.new_value(), 1));
  return absl::OkStatus();
}

}  // namespace

std::string OwnerName(Owner owner) {
  switch (owner) {
    case v1::OWNER_AUTH:
      return "auth";
    case v1::OWNER_APP:
      return "app";
    case v1::OWNER_ADMIN:
      return "admin";
    default:
      return "";
  }
}

Owner OwnerFromName(absl::string_view name) {
  if (name == "auth") return v1::OWNER_AUTH;
  if (name == "app") return v1::OWNER_APP;
  if (name == "admin") return v1::OWNER_ADMIN;
  return v1::OWNER_UNSPECIFIED;
}

std::string StreamFor(Owner owner) { return absl::StrCat("audit:", OwnerName(owner)); }

const std::vector<EventTypeContract>& EventTypes() { return Contracts(); }

const EventTypeContract* FindEventType(Owner owner, absl::string_view event_type) {
  for (const EventTypeContract& c : Contracts()) {
    if (c.owner == owner && c.type == event_type) return &c;
  }
  return nullptr;
}

bool IsKnownEventType(Owner owner, absl::string_view event_type) {
  return FindEventType(owner, event_type) != nullptr;
}

AuditEvent NewEvent(Owner owner, absl::string_view event_type, const Actor& actor,
                    absl::Time occurred_at) {
  AuditEvent event;
  const std::string id = ids::NewUuidV7At(occurred_at);
  event.set_event_id(id);
  event.set_owner(owner);
  event.set_event_type(std::string(event_type));
  // Built with its personal values in it; CommitPersonalData
  // (personal.h) moves them out and makes it schema_version 2.
  event.set_schema_version(kEmbeddedPersonalDataSchemaVersion);
  *event.mutable_occurred_at() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(occurred_at));
  auto* record = event.mutable_record();
  record->set_audit_id(id);
  record->set_actor(actor.principal);
  record->set_client_ip(actor.client_ip);
  record->set_user_agent(actor.user_agent);
  record->set_request_id(actor.request_id);
  record->set_trace_id(actor.trace_id);
  return event;
}

absl::Status Validate(const AuditEvent& event, const KnownEventTypes& known) {
  if (!ids::IsValidUuid(event.event_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("event_id \"", event.event_id().substr(0, 64), "\" is not a UUID"));
  }
  if (event.owner() != v1::OWNER_AUTH && event.owner() != v1::OWNER_APP &&
      event.owner() != v1::OWNER_ADMIN) {
    return absl::InvalidArgumentError("owner is unspecified or unknown");
  }
  if (event.schema_version() > kSchemaVersion) {
    return absl::UnimplementedError(absl::StrCat("schema_version ", event.schema_version(),
                                                 " is newer than this binary knows"));
  }
  if (event.schema_version() < kEmbeddedPersonalDataSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema_version ", event.schema_version(), " is not supported"));
  }
  if (!known(event.owner(), event.event_type())) {
    if (event.event_type().empty()) return absl::InvalidArgumentError("event_type is empty");
    return absl::UnimplementedError(absl::StrCat("event_type \"", event.event_type().substr(0, 64),
                                                 "\" is not known to this binary for owner ",
                                                 OwnerName(event.owner())));
  }
  if (!event.has_occurred_at() || event.occurred_at().seconds() <= 0) {
    return absl::InvalidArgumentError("occurred_at is missing");
  }
  // What timestamptz and RFC 3339 both hold: years 1970..9999.
  if (event.occurred_at().seconds() > kMaxOccurredAtSeconds || event.occurred_at().nanos() < 0 ||
      event.occurred_at().nanos() > 999999999) {
    return absl::InvalidArgumentError("occurred_at is out of range");
  }
  if (!event.has_record()) return absl::InvalidArgumentError("record is missing");
  const auto& r = event.record();
  if (r.audit_id() != event.event_id()) {
    return absl::InvalidArgumentError("record.audit_id differs from event_id");
  }
  if (r.actor().empty()) return absl::InvalidArgumentError("record.actor is empty");
  if (r.action().empty()) return absl::InvalidArgumentError("record.action is empty");
  if (r.entity_type().empty()) return absl::InvalidArgumentError("record.entity_type is empty");
  if (r.entity_id().empty()) return absl::InvalidArgumentError("record.entity_id is empty");
  RETURN_IF_ERROR(ValidateRecordText(r));
  return ValidatePersonalData(event);
}

bool IsNewerThanKnown(const absl::Status& status) { return absl::IsUnimplemented(status); }

std::string Serialize(const AuditEvent& event) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    event.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace ulticode::audit
