// Auth's own tables (schema: auth/migrations/0001_identity.sql): the only
// code that reads or writes users, roles, user_roles and login_policy.
//
// Writes take the open transaction of the mutation; reads are templates on
// the executor (pg::Connection or pg::Transaction, both instantiated in the
// .cc). Rows come back typed; every column is read by name. A lookup that
// finds nothing returns std::nullopt (or false): the caller words the error.
//
// Functions are stateless; the connection decides the thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"

namespace ulticode::auth::store {

struct UserRow {
  std::string user_id;
  std::string username;
  std::string email;
  std::string display_name;
  std::string status;  // "ACTIVE" or "DISABLED" (the table's CHECK)
  int64_t authz_version = 0;
  absl::Time created_at;
  absl::Time updated_at;

  bool active() const { return status == "ACTIVE"; }
};

struct NewUser {
  std::string user_id;
  std::string username;
  std::string email;
  std::string display_name;
};

// The settable part of the login policy.
struct PolicySettings {
  int32_t min_password_length = 0;
  int32_t lockout_threshold = 0;
  bool mfa_required = false;
  int64_t session_lifetime_seconds = 0;

  bool operator==(const PolicySettings&) const = default;
};

struct PolicyRow {
  PolicySettings settings;
  int64_t version = 0;
  absl::Time updated_at;
};

// Which unique column an existing user already holds (username first).
enum class Clash { kNone, kUsername, kEmail };
absl::StatusOr<Clash> FindClash(pg::Transaction& tx, const std::string& username,
                                const std::string& email);

// A new ACTIVE user; nullopt when its username or email is taken (a
// concurrent insert of either is waited for).
absl::StatusOr<std::optional<UserRow>> InsertUser(pg::Transaction& tx, const NewUser& user);

// The user, locked FOR UPDATE until the transaction ends.
absl::StatusOr<std::optional<UserRow>> LockUser(pg::Transaction& tx, const std::string& user_id);

template <typename Executor>
absl::StatusOr<std::optional<UserRow>> GetUser(Executor& ex, const std::string& user_id);

// Sets DISABLED with its reason and bumps authz_version; returns the row.
absl::StatusOr<UserRow> DisableUser(pg::Transaction& tx, const std::string& user_id,
                                    const std::string& reason);

absl::StatusOr<bool> RoleExists(pg::Transaction& tx, const std::string& role);

// The user's roles, sorted by name.
template <typename Executor>
absl::StatusOr<std::vector<std::string>> ListRoles(Executor& ex, const std::string& user_id);

// True when the assignment is new (ON CONFLICT DO NOTHING otherwise).
absl::StatusOr<bool> Grant(pg::Transaction& tx, const std::string& user_id, const std::string& role,
                           const std::string& granted_by);
// True when the assignment existed and was removed.
absl::StatusOr<bool> Revoke(pg::Transaction& tx, const std::string& user_id,
                            const std::string& role);

// authz_version + 1; returns the new version.
absl::StatusOr<int64_t> BumpAuthz(pg::Transaction& tx, const std::string& user_id);

// The single policy row, locked FOR UPDATE; nullopt when it is missing.
absl::StatusOr<std::optional<PolicyRow>> LockPolicy(pg::Transaction& tx);

template <typename Executor>
absl::StatusOr<std::optional<PolicyRow>> GetPolicy(Executor& ex);

// Writes `settings`, version + 1, updated_by; returns the row.
absl::StatusOr<PolicyRow> UpdatePolicy(pg::Transaction& tx, const PolicySettings& settings,
                                       const std::string& updated_by);

}  // namespace ulticode::auth::store
