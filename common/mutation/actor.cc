#include "common/mutation/actor.h"

#include "absl/time/clock.h"
#include "common/base/status_macros.h"

namespace ulticode::mutation {

absl::StatusOr<audit::Actor> ActorFromCall(const server::Principal& principal,
                                           const grpc::ServerContextBase& context,
                                           const std::string& request_id) {
  ASSIGN_OR_RETURN(server::CallInfo call, server::GetCallInfo(context));
  return audit::Actor{principal.id, call.client_ip, call.user_agent, request_id, call.trace_id};
}

Values& Values::Set(const std::string& key, const std::string& value) {
  (*s_.mutable_fields())[key].set_string_value(value);
  return *this;
}
Values& Values::Set(const std::string& key, int64_t value) {
  // JSON numbers lose integers past 2^53; ids and versions stay far below.
  (*s_.mutable_fields())[key].set_number_value(static_cast<double>(value));
  return *this;
}
Values& Values::Set(const std::string& key, bool value) {
  (*s_.mutable_fields())[key].set_bool_value(value);
  return *this;
}
Values& Values::Set(const std::string& key, const std::vector<std::string>& list) {
  auto* l = (*s_.mutable_fields())[key].mutable_list_value();
  for (const auto& item : list) l->add_values()->set_string_value(item);
  return *this;
}

audit::AuditEvent BuildEvent(audit::Owner owner, const audit::Actor& actor, const Change& c) {
  audit::AuditEvent event = audit::NewEvent(owner, c.event_type, actor, absl::Now());
  auto* rec = event.mutable_record();
  rec->set_action(c.action);
  rec->set_subject(c.subject);
  rec->set_entity_type(c.entity_type);
  rec->set_entity_id(c.entity_id);
  if (c.old_value.has_value()) *rec->mutable_old_value() = c.old_value->get();
  if (c.new_value.has_value()) *rec->mutable_new_value() = c.new_value->get();
  return event;
}

}  // namespace ulticode::mutation
