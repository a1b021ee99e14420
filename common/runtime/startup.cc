#include "common/runtime/startup.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"

namespace ulticode::runtime {

absl::Status MigrateWithRetry(const pg::ConnectOptions& options,
                              const std::vector<migrations::Migration>& migrations,
                              absl::Duration timeout, const std::string& runtime_role,
                              const std::vector<std::string>& grants) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(100);
  while (true) {
    absl::Status status;
    auto conn = pg::Connection::Connect(options);
    if (conn.ok()) {
      auto applied = migrations::Apply(**conn, migrations);
      if (applied.ok() && runtime_role.empty()) return absl::OkStatus();
      status =
          applied.ok() ? migrations::GrantRuntime(**conn, runtime_role, grants) : applied.status();
      if (status.ok()) return status;
      // A broken schema will not heal by waiting.
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

void DieOnStartup(const char* component, const absl::Status& status) {
  log::Error(component, "start-up failed", {{"error", status.ToString()}});
  std::exit(1);
}

}  // namespace ulticode::runtime
