// Start-up steps shared by the services.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"
#include "common/runtime/service_flags.h"

namespace ulticode::runtime {

// Connects (retrying with back-off until `timeout`, so a service may start
// before its database) and applies `migrations`; then, when `runtime_role` is
// set, grants it `grants` (migrations::GrantRuntime, which leaves the grants
// alone when the schema has migrations this binary does not know).
absl::Status MigrateWithRetry(const pg::ConnectOptions& options,
                              const std::vector<migrations::Migration>& migrations,
                              absl::Duration timeout, const std::string& runtime_role = "",
                              const std::vector<std::string>& grants = {});

// The --migrate step of `flags`: apply and only run MigrateWithRetry as
// the migration role (then grant the runtime role); verify connects as the
// runtime role (retrying like MigrateWithRetry) and runs migrations::Verify.
// With --migrate=only the caller exits after it, before loading keys.
absl::Status PrepareSchema(const ServiceFlags& flags, const std::string& application_name,
                           const std::vector<migrations::Migration>& migrations,
                           const std::vector<std::string>& grants);

// Logs `status` as a fatal start-up error and exits with code 1.
[[noreturn]] void DieOnStartup(const char* component, const absl::Status& status);

}  // namespace ulticode::runtime
