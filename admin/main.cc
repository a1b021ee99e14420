// Wiring only: config -> metrics -> database (migrate) -> lease consumer ->
// inbox bridge -> gRPC -> SERVING; stop in reverse on SIGTERM/SIGINT (the
// bridge first, so nothing new is taken over while the workers drain).
#include "absl/strings/str_cat.h"
#include "admin/consumer/consumer_flags.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "admin/inbox/bridge_flags.h"
#include "admin/maintenance/housekeeping.h"
#include "admin/operations/operations_service.h"
#include "admin/query/audit_query_service.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/jwt/bearer_resolver.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/runtime/service_flags.h"
#include "common/runtime/startup.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"
#include "common/worker/periodic.h"

namespace ulticode::admin {
const std::vector<migrations::Migration>& Migrations();

// Least privilege for Admin's runtime role: the audit trail is append-only
// (INSERT and SELECT on audit_logs, never UPDATE, DELETE or TRUNCATE).
const std::vector<std::string> kRuntimeGrants = {
    "GRANT SELECT, INSERT, UPDATE ON consumer_inbox TO {role}",
    "GRANT SELECT, INSERT ON poison_events TO {role}",
    // Operators resolve poison entries; nothing else of a poison row changes.
    "GRANT UPDATE (resolved_at, resolution) ON poison_events TO {role}",
    // Retention, only through these (no DELETE on the tables).
    "GRANT EXECUTE ON FUNCTION inbox_retention(float8, integer),"
    " poison_retention(float8, integer) TO {role}",
    "GRANT SELECT, INSERT ON audit_logs TO {role}",
    "GRANT USAGE ON SEQUENCE consumer_inbox_id_seq, poison_events_id_seq,"
    " consumer_inbox_fencing_token TO {role}",
};
}  // namespace ulticode::admin

