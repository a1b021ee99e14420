#include "auth/auth_service.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "auth/auth_events.h"
#include "auth/auth_store.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::auth {
namespace {

using google::protobuf::util::TimeUtil;

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

v1::User UserProto(const store::UserRow& row) {
  v1::User u;
  u.set_user_id(row.user_id);
  u.set_username(row.username);
  u.set_email(row.email);
  u.set_display_name(row.display_name);
  u.set_status(row.active() ? v1::USER_STATUS_ACTIVE : v1::USER_STATUS_DISABLED);
  u.set_authz_version(row.authz_version);
  *u.mutable_created_at() = ToProto(row.created_at);
  *u.mutable_updated_at() = ToProto(row.updated_at);
  return u;
}

v1::LoginPolicy PolicyProto(const store::PolicyRow& row) {
  v1::LoginPolicy p;
  p.set_min_password_length(row.settings.min_password_length);
  p.set_lockout_threshold(row.settings.lockout_threshold);
  p.set_mfa_required(row.settings.mfa_required);
  p.mutable_session_lifetime()->set_seconds(row.settings.session_lifetime_seconds);
  p.set_version(row.version);
  *p.mutable_updated_at() = ToProto(row.updated_at);
  return p;
}

// The settable fields of a LoginPolicy: the paths of an update mask.
constexpr std::array<absl::string_view, 4> kPolicyPaths = {
    "min_password_length", "lockout_threshold", "mfa_required", "session_lifetime"};

// The paths an update changes (ValidateUpdateLoginPolicy: at least one).
std::vector<std::string> PolicyPaths(const v1::UpdateLoginPolicyRequest& req) {
  return {req.update_mask().paths().begin(), req.update_mask().paths().end()};
}

// `before` with the fields of `p` named by `paths`.
store::PolicySettings SettingsOf(store::PolicySettings before, const v1::LoginPolicy& p,
                                 const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (path == "min_password_length") before.min_password_length = p.min_password_length();
    if (path == "lockout_threshold") before.lockout_threshold = p.lockout_threshold();
    if (path == "mfa_required") before.mfa_required = p.mfa_required();
    if (path == "session_lifetime")
      before.session_lifetime_seconds = p.session_lifetime().seconds();
  }
  return before;
}

absl::Status UserNotFound(const std::string& user_id) {
  return absl::NotFoundError(absl::StrCat("user ", user_id, " does not exist"));
}

absl::Status Taken(store::Clash clash, const v1::CreateUserRequest& req) {
  return absl::AlreadyExistsError(clash == store::Clash::kUsername
                                      ? absl::StrCat("username \"", req.username(), "\" is taken")
                                      : absl::StrCat("email \"", req.email(), "\" is taken"));
}

// How every read RPC ends: the value, or the error mapped for `method`.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* out, const char* method) {
  if (!result.ok()) return server::ToGrpcStatus(result.status(), method);
  *out = std::move(result).value();
  return grpc::Status::OK;
}

constexpr text::Rule kEmailRule{
    .min_chars = 1, .max_chars = 254, .max_bytes = 254, .identifier = true};
constexpr text::Rule kDisplayNameRule{.max_chars = 128, .identifier = true};
// Single-line: a reason is shown in one row of an audit listing.
constexpr text::Rule kReasonRule{.min_chars = 1, .max_chars = 512};

absl::Status ValidateUserId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("user_id: required");
  if (!ids::IsValidUuid(id)) return absl::InvalidArgumentError("user_id: must be a UUID");
  return absl::OkStatus();
}

absl::Status ValidateRoleName(const std::string& role) {
  if (role.empty()) return absl::InvalidArgumentError("role: required");
  if (role.size() > 32) return absl::InvalidArgumentError("role: at most 32 characters");
  for (char c : role) {
    if (!(absl::ascii_islower(c) || c == '_')) {
      return absl::InvalidArgumentError("role: only lowercase letters and '_'");
    }
  }
  return absl::OkStatus();
}

// AssignRole / RevokeRole responses have the same shape.
template <typename Response>
Response RolesResponse(const events::Authz& authz) {
  Response resp;
  for (const auto& r : authz.roles) resp.add_roles(r);
  resp.set_authz_version(authz.version);
  return resp;
}

