#include "common/migrations/migrations.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"

namespace ulticode::migrations {
namespace {

constexpr pg::Statement kLock{"migrations.lock", "SELECT pg_advisory_xact_lock($1::bigint)",
                              absl::Minutes(2)};
constexpr pg::Statement kCreateTable{"migrations.create_table",
                                     "CREATE TABLE IF NOT EXISTS schema_migrations ("
                                     " version bigint PRIMARY KEY,"
                                     " name text NOT NULL,"
                                     " sha256 text NOT NULL,"
                                     " applied_at timestamptz NOT NULL DEFAULT now())"};
constexpr pg::Statement kApplied{"migrations.applied",
                                 "SELECT version, name, sha256 FROM schema_migrations"};
constexpr pg::Statement kTableExists{"migrations.table_exists",
                                     "SELECT to_regclass('schema_migrations') IS NOT NULL"};
constexpr pg::Statement kRecord{
    "migrations.record",
    "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1::bigint, $2, $3)"};

}  // namespace

absl::StatusOr<ApplyResult> Apply(pg::Connection& conn, const std::vector<Migration>& migrations,
                                  int64_t lock_key) {
  std::vector<const Migration*> ordered;
  for (const Migration& m : migrations) ordered.push_back(&m);
  std::sort(ordered.begin(), ordered.end(),
            [](const Migration* a, const Migration* b) { return a->version < b->version; });
  for (size_t i = 1; i < ordered.size(); ++i) {
    if (ordered[i]->version == ordered[i - 1]->version) {
      return absl::InvalidArgumentError(
          absl::StrCat("two migrations share version ", ordered[i]->version));
    }
  }

  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  RETURN_IF_ERROR(tx.Execute(kLock, {pg::Int(lock_key)}).status());
  RETURN_IF_ERROR(tx.Execute(kCreateTable).status());
  ASSIGN_OR_RETURN(pg::Result rows, tx.Execute(kApplied));
  std::map<int64_t, std::string> applied;
  for (int r = 0; r < rows.rows(); ++r) applied[rows.GetInt64(r, 0)] = rows.GetString(r, 2);

  ApplyResult result;
  for (const Migration* m : ordered) {
    auto it = applied.find(m->version);
    if (it != applied.end()) {
      if (it->second != m->sha256) {
        return absl::FailedPreconditionError(
            absl::StrCat("migration ", m->name, " was changed after it was applied (checksum ",
                         it->second, " in the database, ", m->sha256, " in this binary)"));
      }
      continue;
    }
    RETURN_IF_ERROR(conn.ExecuteScript(m->name, m->sql, absl::Minutes(10)));
    RETURN_IF_ERROR(
        tx.Execute(kRecord, {pg::Int(m->version), pg::Text(m->name), pg::Text(m->sha256)})
            .status());
    result.applied.push_back(m->version);
  }
  RETURN_IF_ERROR(tx.Commit());
  for (const auto& [version, sum] : applied)
    result.current_version = std::max(result.current_version, version);
  for (int64_t v : result.applied) result.current_version = std::max(result.current_version, v);
  if (!result.applied.empty()) {
    log::Info("migrations", "applied migrations",
              {{"count", absl::StrCat(result.applied.size())},
               {"version", absl::StrCat(result.current_version)}});
  }
  return result;
}

absl::Status Verify(pg::Connection& conn, const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(pg::Result exists, conn.Execute(kTableExists));
  if (!exists.GetBool(0, 0)) {
    return absl::FailedPreconditionError(
        "the database has no schema_migrations: run the migration step first (--migrate=only "
        "as the migration role)");
  }
  ASSIGN_OR_RETURN(pg::Result rows, conn.Execute(kApplied));
  std::map<int64_t, std::string> applied;
  for (int r = 0; r < rows.rows(); ++r) applied[rows.GetInt64(r, 0)] = rows.GetString(r, 2);
  std::vector<const Migration*> ordered;
  for (const Migration& m : migrations) ordered.push_back(&m);
  std::sort(ordered.begin(), ordered.end(),
            [](const Migration* a, const Migration* b) { return a->version < b->version; });
  for (const Migration* m : ordered) {
    auto it = applied.find(m->version);
    if (it == applied.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the schema is behind this binary: migration ", m->name,
                       " is not applied (run the migration step: --migrate=only)"));
    }
    if (it->second != m->sha256) {
      return absl::FailedPreconditionError(
          absl::StrCat("migration ", m->name, " was changed after it was applied (checksum ",
                       it->second, " in the database, ", m->sha256, " in this binary)"));
    }
  }
  return absl::OkStatus();
}

absl::Status GrantRuntime(pg::Connection& conn, absl::string_view role,
                          const std::vector<std::string>& grants,
                          const std::vector<Migration>& known, bool* skipped) {
  if (skipped != nullptr) *skipped = false;
  if (role.empty() || role.size() > 63) {
    return absl::InvalidArgumentError("runtime role: must be 1..63 characters");
  }
  for (char c : role) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return absl::InvalidArgumentError("runtime role: only [a-z0-9_] allowed");
    }
  }
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  // Replicas starting together would update the same ACLs concurrently
  // ("tuple concurrently updated"): one at a time.
  RETURN_IF_ERROR(
      tx.Execute(pg::Statement{"migrations.grant_lock",
                               "SELECT pg_advisory_xact_lock(hashtext('ulticode.grants'))"})
          .status());
  // Under the lock, so that a newer release's migrate-and-grant cannot slip
  // in between this check and the grants below.
  ASSIGN_OR_RETURN(pg::Result applied, tx.Execute(kApplied));
  std::set<int64_t> ours;
  for (const Migration& m : known) ours.insert(m.version);
  for (int r = 0; r < applied.rows(); ++r) {
    if (ours.count(applied.GetInt64(r, 0)) == 0) {
      log::Warn(
          "migrations",
          "the schema has migrations this binary does not know; grants left "
          "to the newer release",
          {{"version", absl::StrCat(applied.GetInt64(r, 0))}, {"name", applied.GetString(r, 1)}});
      if (skipped != nullptr) *skipped = true;
      return tx.Commit();
    }
  }
  // Exactly `grants`, whatever an earlier version granted: revoke first.
  const std::string quoted = absl::StrCat("\"", role, "\"");
  for (const char* what : {"TABLES", "SEQUENCES", "FUNCTIONS"}) {
    const std::string revoke =
        absl::StrCat("REVOKE ALL ON ALL ", what, " IN SCHEMA public FROM ", quoted);
    RETURN_IF_ERROR(tx.Execute(pg::Statement{"migrations.revoke", revoke.c_str()}).status());
  }
  for (const std::string& grant : grants) {
    const std::string sql = absl::StrReplaceAll(grant, {{"{role}", quoted}});
    RETURN_IF_ERROR(tx.Execute(pg::Statement{"migrations.grant", sql.c_str()}).status());
  }
  const std::string read_versions = absl::StrCat("GRANT SELECT ON schema_migrations TO ", quoted);
  RETURN_IF_ERROR(
      tx.Execute(pg::Statement{"migrations.grant_versions", read_versions.c_str()}).status());
  return tx.Commit();
}

}  // namespace ulticode::migrations
