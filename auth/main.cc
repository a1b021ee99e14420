// Wiring only: config -> metrics -> database (migrate) -> workers -> gRPC ->
// SERVING; stop in reverse on SIGTERM/SIGINT.
#include "common/config/flags.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/runtime/service_flags.h"
#include "common/runtime/startup.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::auth {
const std::vector<migrations::Migration>& Migrations();
}

int main(int argc, char** argv) {
  using namespace ulticode;
  server::BlockTerminationSignals();

  runtime::ServiceFlags common("127.0.0.1:50051", "127.0.0.1:9101", "ulticode_auth");
  config::Flags flags("ulticode-auth", "Auth: users, roles and login policy, with audit outbox.");
  common.Register(flags);
  config::ParseOrExit(flags, argc, argv);
  common.ApplyLogging();

  auto metrics = metrics::Metrics::Start(common.metrics_listen, "auth");
  if (!metrics.ok()) runtime::DieOnStartup("auth", metrics.status());

  const pg::PoolOptions pool_options = common.PoolOptions("ulticode-auth");
  if (auto s = runtime::MigrateWithRetry(pool_options.connect, auth::Migrations(),
                                         common.startup_timeout);
      !s.ok()) {
    runtime::DieOnStartup("auth", s);
  }
  pg::Pool pool(pool_options);

  ulticode::auth::v1::AuthService::Service service;
  server::GrpcServer grpc_server({common.grpc_listen, common.grpc_threads, common.access_log},
                                 (*metrics)->registry());
  grpc_server.AddService(&service, "ulticode.auth.v1.AuthService");
  if (auto s = grpc_server.Start(); !s.ok()) runtime::DieOnStartup("auth", s);
  grpc_server.SetServing(true);
  log::Info("auth", "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info("auth", "shutting down", {{"signal", std::to_string(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  pool.Close();
  log::Info("auth", "stopped");
  return 0;
}