// Shared body of AssignRole / RevokeRole.
template <typename Response>
absl::StatusOr<mutation::Outcome<Response>> ChangeRole(pg::Transaction& tx,
                                                       const audit::Actor& actor,
                                                       const std::string& user_id,
                                                       const std::string& role, bool assign) {
  ASSIGN_OR_RETURN(std::optional<store::UserRow> user, store::LockUser(tx, user_id));
  if (!user.has_value()) return UserNotFound(user_id);
  ASSIGN_OR_RETURN(bool role_exists, store::RoleExists(tx, role));
  if (!role_exists) return absl::NotFoundError(absl::StrCat("role \"", role, "\" does not exist"));
  if (assign && !user->active()) {
    return absl::FailedPreconditionError(absl::StrCat("user ", user_id, " is disabled"));
  }
  events::Authz before{.version = user->authz_version};
  ASSIGN_OR_RETURN(before.roles, store::ListRoles(tx, user_id));
  ASSIGN_OR_RETURN(bool changed, assign ? store::Grant(tx, user_id, role, actor.principal)
                                        : store::Revoke(tx, user_id, role));
  if (!changed) return mutation::Unchanged(RolesResponse<Response>(before));
  events::Authz after;
  ASSIGN_OR_RETURN(after.version, store::BumpAuthz(tx, user_id));
  ASSIGN_OR_RETURN(after.roles, store::ListRoles(tx, user_id));
  audit::AuditEvent event = assign ? events::RoleAssigned(actor, user_id, role, before, after)
                                   : events::RoleRevoked(actor, user_id, role, before, after);
  return mutation::Changed(std::move(event), RolesResponse<Response>(after));
}

}  // namespace

absl::Status ValidateCreateUser(const v1::CreateUserRequest& req) {
  const std::string& u = req.username();
  if (u.size() < 3 || u.size() > 32) {
    return absl::InvalidArgumentError("username: must be 3..32 characters");
  }
  if (!absl::ascii_islower(u[0])) {
    return absl::InvalidArgumentError("username: must start with a lowercase letter");
  }
  for (char c : u) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.' || c == '-')) {
      return absl::InvalidArgumentError("username: only [a-z0-9_.-] allowed");
    }
  }
  const std::string& e = req.email();
  RETURN_IF_ERROR(text::Check("email", e, kEmailRule));
  const auto at = e.find('@');
  if (at == std::string::npos || at == 0 || e.find('@', at + 1) != std::string::npos ||
      e.find('.', at) == std::string::npos || e.back() == '.' || e.find(' ') != std::string::npos) {
    return absl::InvalidArgumentError("email: must look like local@domain.tld");
  }
  return text::Check("display_name", req.display_name(), kDisplayNameRule);
}

absl::Status ValidateDisableUser(const v1::DisableUserRequest& req) {
  RETURN_IF_ERROR(ValidateUserId(req.user_id()));
  return text::Check("reason", req.reason(), kReasonRule);
}

absl::Status ValidateRoleChange(const std::string& user_id, const std::string& role) {
  RETURN_IF_ERROR(ValidateUserId(user_id));
  return ValidateRoleName(role);
}

absl::Status ValidateUpdateLoginPolicy(const v1::UpdateLoginPolicyRequest& req) {
  if (!req.has_login_policy()) return absl::InvalidArgumentError("login_policy: required");
  // Required: without it a client that leaves a field out (mfa_required)
  // would set it to its zero value.
  if (req.update_mask().paths().empty()) {
    return absl::InvalidArgumentError("update_mask: at least one path is required");
  }
  for (int i = 0; i < req.update_mask().paths_size(); ++i) {
    const std::string& path = req.update_mask().paths(i);
    if (std::find(kPolicyPaths.begin(), kPolicyPaths.end(), path) == kPolicyPaths.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update_mask.paths[", i, "]: \"", text::TruncateUtf8(path, 64),
          "\" is not a settable field (min_password_length, lockout_threshold, mfa_required, "
          "session_lifetime)"));
    }
  }
  return ValidateLoginPolicy(req.login_policy(), PolicyPaths(req));
}