int main(int argc, char** argv) {
  using namespace ulticode;
  server::BlockTerminationSignals();

  runtime::ServiceFlags common("127.0.0.1:50053", "127.0.0.1:9103", "ulticode_admin",
                               server::kAdminMaxReceiveBytes);
  admin::inbox::BridgeOptions bridge_options;
  std::string auth_stream, app_stream;
  admin::consumer::ConsumerOptions consumer_options;
  std::string signing_key_file;
  config::Flags flags("ulticode-admin", "Admin: audit inbox, audit_logs and the audit query API.");
  common.Register(flags);
  flags.String("receipt-signing-key-file", &signing_key_file,
               "Admin's Ed25519 private key (PKCS#8 PEM, mode 0600): signs every receipt");
  flags.Require("receipt-signing-key-file", [&] { return common.migrate_only(); });
  admin::inbox::RegisterBridgeFlags(flags, &bridge_options, &auth_stream, &app_stream);
  admin::consumer::RegisterConsumerFlags(flags, &consumer_options);
  admin::maintenance::HousekeepingOptions housekeeping;
  flags.Duration("inbox-retention", &housekeeping.inbox_retention,
                 "PROCESSED inbox rows are deleted this long after they were processed (at least "
                 "48h: it must outlive every re-send of the event)",
                 absl::Hours(1), absl::Hours(24 * 3650));
  flags.Duration("poison-retention", &housekeeping.poison_retention,
                 "poison entries are deleted this long after they arrived", absl::Hours(1),
                 absl::Hours(24 * 3650));
  flags.Duration("retention-interval", &housekeeping.retention_interval, "how often retention runs",
                 absl::Seconds(1), absl::Hours(24));
  flags.Duration("stream-trim-interval", &housekeeping.stream_trim_interval,
                 "how often the owner streams are trimmed up to what every group acknowledged",
                 absl::Seconds(1), absl::Hours(1));
  flags.Duration("metrics-sample-interval", &housekeeping.sample_interval,
                 "how often the backlog gauges are sampled", absl::Seconds(1), absl::Hours(1));
  flags.AddCheck([&] { return admin::maintenance::CheckRetention(housekeeping); });
  config::ParseOrExit(flags, argc, argv);
  common.ApplyLogging();
  admin::inbox::FinishBridgeOptions(&bridge_options, auth_stream, app_stream);
  if (auto s = common.LoadSecrets(); !s.ok()) runtime::DieOnStartup("admin", s);
  // The init step migrates and exits; a server checks its keys first.
  auto prepare_schema = [&] {
    if (auto s = runtime::PrepareSchema(common, "ulticode-admin-migrate", admin::Migrations(),
                                        admin::kRuntimeGrants);
        !s.ok()) {
      runtime::DieOnStartup("admin", s);
    }
  };
  if (common.migrate_only()) {
    prepare_schema();
    return 0;
  }
  auto signer = crypto::SigningKey::FromFile(signing_key_file);
  if (!signer.ok()) runtime::DieOnStartup("admin", signer.status());
  auto keys = crypto::KeyDirectoryFile::Open(common.public_keys_file);
  if (!keys.ok()) runtime::DieOnStartup("admin", keys.status());
  log::Info(
      "admin", "keys loaded",
      {{"receipt_key_id", signer->key_id()}, {"public_keys", (*keys)->Current()->Describe()}});

  auto metrics = metrics::Metrics::Start(common.metrics_listen, "admin");
  if (!metrics.ok()) runtime::DieOnStartup("admin", metrics.status());

  pg::PoolOptions pool_options = common.PoolOptions("ulticode-admin");
  pool_options.registry = &(*metrics)->registry();
  pool_options.name = "rpc";
  prepare_schema();
  pg::Pool pool(pool_options);

  const redis::Options redis_options = common.RedisOptions();

  consumer_options.pg = pool_options.connect;
  consumer_options.pg.application_name = "ulticode-admin-consumer";
  // Claims and settles: a lost settle (PROCESSED + its audit row, one
  // transaction) leaves the inbox row, which the bridge committed durably,
  // to be claimed and written again. The bridge keeps synchronous commits.
  consumer_options.pg.asynchronous_commit = true;
  admin::consumer::LeaseConsumer consumer(consumer_options, (*metrics)->registry());
  consumer.Start();

  bridge_options.pg = pool_options.connect;
  bridge_options.pg.application_name = "ulticode-admin-bridge";
  bridge_options.redis = redis_options;
  bridge_options.keys = keys->get();
  bridge_options.receipt_signer = &*signer;
  admin::inbox::InboxBridge bridge(bridge_options, (*metrics)->registry());
  bridge.Start();

  retention::Retention retention(admin::maintenance::RetentionTables(housekeeping),
                                 retention::kMaxBatchSize, (*metrics)->registry());
  admin::maintenance::InboxGauges inbox_gauges(bridge_options.inbox_consumer,
                                               (*metrics)->registry());
  admin::maintenance::StreamMaintenance streams(bridge_options.streams, redis_options,
                                                (*metrics)->registry());
  pg::ConnectOptions housekeeping_pg = pool_options.connect;
  housekeeping_pg.application_name = "ulticode-admin-housekeeping";
  worker::Periodic periodic(
      housekeeping_pg,
      {{"inbox.retention", housekeeping.retention_interval,
        [&](pg::Connection* c) {
          return retention.RunOnce(*c, [&] { return periodic.stopping(); });
        }},
       {"inbox.gauges", housekeeping.sample_interval,
        [&](pg::Connection* c) { return inbox_gauges.Sample(*c); }},
       {"stream.trim", housekeeping.stream_trim_interval,
        [&](pg::Connection*) { return streams.Trim(); }, /*database=*/false},
       {"stream.gauges", housekeeping.sample_interval,
        [&](pg::Connection*) { return streams.Sample(); }, /*database=*/false}},
      (*metrics)->registry());
  periodic.Start();

  admin::query::QueryServiceOptions query_options;
  query_options.streams = bridge_options.streams;
  query_options.group = bridge_options.group;
  query_options.consumer = bridge_options.inbox_consumer;
  query_options.redis = redis_options;
  auto jwks = jwt::JwksFile::Open(common.jwks_file);
  if (!jwks.ok()) runtime::DieOnStartup("admin", jwks.status());
  jwt::BearerTokenResolver resolver(**jwks, common.JwtOptions());
  server::Authorizer authorizer(resolver, admin::query::AccessRules());
  admin::query::AuditQueryService service(pool, authorizer, query_options);
  server::Authorizer operators(resolver, admin::operations::AccessRules());
  admin::operations::OperationsService operations(
      pool, operators,
      {bridge_options.inbox_consumer, bridge_options.streams, bridge_options.limits, keys->get(),
       &*signer});
  server::GrpcServer grpc_server(common.GrpcOptions(&resolver), (*metrics)->registry());
  grpc_server.AddService(&service, "ulticode.admin.v1.AdminService");
  grpc_server.AddService(&operations, admin::operations::kServiceName);
  if (auto s = grpc_server.Start(); !s.ok()) runtime::DieOnStartup("admin", s);
  grpc_server.SetServing(true);
  log::Info("admin", "serving", {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = server::WaitForTerminationSignal();
  log::Info("admin", "shutting down", {{"signal", absl::StrCat(sig)}});
  grpc_server.Shutdown(common.shutdown_timeout);
  periodic.Stop();
  bridge.Stop();
  consumer.Stop();
  pool.Close();
  log::Info("admin", "stopped");
  return 0;
}
