// Builds the audit actor of a call: the resolved principal plus what the
// call says about where it came from. The principal never comes from a
// request field.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/audit/event.h"
#include "common/server/principal.h"
#include "google/protobuf/struct.pb.h"

namespace ulticode::outbox {

absl::StatusOr<audit::Actor> ActorFromCall(const server::PrincipalResolver& resolver,
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

}  // namespace ulticode::outbox
