#include "common/audit/event.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/ids/uuid.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::audit {
namespace {

constexpr const char* kAuthTypes[] = {
    "auth.user.created",  "auth.user.disabled",        "auth.role.assigned",
    "auth.role.revoked",  "auth.login_policy.updated",
};
constexpr const char* kAppTypes[] = {
    "app.problem.created",         "app.problem.updated",           "app.contest.created",
    "app.contest.problem_added",   "app.contest.problem_removed",   "app.contest.published",
};

}  // namespace

std::string OwnerName(Owner owner) {
  switch (owner) {
    case v1::OWNER_AUTH: return "auth";
    case v1::OWNER_APP: return "app";
    default: return "";
  }
}

Owner OwnerFromName(absl::string_view name) {
  if (name == "auth") return v1::OWNER_AUTH;
  if (name == "app") return v1::OWNER_APP;
  return v1::OWNER_UNSPECIFIED;
}

std::string StreamFor(Owner owner) { return absl::StrCat("audit:", OwnerName(owner)); }

bool IsKnownEventType(Owner owner, absl::string_view event_type) {
  if (owner == v1::OWNER_AUTH) {
    for (const char* t : kAuthTypes) if (event_type == t) return true;
  } else if (owner == v1::OWNER_APP) {
    for (const char* t : kAppTypes) if (event_type == t) return true;
  }
  return false;
}

AuditEvent NewEvent(Owner owner, absl::string_view event_type, const Actor& actor,
                    absl::Time occurred_at) {
  AuditEvent event;
  const std::string id = ids::NewUuidV7At(occurred_at);
  event.set_event_id(id);
  event.set_owner(owner);
  event.set_event_type(std::string(event_type));
  event.set_schema_version(kSchemaVersion);
  *event.mutable_occurred_at() = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      absl::ToUnixMicros(occurred_at));
  auto* record = event.mutable_record();
  record->set_audit_id(id);
  record->set_actor(actor.principal);
  record->set_client_ip(actor.client_ip);
  record->set_user_agent(actor.user_agent);
  record->set_request_id(actor.request_id);
  record->set_trace_id(actor.trace_id);
  return event;
}

absl::Status Validate(const AuditEvent& event) {
  if (!ids::IsValidUuid(event.event_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("event_id \"", event.event_id().substr(0, 64), "\" is not a UUID"));
  }
  if (event.owner() != v1::OWNER_AUTH && event.owner() != v1::OWNER_APP) {
    return absl::InvalidArgumentError("owner is unspecified or unknown");
  }
  if (!IsKnownEventType(event.owner(), event.event_type())) {
    return absl::InvalidArgumentError(absl::StrCat("event_type \"", event.event_type().substr(0, 64),
                                                   "\" is not known for owner ",
                                                   OwnerName(event.owner())));
  }
  if (event.schema_version() != kSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema_version ", event.schema_version(), " is not supported"));
  }
  if (!event.has_occurred_at() || event.occurred_at().seconds() <= 0) {
    return absl::InvalidArgumentError("occurred_at is missing");
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
  return absl::OkStatus();
}

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
