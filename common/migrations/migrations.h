// Schema migrations: numbered SQL files per service database.
//
// Apply() runs every migration not yet recorded in `schema_migrations`, in
// version order, all in ONE transaction, under a transaction-scoped advisory
// lock: two replicas starting at the same moment serialize, and the second
// finds nothing left to do. Applying twice is a no-op. A recorded migration
// whose checksum differs from the binary's (someone edited a shipped file)
// fails with FAILED_PRECONDITION instead of drifting silently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/pg/connection.h"

namespace ulticode::migrations {

struct Migration {
  int64_t version;
  std::string name;
  std::string sha256;
  std::string sql;
};

struct ApplyResult {
  std::vector<int64_t> applied;  // versions applied by this call
  int64_t current_version = 0;
};

// `lock_key` distinguishes independent migration sets sharing a database.
absl::StatusOr<ApplyResult> Apply(pg::Connection& conn, const std::vector<Migration>& migrations,
                                  int64_t lock_key = 0x756c7469636f6465 /* "ulticode" */);

// For a process that must not change the schema (the runtime role, after a
// migration step ran as the schema's owner): OK when every one of
// `migrations` is recorded with the same checksum; FAILED_PRECONDITION
// naming the first missing or changed one otherwise. Reads only.
absl::Status Verify(pg::Connection& conn, const std::vector<Migration>& migrations);

// Least privilege: after migrating as the schema's owner, grant the runtime
// role exactly the DML the service needs. Each statement names the role as
// "{role}" (replaced by the quoted identifier). Everything else the role held
// on the schema's tables and sequences is revoked first, so a
// narrowed list takes effect on the next start. The role may always read
// schema_migrations (for Verify). Idempotent; one transaction, under a lock
// that serializes grants.
//
// `known` are the migrations of the calling binary. When the database has a
// version that is not among them, the schema belongs to a newer release (an
// older pod restarting mid-rollout): nothing is changed and `*skipped` (if
// given) is set, so that the older list never revokes what the newer
// schema's tables need.
// INVALID_ARGUMENT for a role name outside [a-z0-9_].
absl::Status GrantRuntime(pg::Connection& conn, absl::string_view role,
                          const std::vector<std::string>& grants,
                          const std::vector<Migration>& known, bool* skipped = nullptr);

}  // namespace ulticode::migrations
