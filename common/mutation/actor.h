// Builds the audit actor of a call: the resolved principal plus what the
// call says about where it came from. The principal never comes from a
// request field.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/audit/event.h"
#include "common/server/principal.h"
#include "google/protobuf/struct.pb.h"

namespace ulticode::mutation {

absl::StatusOr<audit::Actor> ActorFromCall(const server::Principal& principal,
                                           const grpc::ServerContextBase& context,
                                           const std::string& request_id);

// Small builder for the structured old/new values of an audit record.
class Values {
 public:
  Values& Set(const std::string& key, const std::string& value);
  Values& Set(const std::string& key, const char* value) { return Set(key, std::string(value)); }
  Values& Set(const std::string& key, int64_t value);
  Values& Set(const std::string& key, bool value);
  Values& Set(const std::string& key, const std::vector<std::string>& list);
  const google::protobuf::Struct& get() const { return s_; }

 private:
  google::protobuf::Struct s_;
};

// What an audit record says about one change; the services' event builders
// (auth/auth_events, app/app_events) describe each change with one.
struct Change {
  const char* event_type;
  const char* action;
  std::string subject;
  const char* entity_type;
  std::string entity_id;
  std::optional<Values> old_value = std::nullopt;
  std::optional<Values> new_value = std::nullopt;
};

// A fresh event of `owner` for `change` made by `actor`, now.
audit::AuditEvent BuildEvent(audit::Owner owner, const audit::Actor& actor, const Change& change);

}  // namespace ulticode::mutation
