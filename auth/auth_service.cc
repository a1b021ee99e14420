#include "auth/auth_service.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/outbox/actor.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::auth {
namespace {

using google::protobuf::util::TimeUtil;
using outbox::Values;

constexpr pg::Statement kFindClash{
    "auth.user.find_clash",
    "SELECT username = $1, email = $2 FROM users WHERE username = $1 OR email = $2 LIMIT 1"};
constexpr pg::Statement kInsertUser{
    "auth.user.insert",
    "INSERT INTO users (user_id, username, email, display_name, status) "
    "VALUES ($1::uuid, $2, $3, $4, 'ACTIVE') "
    "RETURNING user_id::text, username, email, display_name, status, authz_version, created_at, "
    "updated_at"};
constexpr pg::Statement kLockUser{
    "auth.user.lock",
    "SELECT user_id::text, username, email, display_name, status, authz_version, created_at, "
    "updated_at FROM users WHERE user_id = $1::uuid FOR UPDATE"};
constexpr pg::Statement kGetUser{
    "auth.user.get",
    "SELECT user_id::text, username, email, display_name, status, authz_version, created_at, "
    "updated_at FROM users WHERE user_id = $1::uuid"};
constexpr pg::Statement kDisableUser{
    "auth.user.disable",
    "UPDATE users SET status = 'DISABLED', disabled_reason = $2, authz_version = authz_version + 1,"
    " updated_at = now() WHERE user_id = $1::uuid "
    "RETURNING user_id::text, username, email, display_name, status, authz_version, created_at, "
    "updated_at"};
constexpr pg::Statement kRoleExists{"auth.role.exists", "SELECT 1 FROM roles WHERE name = $1"};
constexpr pg::Statement kListRoles{
    "auth.user_roles.list", "SELECT role FROM user_roles WHERE user_id = $1::uuid ORDER BY role"};
constexpr pg::Statement kGrant{
    "auth.user_roles.grant",
    "INSERT INTO user_roles (user_id, role, granted_by) VALUES ($1::uuid, $2, $3) "
    "ON CONFLICT DO NOTHING"};
constexpr pg::Statement kRevoke{"auth.user_roles.revoke",
                                "DELETE FROM user_roles WHERE user_id = $1::uuid AND role = $2"};
constexpr pg::Statement kBumpAuthz{
    "auth.user.bump_authz",
    "UPDATE users SET authz_version = authz_version + 1, updated_at = now() "
    "WHERE user_id = $1::uuid RETURNING authz_version"};
constexpr pg::Statement kLockPolicy{
    "auth.policy.lock",
    "SELECT min_password_length, lockout_threshold, mfa_required, session_lifetime_seconds, "
    "version, updated_at FROM login_policy WHERE id = 1 FOR UPDATE"};
constexpr pg::Statement kGetPolicy{
    "auth.policy.get",
    "SELECT min_password_length, lockout_threshold, mfa_required, session_lifetime_seconds, "
    "version, updated_at FROM login_policy WHERE id = 1"};
constexpr pg::Statement kUpdatePolicy{
    "auth.policy.update",
    "UPDATE login_policy SET min_password_length = $1, lockout_threshold = $2, mfa_required = $3,"
    " session_lifetime_seconds = $4, version = version + 1, updated_by = $5, updated_at = now()"
    " WHERE id = 1 RETURNING min_password_length, lockout_threshold, mfa_required,"
    " session_lifetime_seconds, version, updated_at"};

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

v1::User UserFromRow(const pg::Result& r, int row) {
  v1::User u;
  u.set_user_id(r.GetString(row, 0));
  u.set_username(r.GetString(row, 1));
  u.set_email(r.GetString(row, 2));
  u.set_display_name(r.GetString(row, 3));
  u.set_status(r.Get(row, 4) == "ACTIVE" ? v1::USER_STATUS_ACTIVE : v1::USER_STATUS_DISABLED);
  u.set_authz_version(r.GetInt64(row, 5));
  *u.mutable_created_at() = ToProto(r.GetTime(row, 6));
  *u.mutable_updated_at() = ToProto(r.GetTime(row, 7));
  return u;
}

v1::LoginPolicy PolicyFromRow(const pg::Result& r) {
  v1::LoginPolicy p;
  p.set_min_password_length(static_cast<int32_t>(r.GetInt64(0, 0)));
  p.set_lockout_threshold(static_cast<int32_t>(r.GetInt64(0, 1)));
  p.set_mfa_required(r.GetBool(0, 2));
  p.set_session_lifetime_seconds(r.GetInt64(0, 3));
  p.set_version(r.GetInt64(0, 4));
  *p.mutable_updated_at() = ToProto(r.GetTime(0, 5));
  return p;
}

Values PolicyValues(const v1::LoginPolicy& p) {
  Values v;
  v.Set("min_password_length", static_cast<int64_t>(p.min_password_length()))
      .Set("lockout_threshold", static_cast<int64_t>(p.lockout_threshold()))
      .Set("mfa_required", p.mfa_required())
      .Set("session_lifetime_seconds", p.session_lifetime_seconds());
  return v;
}

const char* StatusName(v1::UserStatus s) {
  return s == v1::USER_STATUS_ACTIVE ? "ACTIVE" : "DISABLED";
}

constexpr text::Rule kEmailRule{.min_chars = 1, .max_chars = 254, .max_bytes = 254,
                                .identifier = true};
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

absl::StatusOr<std::vector<std::string>> Roles(pg::Transaction& tx, const std::string& user_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kListRoles, {pg::Text(user_id)}));
  std::vector<std::string> roles;
  for (int i = 0; i < r.rows(); ++i) roles.push_back(r.GetString(i, 0));
  return roles;
}

