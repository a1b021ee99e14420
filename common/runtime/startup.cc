#include "common/runtime/startup.h"

#include <cstdlib>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/backoff/backoff.h"
#include "common/log/log.h"

namespace ulticode::runtime {
namespace {

// Connects and runs `step`, retrying with back-off until `timeout` while the
// database is not reachable or `step` fails transiently. A broken schema
// (FAILED_PRECONDITION, INVALID_ARGUMENT, INTERNAL) will not heal by waiting.
absl::Status WithDatabase(const pg::ConnectOptions& options, absl::Duration timeout,
                          const Pause& pause,
                          const std::function<absl::Status(pg::Connection&)>& step) {
  constexpr backoff::Policy kPolicy{absl::Milliseconds(100), absl::Seconds(2)};
  const absl::Time deadline = absl::Now() + timeout;
  for (int64_t failures = 1;; ++failures) {
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
    const absl::Duration delay = backoff::Delay(kPolicy, failures);
    if (absl::Now() + delay > deadline) {
      return absl::UnavailableError(absl::StrCat(
          "database not ready within ", absl::FormatDuration(timeout), ": ", status.message()));
    }
    log::Warn("startup", "database not ready; retrying",
              {{"error", std::string(status.message())}});
    if (!pause(delay)) return absl::CancelledError("stopped while waiting for the database");
  }
}

}  // namespace

bool Sleep(absl::Duration delay) {
  absl::SleepFor(delay);
  return true;
}

absl::Status MigrateWithRetry(const pg::ConnectOptions& options,
                              const std::vector<migrations::Migration>& migrations,
                              absl::Duration timeout, const std::string& runtime_role,
                              const std::vector<std::string>& grants, const Pause& pause) {
  return WithDatabase(options, timeout, pause, [&](pg::Connection& conn) -> absl::Status {
    auto applied = migrations::Apply(conn, migrations);
    if (!applied.ok()) return applied.status();
    if (runtime_role.empty()) return absl::OkStatus();
    return migrations::GrantRuntime(conn, runtime_role, grants, migrations);
  });
}

absl::Status PrepareSchema(const ServiceFlags& flags, const std::string& application_name,
                           const std::vector<migrations::Migration>& migrations,
                           const std::vector<std::string>& grants, const Pause& pause) {
  if (flags.migrate == "verify") {
    return WithDatabase(flags.PoolOptions(application_name).connect, flags.startup_timeout, pause,
                        [&](pg::Connection& conn) { return migrations::Verify(conn, migrations); });
  }
  absl::Status s =
      MigrateWithRetry(flags.MigrateOptions(application_name), migrations, flags.startup_timeout,
                       flags.RuntimeRoleToGrant(), grants, pause);
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
