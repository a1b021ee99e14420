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
#include "ulticode/app/v1/app.grpc.pb.h"

namespace ulticode::app {
const std::vector<migrations::Migration>& Migrations();
}

int main(int argc, char** argv) {
  using namespace ulticode;
  server::BlockTerminationSignals();

  runtime::ServiceFlags common("127.0.0.1:50052", "127.0.0.1:9102", "ulticode_app");
  config::Flags flags("ulticode-app", "App: problems and contests, with audit outbox.");
  common.Register(flags);
  config::ParseOrExit(flags, argc, argv);
  common.ApplyLogging();

  auto metrics = metrics::Metrics::Start(common.metrics_listen, "app");
  if (!metrics.ok()) runtime::DieOnStartup("app", metrics.status());

  const pg::PoolOptions pool_options = common.PoolOptions("ulticode-app");
  if (auto s = runtime::MigrateWithRetry(pool_options.connect, app::Migrations(),
                                         common.startup_timeout);
      !s.ok()) {
    runtime::DieOnStartup("app", s);
  }
  pg::Pool pool(pool_options);

  ulticode::app::v1::AppService::Service service;
  server::GrpcServer grpc_server({common.grpc_listen, common.grpc_threads, common.access_log},
                                 (*metrics)->registry());
  grpc_server.AddService(&service, "ulticode.app.v1.AppService");
  if (auto s = grpc_server.Start(); !s.ok()) runtime::DieOnStartup("app", s);
  grpc_server.SetServing(true);
  log::Info("app", "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info("app", "shutting down", {{"signal", std::to_string(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  pool.Close();
  log::Info("app", "stopped");
  return 0;
}
