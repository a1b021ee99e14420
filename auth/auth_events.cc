#include "auth/auth_events.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/mutation/actor.h"

namespace ulticode::auth::events {
namespace {

using mutation::Values;

using mutation::Change;

audit::AuditEvent Build(const audit::Actor& actor, const Change& c) {
  return mutation::BuildEvent(audit::v1::OWNER_AUTH, actor, c);
}

Values AuthzValues(const Authz& a) {
  Values v;
  v.Set("roles", a.roles).Set("authz_version", a.version);
  return v;
}

Values PolicyValues(const store::PolicyRow& p) {
  Values v;
  v.Set("min_password_length", static_cast<int64_t>(p.settings.min_password_length))
      .Set("lockout_threshold", static_cast<int64_t>(p.settings.lockout_threshold))
      .Set("mfa_required", p.settings.mfa_required)
      .Set("session_lifetime_seconds", p.settings.session_lifetime_seconds)
      .Set("version", p.version);
  return v;
}

}  // namespace

audit::AuditEvent UserCreated(const audit::Actor& actor, const store::UserRow& user) {
  return Build(actor, {.event_type = "auth.user.created",
                       .action = "create_user",
                       .subject = user.user_id,
                       .entity_type = "user",
                       .entity_id = user.user_id,
                       .new_value = Values()
                                        .Set("username", user.username)
                                        .Set("email", user.email)
                                        .Set("display_name", user.display_name)
                                        .Set("status", user.status)});
}

audit::AuditEvent UserDisabled(const audit::Actor& actor, const std::string& user_id,
                               const store::UserRow& before, const store::UserRow& after,
                               const std::string& reason) {
  return Build(
      actor, {.event_type = "auth.user.disabled",
              .action = "disable_user",
              .subject = user_id,
              .entity_type = "user",
              .entity_id = user_id,
              .old_value =
                  Values().Set("status", before.status).Set("authz_version", before.authz_version),
              .new_value = Values()
                               .Set("status", after.status)
                               .Set("authz_version", after.authz_version)
                               .Set("reason", reason)});
}

audit::AuditEvent RoleAssigned(const audit::Actor& actor, const std::string& user_id,
                               const std::string& role, const Authz& before, const Authz& after) {
  return Build(actor, {.event_type = "auth.role.assigned",
                       .action = "assign_role",
                       .subject = user_id,
                       .entity_type = "user_role",
                       .entity_id = absl::StrCat(user_id, "/", role),
                       .old_value = AuthzValues(before),
                       .new_value = AuthzValues(after)});
}

audit::AuditEvent RoleRevoked(const audit::Actor& actor, const std::string& user_id,
                              const std::string& role, const Authz& before, const Authz& after) {
  return Build(actor, {.event_type = "auth.role.revoked",
                       .action = "revoke_role",
                       .subject = user_id,
                       .entity_type = "user_role",
                       .entity_id = absl::StrCat(user_id, "/", role),
                       .old_value = AuthzValues(before),
                       .new_value = AuthzValues(after)});
}

audit::AuditEvent LoginPolicyUpdated(const audit::Actor& actor, const store::PolicyRow& before,
                                     const store::PolicyRow& after) {
  return Build(actor, {.event_type = "auth.login_policy.updated",
                       .action = "update_login_policy",
                       .subject = "login_policy",
                       .entity_type = "login_policy",
                       .entity_id = "default",
                       .old_value = PolicyValues(before),
                       .new_value = PolicyValues(after)});
}

}  // namespace ulticode::auth::events
