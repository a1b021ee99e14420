#include "auth/auth_store.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::auth::store {
namespace {

constexpr pg::Statement kFindClash{
    "auth.user.find_clash",
    "SELECT username = $1 AS username_taken, email = $2 AS email_taken FROM users"
    " WHERE username = $1 OR email = $2 LIMIT 1"};
constexpr pg::Statement kInsertUser{
    "auth.user.insert",
    "INSERT INTO users (user_id, username, email, display_name, status) "
    "VALUES ($1::uuid, $2, $3, $4, 'ACTIVE') ON CONFLICT DO NOTHING "
    "RETURNING user_id::text AS user_id, username, email, display_name, status, authz_version, "
    "created_at, updated_at"};
constexpr pg::Statement kLockUser{
    "auth.user.lock",
    "SELECT user_id::text AS user_id, username, email, display_name, status, authz_version, "
    "created_at, updated_at FROM users WHERE user_id = $1::uuid FOR UPDATE"};
constexpr pg::Statement kGetUser{
    "auth.user.get",
    "SELECT user_id::text AS user_id, username, email, display_name, status, authz_version, "
    "created_at, updated_at FROM users WHERE user_id = $1::uuid"};
constexpr pg::Statement kDisableUser{
    "auth.user.disable",
    "UPDATE users SET status = 'DISABLED', disabled_reason = $2, authz_version = authz_version + 1,"
    " updated_at = now() WHERE user_id = $1::uuid "
    "RETURNING user_id::text AS user_id, username, email, display_name, status, authz_version, "
    "created_at, updated_at"};
constexpr pg::Statement kBumpAuthz{
    "auth.user.bump_authz",
    "UPDATE users SET authz_version = authz_version + 1, updated_at = now() "
    "WHERE user_id = $1::uuid RETURNING authz_version"};

constexpr pg::Statement kRoleExists{"auth.role.exists", "SELECT 1 FROM roles WHERE name = $1"};
constexpr pg::Statement kListRoles{
    "auth.user_roles.list", "SELECT role FROM user_roles WHERE user_id = $1::uuid ORDER BY role"};
constexpr pg::Statement kGrant{
    "auth.user_roles.grant",
    "INSERT INTO user_roles (user_id, role, granted_by) VALUES ($1::uuid, $2, $3) "
    "ON CONFLICT DO NOTHING"};
constexpr pg::Statement kRevoke{"auth.user_roles.revoke",
                                "DELETE FROM user_roles WHERE user_id = $1::uuid AND role = $2"};

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

UserRow UserAt(const pg::Result& r, int row) {
  UserRow u;
  u.user_id = r.GetString(row, r.Column("user_id"));
  u.username = r.GetString(row, r.Column("username"));
  u.email = r.GetString(row, r.Column("email"));
  u.display_name = r.GetString(row, r.Column("display_name"));
  u.status = r.GetString(row, r.Column("status"));
  u.authz_version = r.GetInt64(row, r.Column("authz_version"));
  u.created_at = r.GetTime(row, r.Column("created_at"));
  u.updated_at = r.GetTime(row, r.Column("updated_at"));
  return u;
}

PolicyRow PolicyAt(const pg::Result& r, int row) {
  PolicyRow p;
  p.settings.min_password_length =
      static_cast<int32_t>(r.GetInt64(row, r.Column("min_password_length")));
  p.settings.lockout_threshold =
      static_cast<int32_t>(r.GetInt64(row, r.Column("lockout_threshold")));
  p.settings.mfa_required = r.GetBool(row, r.Column("mfa_required"));
  p.settings.session_lifetime_seconds = r.GetInt64(row, r.Column("session_lifetime_seconds"));
  p.version = r.GetInt64(row, r.Column("version"));
  p.updated_at = r.GetTime(row, r.Column("updated_at"));
  return p;
}

std::optional<UserRow> FirstUser(const pg::Result& r) {
  if (r.empty()) return std::nullopt;
  return UserAt(r, 0);
}

std::optional<PolicyRow> FirstPolicy(const pg::Result& r) {
  if (r.empty()) return std::nullopt;
  return PolicyAt(r, 0);
}

// For statements that always return a row of a row already locked.
absl::Status ExpectRow(const pg::Result& r, const pg::Statement& statement) {
  if (r.empty()) return absl::InternalError(absl::StrCat(statement.name, " returned no row"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Clash> FindClash(pg::Transaction& tx, const std::string& username,
                                const std::string& email) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kFindClash, {pg::Text(username), pg::Text(email)}));
  if (r.empty()) return Clash::kNone;
  return r.GetBool(0, r.Column("username_taken")) ? Clash::kUsername : Clash::kEmail;
}

absl::StatusOr<std::optional<UserRow>> InsertUser(pg::Transaction& tx, const NewUser& user) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kInsertUser, {pg::Text(user.user_id), pg::Text(user.username),
                                            pg::Text(user.email), pg::Text(user.display_name)}));
  return FirstUser(r);
}

