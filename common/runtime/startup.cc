#include "common/runtime/startup.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"

namespace ulticode::runtime {
namespace {

// Connects and runs `step`, retrying with back-off until `timeout` while the
// database is not reachable or `step` fails transiently. A broken schema
// (FAILED_PRECONDITION, INVALID_ARGUMENT, INTERNAL) will not heal by waiting.
absl::Status WithDatabase(const pg::ConnectOptions& options, absl::Duration timeout,
                          const std::function<absl::Status(pg::Connection&)>& step) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    absl::Status status;
    auto conn = pg::Connection::Connect(options);
    if (conn.ok()) {
      status = step(**conn);
      if (status.ok()) return status;
      if (status.code() == absl::StatusCode::kFailedPrecondition ||
          status.code() == absl::StatusCode::kInvalidArgument ||
          status.code() == absl::StatusCode::kInternal) {
        return status;
      }
    } else {
      status = conn.status();
    }
    if (absl::Now() + backoff > deadline) {
      return absl::UnavailableError(absl::StrCat(
          "database not ready within ", absl::FormatDuration(timeout), ": ", status.message()));
    }
    log::Warn("startup", "database not ready; retrying",
              {{"error", std::string(status.message())}});
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

}  // namespace

absl::Status MigrateWithRetry(const pg::ConnectOptions& options,
                              const std::vector<migrations::Migration>& migrations,
                              absl::Duration timeout, const std::string& runtime_role,
                              const std::vector<std::string>& grants) {
  return WithDatabase(options, timeout, [&](pg::Connection& conn) -> absl::Status {
    auto applied = migrations::Apply(conn, migrations);
    if (!applied.ok()) return applied.status();
    if (runtime_role.empty()) return absl::OkStatus();
    return migrations::GrantRuntime(conn, runtime_role, grants, migrations);
  });
}

absl::Status PrepareSchema(const ServiceFlags& flags, const std::string& application_name,
                           const std::vector<migrations::Migration>& migrations,
                           const std::vector<std::string>& grants) {
  if (flags.migrate == "verify") {
    return WithDatabase(flags.PoolOptions(application_name).connect, flags.startup_timeout,
                        [&](pg::Connection& conn) { return migrations::Verify(conn, migrations); });
  }
  absl::Status s = MigrateWithRetry(flags.MigrateOptions(application_name), migrations,
                                    flags.startup_timeout, flags.RuntimeRoleToGrant(), grants);
  if (s.ok() && flags.migrate_only()) {
    log::Info("startup", "schema migrated (--migrate=only)",
              {{"runtime_role", flags.RuntimeRoleToGrant()}});
  }
  return s;
}

void DieOnStartup(const char* component, const absl::Status& status) {
  log::Error(component, "start-up failed", {{"error", status.ToString()}});
  std::exit(1);
}

}  // namespace ulticode::runtime