absl::Status ValidateLoginPolicy(const v1::LoginPolicy& p, const std::vector<std::string>& paths) {
  const auto changes = [&](absl::string_view field) {
    return std::find(paths.begin(), paths.end(), field) != paths.end();
  };
  if (changes("min_password_length") &&
      (p.min_password_length() < 8 || p.min_password_length() > 128)) {
    return absl::InvalidArgumentError("login_policy.min_password_length: must be 8..128");
  }
  if (changes("lockout_threshold") && (p.lockout_threshold() < 1 || p.lockout_threshold() > 100)) {
    return absl::InvalidArgumentError("login_policy.lockout_threshold: must be 1..100");
  }
  const google::protobuf::Duration& lifetime = p.session_lifetime();
  if (changes("session_lifetime") &&
      (lifetime.nanos() != 0 || lifetime.seconds() < 60 || lifetime.seconds() > 2592000)) {
    return absl::InvalidArgumentError(
        "login_policy.session_lifetime: whole seconds, 60s..2592000s (30 days)");
  }
  return absl::OkStatus();
}

absl::StatusOr<mutation::Outcome<v1::CreateUserResponse>> CreateUserIn(
    pg::Transaction& tx, const audit::Actor& actor, const v1::CreateUserRequest& req) {
  const store::NewUser user{
      .user_id = ids::NewUuidV7(),
      .username = req.username(),
      .email = req.email(),
      .display_name = req.display_name().empty() ? req.username() : req.display_name()};
  ASSIGN_OR_RETURN(std::optional<store::UserRow> row, store::InsertUser(tx, user));
  if (!row) {  // only now: which of the two is taken
    ASSIGN_OR_RETURN(store::Clash clash, store::FindClash(tx, req.username(), req.email()));
    if (clash != store::Clash::kNone) return Taken(clash, req);
    return absl::AbortedError("users: a username or email was taken and freed meanwhile");
  }
  v1::CreateUserResponse out;
  *out.mutable_user() = UserProto(*row);
  return mutation::Changed(events::UserCreated(actor, *row), std::move(out));
}