absl::StatusOr<std::optional<UserRow>> LockUser(pg::Transaction& tx, const std::string& user_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kLockUser, {pg::Text(user_id)}));
  return FirstUser(r);
}

template <typename Executor>
absl::StatusOr<std::optional<UserRow>> GetUser(Executor& ex, const std::string& user_id) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kGetUser, {pg::Text(user_id)}));
  return FirstUser(r);
}

absl::StatusOr<UserRow> DisableUser(pg::Transaction& tx, const std::string& user_id,
                                    const std::string& reason) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kDisableUser, {pg::Text(user_id), pg::Text(reason)}));
  RETURN_IF_ERROR(ExpectRow(r, kDisableUser));
  return UserAt(r, 0);
}

absl::StatusOr<bool> RoleExists(pg::Transaction& tx, const std::string& role) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kRoleExists, {pg::Text(role)}));
  return !r.empty();
}

template <typename Executor>
absl::StatusOr<std::vector<std::string>> ListRoles(Executor& ex, const std::string& user_id) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kListRoles, {pg::Text(user_id)}));
  const int role = r.Column("role");
  std::vector<std::string> roles;
  roles.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) roles.push_back(r.GetString(i, role));
  return roles;
}

absl::StatusOr<bool> Grant(pg::Transaction& tx, const std::string& user_id, const std::string& role,
                           const std::string& granted_by) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kGrant, {pg::Text(user_id), pg::Text(role), pg::Text(granted_by)}));
  return r.affected_rows() > 0;
}

absl::StatusOr<bool> Revoke(pg::Transaction& tx, const std::string& user_id,
                            const std::string& role) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kRevoke, {pg::Text(user_id), pg::Text(role)}));
  return r.affected_rows() > 0;
}

absl::StatusOr<int64_t> BumpAuthz(pg::Transaction& tx, const std::string& user_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kBumpAuthz, {pg::Text(user_id)}));
  RETURN_IF_ERROR(ExpectRow(r, kBumpAuthz));
  return r.GetInt64(0, r.Column("authz_version"));
}

absl::StatusOr<std::optional<PolicyRow>> LockPolicy(pg::Transaction& tx) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kLockPolicy));
  return FirstPolicy(r);
}

template <typename Executor>
absl::StatusOr<std::optional<PolicyRow>> GetPolicy(Executor& ex) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kGetPolicy));
  return FirstPolicy(r);
}

absl::StatusOr<PolicyRow> UpdatePolicy(pg::Transaction& tx, const PolicySettings& settings,
                                       const std::string& updated_by) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kUpdatePolicy,
                              {pg::Int(settings.min_password_length),
                               pg::Int(settings.lockout_threshold), pg::Bool(settings.mfa_required),
                               pg::Int(settings.session_lifetime_seconds), pg::Text(updated_by)}));
  RETURN_IF_ERROR(ExpectRow(r, kUpdatePolicy));
  return PolicyAt(r, 0);
}

// The reads, for both executors.
template absl::StatusOr<std::optional<UserRow>> GetUser(pg::Connection&, const std::string&);
template absl::StatusOr<std::optional<UserRow>> GetUser(pg::Transaction&, const std::string&);
template absl::StatusOr<std::vector<std::string>> ListRoles(pg::Connection&, const std::string&);
template absl::StatusOr<std::vector<std::string>> ListRoles(pg::Transaction&, const std::string&);
template absl::StatusOr<std::optional<PolicyRow>> GetPolicy(pg::Connection&);
template absl::StatusOr<std::optional<PolicyRow>> GetPolicy(pg::Transaction&);

}  // namespace ulticode::auth::store
