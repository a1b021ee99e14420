#include "common/runtime/owner_service.h"

#include "absl/strings/str_cat.h"
#include "common/config/flags.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/outbox/dispatcher.h"
#include "common/outbox/dispatcher_flags.h"
#include "common/outbox/outbox_store.h"
#include "common/outbox/receipt_reader.h"
#include "common/audit/receipt.h"
#include "common/redis/redis_client.h"
#include "common/runtime/service_flags.h"
#include "common/runtime/startup.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"

namespace ulticode::runtime {

int RunOwnerService(const OwnerServiceSpec& spec, int argc, char** argv) {
  server::BlockTerminationSignals();
  const std::string name = audit::OwnerName(spec.owner);

  ServiceFlags common(spec.grpc_listen, spec.metrics_listen, spec.database);
  outbox::DispatcherOptions dispatch;
  config::Flags flags(spec.program, spec.description);
  common.Register(flags);
  outbox::RegisterDispatcherFlags(flags, &dispatch);
  config::ParseOrExit(flags, argc, const_cast<const char* const*>(argv));
  common.ApplyLogging();

  auto metrics = metrics::Metrics::Start(common.metrics_listen, name);
  if (!metrics.ok()) DieOnStartup(name.c_str(), metrics.status());

  const pg::PoolOptions pool_options = common.PoolOptions(spec.program);
  std::vector<migrations::Migration> all = *spec.migrations;
  for (const auto& m : outbox::Migrations()) all.push_back(m);
  if (auto s = MigrateWithRetry(pool_options.connect, all, common.startup_timeout); !s.ok()) {
    DieOnStartup(name.c_str(), s);
  }
  pg::Pool pool(pool_options);

  dispatch.owner = spec.owner;
  dispatch.pg = pool_options.connect;
  dispatch.pg.application_name = spec.program + "-dispatcher";
  dispatch.redis.user = common.redis_user;
  dispatch.redis.password = common.redis_password;
  if (auto s = redis::ParseAddress(common.redis_addr, &dispatch.redis); !s.ok()) {
    DieOnStartup(name.c_str(), s);
  }
  outbox::Dispatcher dispatcher(dispatch, (*metrics)->registry());
  dispatcher.Start();

  outbox::ReceiptReaderOptions receipts;
  receipts.owner = spec.owner;
  receipts.stream = audit::ReceiptStreamFor(dispatch.stream.empty() ? audit::StreamFor(spec.owner)
                                                                    : dispatch.stream);
  // Receipts older than two resend timeouts concern rows that are confirmed
  // or being re-sent anyway.
  receipts.start_lookback = 2 * dispatch.resend_timeout;
  receipts.pg = pool_options.connect;
  receipts.pg.application_name = spec.program + "-receipts";
  receipts.redis = dispatch.redis;
  outbox::ReceiptReader receipt_reader(receipts, (*metrics)->registry());
  receipt_reader.Start();

  server::HeaderPrincipalResolver resolver;
  std::unique_ptr<grpc::Service> service = spec.make_service(pool, resolver);
  server::GrpcServer grpc_server(
      {common.grpc_listen, common.grpc_threads, common.access_log, &resolver},
      (*metrics)->registry());
  grpc_server.AddService(service.get(), spec.service_name);
  if (auto s = grpc_server.Start(); !s.ok()) DieOnStartup(name.c_str(), s);
  grpc_server.SetServing(true);
  log::Info(name, "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info(name, "shutting down", {{"signal", absl::StrCat(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  receipt_reader.Stop();
  dispatcher.Stop();
  pool.Close();
  log::Info(name, "stopped");
  return 0;
}

}  // namespace ulticode::runtime
