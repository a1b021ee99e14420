// Start-up steps shared by the services.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"
#include "common/runtime/service_flags.h"

namespace ulticode::runtime {

// Waits between two attempts: returns false when start-up must stop instead
// (a termination signal arrived during the wait).
using Pause = std::function<bool(absl::Duration)>;

// A Pause that only sleeps.
bool Sleep(absl::Duration delay);

// Connects (retrying with back-off until `timeout`, so a service may start
// before its database) and applies `migrations`; then, when `runtime_role` is
// set, grants it `grants` (migrations::GrantRuntime, which leaves the grants
// alone when the schema has migrations this binary does not know). CANCELLED
// when `pause` says to stop.
absl::Status MigrateWithRetry(const pg::ConnectOptions& options,
                              const std::vector<migrations::Migration>& migrations,
                              absl::Duration timeout, const std::string& runtime_role = "",
                              const std::vector<std::string>& grants = {},
                              const Pause& pause = Sleep);

// The --migrate step of `flags`: apply and only run MigrateWithRetry as
// the migration role (then grant the runtime role); verify connects as the
// runtime role (retrying like MigrateWithRetry) and runs migrations::Verify.
// With --migrate=only the caller exits after it, before loading keys.
absl::Status PrepareSchema(const ServiceFlags& flags, const std::string& application_name,
                           const std::vector<migrations::Migration>& migrations,
                           const std::vector<std::string>& grants, const Pause& pause = Sleep);

// Logs `status` as a fatal start-up error and exits with code 1.
[[noreturn]] void DieOnStartup(const char* component, const absl::Status& status);

}  // namespace ulticode::runtime
