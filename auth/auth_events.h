// The audit event of each change Auth makes: one builder per change, from
// the typed rows before and after it. Each builder fills the envelope
// (audit::NewEvent, occurred now) and the whole record: action, subject,
// entity and the old/new values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "auth/auth_store.h"
#include "common/audit/event.h"

namespace ulticode::auth::events {

// A user's roles and authz version on one side of a role change.
struct Authz {
  std::vector<std::string> roles = {};
  int64_t version = 0;
};

// auth.user.created: the new user's names and status.
audit::AuditEvent UserCreated(const audit::Actor& actor, const store::UserRow& user);

// auth.user.disabled: status and authz version before and after, and why.
// `user_id` as the request spelled it (ids are accepted in either case).
audit::AuditEvent UserDisabled(const audit::Actor& actor, const std::string& user_id,
                               const store::UserRow& before, const store::UserRow& after,
                               const std::string& reason);

// auth.role.assigned / auth.role.revoked: the user's roles and authz version
// before and after; the entity is "<user_id>/<role>".
audit::AuditEvent RoleAssigned(const audit::Actor& actor, const std::string& user_id,
                               const std::string& role, const Authz& before, const Authz& after);
audit::AuditEvent RoleRevoked(const audit::Actor& actor, const std::string& user_id,
                              const std::string& role, const Authz& before, const Authz& after);

// auth.login_policy.updated: the settings and version before and after.
audit::AuditEvent LoginPolicyUpdated(const audit::Actor& actor, const store::PolicyRow& before,
                                     const store::PolicyRow& after);

}  // namespace ulticode::auth::events
