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
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::admin {
const std::vector<migrations::Migration>& Migrations();
}

int main(int argc, char** argv) {
  using namespace ulticode;
  server::BlockTerminationSignals();

  runtime::ServiceFlags common("127.0.0.1:50053", "127.0.0.1:9103", "ulticode_admin");
  config::Flags flags("ulticode-admin", "Admin: audit inbox, audit_logs and the audit query API.");
  common.Register(flags);
  config::ParseOrExit(flags, argc, argv);
  common.ApplyLogging();

  auto metrics = metrics::Metrics::Start(common.metrics_listen, "admin");
  if (!metrics.ok()) runtime::DieOnStartup("admin", metrics.status());

  const pg::PoolOptions pool_options = common.PoolOptions("ulticode-admin");
  if (auto s = runtime::MigrateWithRetry(pool_options.connect, admin::Migrations(),
                                         common.startup_timeout);
      !s.ok()) {
    runtime::DieOnStartup("admin", s);
  }
  pg::Pool pool(pool_options);

  ulticode::admin::v1::AdminService::Service service;
  server::GrpcServer grpc_server({common.grpc_listen, common.grpc_threads, common.access_log},
                                 (*metrics)->registry());
  grpc_server.AddService(&service, "ulticode.admin.v1.AdminService");
  if (auto s = grpc_server.Start(); !s.ok()) runtime::DieOnStartup("admin", s);
  grpc_server.SetServing(true);
  log::Info("admin", "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info("admin", "shutting down", {{"signal", std::to_string(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  pool.Close();
  log::Info("admin", "stopped");
  return 0;
}