grpc::ServerUnaryReactor* AuthServiceImpl::CreateUser(grpc::CallbackServerContext* ctx,
                                                      const v1::CreateUserRequest* req,
                                                      v1::CreateUserResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "CreateUser", *req, [&] { return ValidateCreateUser(*req); },
        [&](pg::Transaction& tx, const audit::Actor& actor) {
          return CreateUserIn(tx, actor, *req);
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::DisableUser(grpc::CallbackServerContext* ctx,
                                                       const v1::DisableUserRequest* req,
                                                       v1::DisableUserResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    const std::string& user_id = req->user_id();
    return mutations_.Handle(
        *ctx, "DisableUser", *req, [&] { return ValidateDisableUser(*req); },
        [&](pg::Transaction& tx, const audit::Actor& actor)
            -> absl::StatusOr<mutation::Outcome<v1::DisableUserResponse>> {
          ASSIGN_OR_RETURN(std::optional<store::UserRow> before, store::LockUser(tx, user_id));
          if (!before.has_value()) return UserNotFound(user_id);
          v1::DisableUserResponse out;
          if (!before->active()) {
            *out.mutable_user() = UserProto(*before);
            return mutation::Unchanged(std::move(out));
          }
          ASSIGN_OR_RETURN(store::UserRow after, store::DisableUser(tx, user_id, req->reason()));
          *out.mutable_user() = UserProto(after);
          return mutation::Changed(
              events::UserDisabled(actor, user_id, *before, after, req->reason()), std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::AssignRole(grpc::CallbackServerContext* ctx,
                                                      const v1::AssignRoleRequest* req,
                                                      v1::AssignRoleResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "AssignRole", *req, [&] { return ValidateRoleChange(req->user_id(), req->role()); },
        [&](pg::Transaction& tx, const audit::Actor& actor) {
          return ChangeRole<v1::AssignRoleResponse>(tx, actor, req->user_id(), req->role(), true);
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::RevokeRole(grpc::CallbackServerContext* ctx,
                                                      const v1::RevokeRoleRequest* req,
                                                      v1::RevokeRoleResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "RevokeRole", *req, [&] { return ValidateRoleChange(req->user_id(), req->role()); },
        [&](pg::Transaction& tx, const audit::Actor& actor) {
          return ChangeRole<v1::RevokeRoleResponse>(tx, actor, req->user_id(), req->role(), false);
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::UpdateLoginPolicy(
    grpc::CallbackServerContext* ctx, const v1::UpdateLoginPolicyRequest* req,
    v1::UpdateLoginPolicyResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "UpdateLoginPolicy", *req, [&] { return ValidateUpdateLoginPolicy(*req); },
        [&](pg::Transaction& tx, const audit::Actor& actor)
            -> absl::StatusOr<mutation::Outcome<v1::UpdateLoginPolicyResponse>> {
          ASSIGN_OR_RETURN(std::optional<store::PolicyRow> before, store::LockPolicy(tx));
          if (!before.has_value()) return absl::InternalError("login_policy row is missing");
          const store::PolicySettings want =
              SettingsOf(before->settings, req->login_policy(), PolicyPaths(*req));
          v1::UpdateLoginPolicyResponse out;
          if (before->settings == want) {
            *out.mutable_login_policy() = PolicyProto(*before);
            return mutation::Unchanged(std::move(out));
          }
          ASSIGN_OR_RETURN(store::PolicyRow after, store::UpdatePolicy(tx, want, actor.principal));
          *out.mutable_login_policy() = PolicyProto(after);
          return mutation::Changed(events::LoginPolicyUpdated(actor, *before, after),
                                   std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::GetUser(grpc::CallbackServerContext* ctx,
                                                   const v1::GetUserRequest* req, v1::User* resp) {
  return calls_.Run(ctx, [=, this] {
    auto user = [&]() -> absl::StatusOr<v1::User> {
      RETURN_IF_ERROR(authorizer_.Admit(*ctx, "GetUser").status());
      RETURN_IF_ERROR(ValidateUserId(req->user_id()));
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      ASSIGN_OR_RETURN(std::optional<store::UserRow> row, store::GetUser(*conn, req->user_id()));
      if (!row.has_value()) return UserNotFound(req->user_id());
      return UserProto(*row);
    };
    return Reply(user(), resp, "GetUser");
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::GetUserRoles(grpc::CallbackServerContext* ctx,
                                                        const v1::GetUserRolesRequest* req,
                                                        v1::UserRoles* resp) {
  return calls_.Run(ctx, [=, this] {
    auto roles = [&]() -> absl::StatusOr<v1::UserRoles> {
      RETURN_IF_ERROR(authorizer_.Admit(*ctx, "GetUserRoles").status());
      RETURN_IF_ERROR(ValidateUserId(req->user_id()));
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      ASSIGN_OR_RETURN(std::optional<store::UserRow> user, store::GetUser(*conn, req->user_id()));
      if (!user.has_value()) return UserNotFound(req->user_id());
      events::Authz authz{.version = user->authz_version};
      ASSIGN_OR_RETURN(authz.roles, store::ListRoles(*conn, req->user_id()));
      return RolesResponse<v1::UserRoles>(authz);
    };
    return Reply(roles(), resp, "GetUserRoles");
  });
}

grpc::ServerUnaryReactor* AuthServiceImpl::GetLoginPolicy(grpc::CallbackServerContext* ctx,
                                                          const v1::GetLoginPolicyRequest* req,
                                                          v1::LoginPolicy* resp) {
  return calls_.Run(ctx, [=, this] {
    auto policy = [&]() -> absl::StatusOr<v1::LoginPolicy> {
      RETURN_IF_ERROR(authorizer_.Admit(*ctx, "GetLoginPolicy").status());
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      ASSIGN_OR_RETURN(std::optional<store::PolicyRow> row, store::GetPolicy(*conn));
      if (!row.has_value()) return absl::InternalError("no login policy");
      return PolicyProto(*row);
    };
    return Reply(policy(), resp, "GetLoginPolicy");
  });
}

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"CreateUser", "auth.admin"},        {"DisableUser", "auth.admin"},
      {"AssignRole", "auth.admin"},        {"RevokeRole", "auth.admin"},
      {"UpdateLoginPolicy", "auth.admin"}, {"GetUser", "auth.reader"},
      {"GetUserRoles", "auth.reader"},     {"GetLoginPolicy", "auth.reader"},
  };
  return *rules;
}

const std::vector<std::string>& RuntimeGrants() {
  static const auto* grants = new std::vector<std::string>{
      "GRANT SELECT, INSERT, UPDATE ON users TO {role}",
      "GRANT SELECT ON roles TO {role}",
      "GRANT SELECT, INSERT, DELETE ON user_roles TO {role}",
      "GRANT SELECT, UPDATE ON login_policy TO {role}",
  };
  return *grants;
}

}  // namespace ulticode::auth