// Shared body of AssignRole / RevokeRole (their responses have the same shape).
template <typename Response>
absl::StatusOr<outbox::Outcome<Response>> ChangeRole(pg::Transaction& tx, const audit::Actor& actor,
                                    const std::string& user_id, const std::string& role,
                                    bool assign) {
  ASSIGN_OR_RETURN(pg::Result user, tx.Execute(kLockUser, {pg::Text(user_id)}));
  if (user.empty()) return absl::NotFoundError(absl::StrCat("user ", user_id, " does not exist"));
  ASSIGN_OR_RETURN(pg::Result exists, tx.Execute(kRoleExists, {pg::Text(role)}));
  if (exists.empty())
    return absl::NotFoundError(absl::StrCat("role \"", role, "\" does not exist"));
  if (assign && user.Get(0, 4) != "ACTIVE") {
    return absl::FailedPreconditionError(absl::StrCat("user ", user_id, " is disabled"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> before, Roles(tx, user_id));
  ASSIGN_OR_RETURN(
      pg::Result changed,
      assign ? tx.Execute(kGrant, {pg::Text(user_id), pg::Text(role), pg::Text(actor.principal)})
             : tx.Execute(kRevoke, {pg::Text(user_id), pg::Text(role)}));
  Response resp;
  resp.set_authz_version(user.GetInt64(0, 5));
  if (changed.affected_rows() == 0) {
    for (const auto& r : before) resp.add_roles(r);
    return outbox::Unchanged(std::move(resp));
  }
  ASSIGN_OR_RETURN(pg::Result bumped, tx.Execute(kBumpAuthz, {pg::Text(user_id)}));
  ASSIGN_OR_RETURN(std::vector<std::string> after, Roles(tx, user_id));
  auto event =
      audit::NewEvent(audit::v1::OWNER_AUTH, assign ? "auth.role.assigned" : "auth.role.revoked",
                      actor, absl::Now());
  auto* rec = event.mutable_record();
  rec->set_action(assign ? "assign_role" : "revoke_role");
  rec->set_subject(user_id);
  rec->set_entity_type("user_role");
  rec->set_entity_id(absl::StrCat(user_id, "/", role));
  *rec->mutable_old_value() =
      Values().Set("roles", before).Set("authz_version", user.GetInt64(0, 5)).get();
  *rec->mutable_new_value() =
      Values().Set("roles", after).Set("authz_version", bumped.GetInt64(0, 0)).get();
  for (const auto& r : after) resp.add_roles(r);
  resp.set_authz_version(bumped.GetInt64(0, 0));
  return outbox::Changed(std::move(event), std::move(resp));
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
  if (!req.has_policy()) return absl::InvalidArgumentError("policy: required");
  return ValidateLoginPolicy(req.policy());
}

absl::Status ValidateLoginPolicy(const v1::LoginPolicy& p) {
  if (p.min_password_length() < 8 || p.min_password_length() > 128) {
    return absl::InvalidArgumentError("policy.min_password_length: must be 8..128");
  }
  if (p.lockout_threshold() < 1 || p.lockout_threshold() > 100) {
    return absl::InvalidArgumentError("policy.lockout_threshold: must be 1..100");
  }
  if (p.session_lifetime_seconds() < 60 || p.session_lifetime_seconds() > 2592000) {
    return absl::InvalidArgumentError("policy.session_lifetime_seconds: must be 60..2592000");
  }
  return absl::OkStatus();
}

grpc::Status AuthServiceImpl::CreateUser(grpc::ServerContext* ctx, const v1::CreateUserRequest* req,
                                         v1::CreateUserResponse* resp) {
  const std::string display = req->display_name().empty() ? req->username() : req->display_name();
  return mutations_.Handle(
      *ctx, "CreateUser", *req, [&] { return ValidateCreateUser(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::CreateUserResponse>> {
        ASSIGN_OR_RETURN(pg::Result clash, tx.Execute(kFindClash, {pg::Text(req->username()),
                                                                   pg::Text(req->email())}));
        if (!clash.empty()) {
          return absl::AlreadyExistsError(
              clash.GetBool(0, 0) ? absl::StrCat("username \"", req->username(), "\" is taken")
                                  : absl::StrCat("email \"", req->email(), "\" is taken"));
        }
        const std::string user_id = ids::NewUuidV7();
        ASSIGN_OR_RETURN(pg::Result row,
                         tx.Execute(kInsertUser, {pg::Text(user_id), pg::Text(req->username()),
                                                  pg::Text(req->email()), pg::Text(display)}));
        v1::CreateUserResponse out;
        *out.mutable_user() = UserFromRow(row, 0);
        auto event =
            audit::NewEvent(audit::v1::OWNER_AUTH, "auth.user.created", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("create_user");
        rec->set_subject(user_id);
        rec->set_entity_type("user");
        rec->set_entity_id(user_id);
        *rec->mutable_new_value() = Values()
                                        .Set("username", req->username())
                                        .Set("email", req->email())
                                        .Set("display_name", display)
                                        .Set("status", "ACTIVE")
                                        .get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AuthServiceImpl::DisableUser(grpc::ServerContext* ctx,
                                          const v1::DisableUserRequest* req,
                                          v1::DisableUserResponse* resp) {
  return mutations_.Handle(
      *ctx, "DisableUser", *req, [&] { return ValidateDisableUser(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::DisableUserResponse>> {
        ASSIGN_OR_RETURN(pg::Result user, tx.Execute(kLockUser, {pg::Text(req->user_id())}));
        if (user.empty()) {
          return absl::NotFoundError(absl::StrCat("user ", req->user_id(), " does not exist"));
        }
        v1::DisableUserResponse out;
        const v1::User before = UserFromRow(user, 0);
        if (before.status() == v1::USER_STATUS_DISABLED) {
          *out.mutable_user() = before;
          return outbox::Unchanged(std::move(out));
        }
        ASSIGN_OR_RETURN(pg::Result row, tx.Execute(kDisableUser, {pg::Text(req->user_id()),
                                                                   pg::Text(req->reason())}));
        *out.mutable_user() = UserFromRow(row, 0);
        auto event =
            audit::NewEvent(audit::v1::OWNER_AUTH, "auth.user.disabled", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("disable_user");
        rec->set_subject(req->user_id());
        rec->set_entity_type("user");
        rec->set_entity_id(req->user_id());
        *rec->mutable_old_value() = Values()
                                        .Set("status", StatusName(before.status()))
                                        .Set("authz_version", before.authz_version())
                                        .get();
        *rec->mutable_new_value() = Values()
                                        .Set("status", "DISABLED")
                                        .Set("authz_version", out.user().authz_version())
                                        .Set("reason", req->reason())
                                        .get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AuthServiceImpl::AssignRole(grpc::ServerContext* ctx, const v1::AssignRoleRequest* req,
                                         v1::AssignRoleResponse* resp) {
  return mutations_.Handle(
      *ctx, "AssignRole", *req, [&] { return ValidateRoleChange(req->user_id(), req->role()); },
      [&](pg::Transaction& tx, const audit::Actor& actor) {
        return ChangeRole<v1::AssignRoleResponse>(tx, actor, req->user_id(), req->role(), true);
      },
      resp);
}

grpc::Status AuthServiceImpl::RevokeRole(grpc::ServerContext* ctx, const v1::RevokeRoleRequest* req,
                                         v1::RevokeRoleResponse* resp) {
  return mutations_.Handle(
      *ctx, "RevokeRole", *req, [&] { return ValidateRoleChange(req->user_id(), req->role()); },
      [&](pg::Transaction& tx, const audit::Actor& actor) {
        return ChangeRole<v1::RevokeRoleResponse>(tx, actor, req->user_id(), req->role(), false);
      },
      resp);
}

grpc::Status AuthServiceImpl::UpdateLoginPolicy(grpc::ServerContext* ctx,
                                                const v1::UpdateLoginPolicyRequest* req,
                                                v1::UpdateLoginPolicyResponse* resp) {
  const v1::LoginPolicy& want = req->policy();
  return mutations_.Handle(
      *ctx, "UpdateLoginPolicy", *req, [&] { return ValidateUpdateLoginPolicy(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::UpdateLoginPolicyResponse>> {
        ASSIGN_OR_RETURN(pg::Result cur, tx.Execute(kLockPolicy));
        if (cur.empty()) return absl::InternalError("login_policy row is missing");
        const v1::LoginPolicy before = PolicyFromRow(cur);
        v1::UpdateLoginPolicyResponse out;
        if (before.min_password_length() == want.min_password_length() &&
            before.lockout_threshold() == want.lockout_threshold() &&
            before.mfa_required() == want.mfa_required() &&
            before.session_lifetime_seconds() == want.session_lifetime_seconds()) {
          *out.mutable_policy() = before;
          return outbox::Unchanged(std::move(out));
        }
        ASSIGN_OR_RETURN(
            pg::Result row,
            tx.Execute(kUpdatePolicy,
                       {pg::Int(want.min_password_length()), pg::Int(want.lockout_threshold()),
                        pg::Bool(want.mfa_required()), pg::Int(want.session_lifetime_seconds()),
                        pg::Text(actor.principal)}));
        *out.mutable_policy() = PolicyFromRow(row);
        auto event =
            audit::NewEvent(audit::v1::OWNER_AUTH, "auth.login_policy.updated", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("update_login_policy");
        rec->set_subject("login_policy");
        rec->set_entity_type("login_policy");
        rec->set_entity_id("default");
        *rec->mutable_old_value() = PolicyValues(before).Set("version", before.version()).get();
        *rec->mutable_new_value() =
            PolicyValues(out.policy()).Set("version", out.policy().version()).get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AuthServiceImpl::GetUser(grpc::ServerContext* ctx, const v1::GetUserRequest* req,
                                      v1::User* resp) {
  if (auto s = ValidateUserId(req->user_id()); !s.ok()) return server::ToGrpcStatus(s, "GetUser");
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), "GetUser");
  auto r = (*conn)->Execute(kGetUser, {pg::Text(req->user_id())});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), "GetUser");
  if (r->empty()) {
    return server::ToGrpcStatus(
        absl::NotFoundError(absl::StrCat("user ", req->user_id(), " does not exist")), "GetUser");
  }
  *resp = UserFromRow(*r, 0);
  return grpc::Status::OK;
}

grpc::Status AuthServiceImpl::ListUserRoles(grpc::ServerContext* ctx,
                                            const v1::ListUserRolesRequest* req,
                                            v1::ListUserRolesResponse* resp) {
  constexpr char kMethod[] = "ListUserRoles";
  if (auto s = ValidateUserId(req->user_id()); !s.ok()) return server::ToGrpcStatus(s, kMethod);
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), kMethod);
  auto user = (*conn)->Execute(kGetUser, {pg::Text(req->user_id())});
  if (!user.ok()) return server::ToGrpcStatus(user.status(), kMethod);
  if (user->empty()) {
    return server::ToGrpcStatus(
        absl::NotFoundError(absl::StrCat("user ", req->user_id(), " does not exist")), kMethod);
  }
  auto roles = (*conn)->Execute(kListRoles, {pg::Text(req->user_id())});
  if (!roles.ok()) return server::ToGrpcStatus(roles.status(), kMethod);
  for (int i = 0; i < roles->rows(); ++i) resp->add_roles(roles->GetString(i, 0));
  resp->set_authz_version(user->GetInt64(0, 5));
  return grpc::Status::OK;
}

grpc::Status AuthServiceImpl::GetLoginPolicy(grpc::ServerContext* ctx,
                                             const v1::GetLoginPolicyRequest* req,
                                             v1::LoginPolicy* resp) {
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), "GetLoginPolicy");
  auto r = (*conn)->Execute(kGetPolicy);
  if (!r.ok()) return server::ToGrpcStatus(r.status(), "GetLoginPolicy");
  if (r->empty())
    return server::ToGrpcStatus(absl::InternalError("no login policy"), "GetLoginPolicy");
  *resp = PolicyFromRow(*r);
  return grpc::Status::OK;
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
