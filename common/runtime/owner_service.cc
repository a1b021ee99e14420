#include "common/runtime/owner_service.h"

#include "absl/strings/str_cat.h"
#include "common/audit/receipt.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/jwt/bearer_resolver.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/outbox/dispatcher.h"
#include "common/outbox/dispatcher_flags.h"
#include "common/outbox/housekeeping.h"
#include "common/outbox/operations.h"
#include "common/outbox/outbox_store.h"
#include "common/outbox/receipt_reader.h"
#include "common/redis/redis_client.h"
#include "common/runtime/service_flags.h"
#include "common/runtime/startup.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"
#include "common/worker/periodic.h"

namespace ulticode::runtime {

int RunOwnerService(const OwnerServiceSpec& spec, int argc, char** argv) {
  server::BlockTerminationSignals();
  const std::string name = audit::OwnerName(spec.owner);

  ServiceFlags common(spec.grpc_listen, spec.metrics_listen, spec.database,
                      server::kOwnerMaxReceiveBytes);
  outbox::DispatcherOptions dispatch;
  std::string signing_key_file;
  config::Flags flags(spec.program, spec.description);
  common.Register(flags);
  flags.String("audit-signing-key-file", &signing_key_file,
               "this owner's Ed25519 private key (PKCS#8 PEM, mode 0600): signs every audit event");
  flags.Require("audit-signing-key-file", [&] { return common.migrate_only(); });
  outbox::RegisterDispatcherFlags(flags, &dispatch);
  outbox::HousekeepingOptions housekeeping;
  flags.Duration("outbox-retention", &housekeeping.outbox_retention,
                 "CONFIRMED outbox rows are deleted this long after they were confirmed (what "
                 "OutboxOperations/Replay can still publish again)",
                 absl::Minutes(1), absl::Hours(24 * 3650));
  flags.Duration("idempotency-retention", &housekeeping.idempotency_retention,
                 "idempotency keys are deleted this long after the request (a retry after that "
                 "is a new request)",
                 absl::Minutes(1), absl::Hours(24 * 3650));
  flags.Duration("retention-interval", &housekeeping.retention_interval, "how often retention runs",
                 absl::Seconds(1), absl::Hours(24));
  flags.Duration("metrics-sample-interval", &housekeeping.sample_interval,
                 "how often the backlog gauges are sampled", absl::Seconds(1), absl::Hours(1));
  config::ParseOrExit(flags, argc, const_cast<const char* const*>(argv));
  common.ApplyLogging();
  if (auto s = common.LoadSecrets(); !s.ok()) DieOnStartup(name.c_str(), s);
  std::vector<migrations::Migration> all = *spec.migrations;
  for (const auto& m : outbox::Migrations()) all.push_back(m);
  std::vector<std::string> grants = *spec.runtime_grants;
  for (const auto& g : outbox::RuntimeGrants()) grants.push_back(g);
  // The init step migrates and exits; a server checks its keys first (a
  // bad key fails at once, not after waiting for the database).
  if (common.migrate_only()) {
    if (auto s = PrepareSchema(common, spec.program + "-migrate", all, grants); !s.ok()) {
      DieOnStartup(name.c_str(), s);
    }
    return 0;
  }
  auto signer = crypto::SigningKey::FromFile(signing_key_file);
  if (!signer.ok()) DieOnStartup(name.c_str(), signer.status());
  auto keys = crypto::KeyDirectoryFile::Open(common.public_keys_file);
  if (!keys.ok()) DieOnStartup(name.c_str(), keys.status());
  log::Info(
      name, "keys loaded",
      {{"signing_key_id", signer->key_id()}, {"public_keys", (*keys)->Current()->Describe()}});

  auto metrics = metrics::Metrics::Start(common.metrics_listen, name);
  if (!metrics.ok()) DieOnStartup(name.c_str(), metrics.status());

  pg::PoolOptions pool_options = common.PoolOptions(spec.program);
  pool_options.registry = &(*metrics)->registry();
  pool_options.name = "rpc";
  if (auto s = PrepareSchema(common, spec.program + "-migrate", all, grants); !s.ok()) {
    DieOnStartup(name.c_str(), s);
  }
  pg::Pool pool(pool_options);

  dispatch.owner = spec.owner;
  dispatch.pg = pool_options.connect;
  dispatch.pg.application_name = spec.program + "-dispatcher";
  // Cycle commits (PUBLISHED, re-schedules) and sweeps: a lost one leaves the
  // row to be published again (docs/guarantees.md).
  dispatch.pg.asynchronous_commit = true;
  dispatch.redis = common.RedisOptions();
  outbox::Dispatcher dispatcher(dispatch, (*metrics)->registry());
  dispatcher.Start();

  outbox::ReceiptReaderOptions receipts;
  receipts.owner = spec.owner;
  receipts.audit_stream = dispatch.stream.empty() ? audit::StreamFor(spec.owner) : dispatch.stream;
  receipts.stream = audit::ReceiptStreamFor(receipts.audit_stream);
  receipts.keys = keys->get();
  // Receipts older than two resend timeouts concern rows that are confirmed
  // or being re-sent anyway.
  receipts.start_lookback = 2 * dispatch.resend_timeout;
  receipts.pg = pool_options.connect;
  receipts.pg.application_name = spec.program + "-receipts";
  // A lost CONFIRMED only causes a re-send, which Admin receipts again.
  receipts.pg.asynchronous_commit = true;
  receipts.redis = dispatch.redis;
  outbox::ReceiptReader receipt_reader(receipts, (*metrics)->registry());
  receipt_reader.Start();

  retention::Retention retention(outbox::RetentionTables(housekeeping), retention::kMaxBatchSize,
                                 (*metrics)->registry());
  outbox::OutboxGauges gauges(spec.owner, (*metrics)->registry());
  pg::ConnectOptions housekeeping_pg = pool_options.connect;
  housekeeping_pg.application_name = spec.program + "-housekeeping";
  worker::Periodic periodic(housekeeping_pg,
                            {{"outbox.retention", housekeeping.retention_interval,
                              [&](pg::Connection* c) {
                                return retention.RunOnce(*c, [&] { return periodic.stopping(); });
                              }},
                             {"outbox.gauges", housekeeping.sample_interval,
                              [&](pg::Connection* c) { return gauges.Sample(*c); }}},
                            (*metrics)->registry());
  periodic.Start();

  auto jwks = jwt::JwksFile::Open(common.jwks_file);
  if (!jwks.ok()) DieOnStartup(name.c_str(), jwks.status());
  jwt::BearerTokenResolver resolver(**jwks, common.JwtOptions());
  server::Authorizer authorizer(resolver, *spec.access_rules);
  std::unique_ptr<grpc::Service> service = spec.make_service(pool, authorizer, *signer);
  server::Authorizer operators(resolver, outbox::OperationsAccessRules());
  outbox::OperationsService operations(spec.owner, pool, operators, *signer);
  server::GrpcServer grpc_server(common.GrpcOptions(&resolver), (*metrics)->registry());
  grpc_server.AddService(service.get(), spec.service_name);
  grpc_server.AddService(&operations, outbox::kOperationsServiceName);
  if (auto s = grpc_server.Start(); !s.ok()) DieOnStartup(name.c_str(), s);
  grpc_server.SetServing(true);
  log::Info(name, "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info(name, "shutting down", {{"signal", absl::StrCat(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  periodic.Stop();
  receipt_reader.Stop();
  dispatcher.Stop();
  pool.Close();
  log::Info(name, "stopped");
  return 0;
}

}  // namespace ulticode::runtime
