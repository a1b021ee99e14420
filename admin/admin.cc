#include "admin/admin.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "admin/consumer/consumer_flags.h"
#include "admin/inbox/bridge_flags.h"
#include "admin/maintenance/sequence_watch.h"
#include "admin/maintenance/stream_guard.h"
#include "admin/operations/operations_service.h"
#include "admin/query/audit_query_service.h"
#include "admin/transparency/audit_log_service.h"
#include "admin/transparency/completeness.h"
#include "admin/transparency/witness_feed.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/retention/retention.h"
#include "common/worker/periodic.h"

namespace ulticode::admin {
namespace {

// Admin's Redis connections: never closed to free client memory, whatever
// the owners' logins hold.
redis::Options AdminRedis(runtime::ServiceContext& context) {
  redis::Options redis = context.Redis();
  redis.no_evict = true;
  return redis;
}

void StartPipeline(const Options& options, runtime::ServiceContext& context) {
  consumer::ConsumerOptions consumer = options.consumer;
  consumer.pg = context.Connection("consumer");
  // Claims and settles: a lost settle (PROCESSED + its audit row, one
  // transaction) leaves the inbox row, which the bridge committed durably,
  // to be claimed and written again. The bridge keeps synchronous commits.
  consumer.pg.asynchronous_commit = true;
  context.Start(std::make_unique<consumer::LeaseConsumer>(consumer, context.registry()));

  inbox::BridgeOptions bridge = options.bridge;
  bridge.pg = context.Connection("bridge");
  bridge.redis = AdminRedis(context);
  bridge.keys = &context.keys();
  context.Start(std::make_unique<inbox::InboxBridge>(bridge, context.registry()));
}

// The sequencer on its own connection and thread: retention or a slow
// gauge never delays a checkpoint.
absl::Status StartLog(const Options& options, runtime::ServiceContext& context) {
  if (!options.log.sequencer) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::unique_ptr<transparency::LogJob> job,
                   transparency::LogJob::Create(options.log, context.registry()));
  log::Info("admin", "transparency log", {{"verifier_key", job->VerifierKey()}});
  auto& kept = context.Keep(std::move(job));
  transparency::WitnessFeedOptions witnesses;
  for (const auto& [owner, stream] : options.bridge.streams) {
    witnesses.owners.emplace_back(audit::OwnerName(owner), stream);
  }
  // The cosignature streams are the owners' to write: read with the
  // bridge's reply limits (an entry past them arrives as malformed).
  inbox::BridgeOptions reading = options.bridge;
  reading.redis = AdminRedis(context);
  witnesses.redis = inbox::ReadingOptions(reading);
  witnesses.keys = &context.keys();
  witnesses.resend = options.log.witness_resend;
  witnesses.proof_stream_bytes = options.housekeeping.proof_stream_bytes;
  auto& feed = context.Keep(
      std::make_unique<transparency::WitnessFeed>(std::move(witnesses), context.registry()));
  context.Start(std::make_unique<worker::Periodic>(
      context.Connection("log"),
      std::vector<worker::PeriodicJob>{
          {"log.sequence", options.log.sequence_interval,
           [&kept](pg::Connection* c, const worker::Stopping& stopping) {
             return kept.Run(*c, stopping);
           }},
          {"log.witness", options.log.sequence_interval,
           [&feed](pg::Connection* c, const worker::Stopping&) { return feed.RunOnce(*c); }}},
      context.registry()));
  return absl::OkStatus();
}

void StartHousekeeping(const Options& options, runtime::ServiceContext& context) {
  const maintenance::AdminHousekeepingOptions& h = options.housekeeping;
  auto& retention = context.Keep(std::make_unique<retention::Retention>(
      maintenance::RetentionTables(h), retention::kMaxBatchSize, context.registry()));
  auto& inbox_gauges = context.Keep(std::make_unique<maintenance::InboxGauges>(
      options.bridge.inbox_consumer, context.registry()));
  inbox::BridgeOptions reading = options.bridge;
  reading.redis = AdminRedis(context);
  auto& streams = context.Keep(std::make_unique<maintenance::StreamMaintenance>(
      options.bridge.streams, inbox::ReadingOptions(reading), context.registry()));
  std::vector<std::string> owners;
  for (const auto& [owner, stream] : options.bridge.streams)
    owners.push_back(audit::OwnerName(owner));
  auto& guard = context.Keep(std::make_unique<maintenance::StreamGuard>(
      options.bridge.streams, h.owner_stream_bytes, h.proof_stream_bytes,
      inbox::ReadingOptions(reading), context.registry()));
  auto& sequences = context.Keep(std::make_unique<maintenance::SequenceWatch>(
      owners, h.sequence_gap_grace, context.registry()));
  auto& completeness = context.Keep(
      std::make_unique<transparency::Completeness>(options.log.unlogged_after, context.registry()));
  using worker::Stopping;
  context.Start(std::make_unique<worker::Periodic>(
      context.Connection("housekeeping"),
      std::vector<worker::PeriodicJob>{
          {"log.completeness", options.log.completeness_interval,
           [&completeness](pg::Connection* c, const Stopping&) { return completeness.Check(*c); }},
          {"inbox.retention", h.retention_interval,
           [&retention](pg::Connection* c, const Stopping& stopping) {
             return retention.RunOnce(*c, stopping);
           }},
          {"inbox.gauges", h.sample_interval,
           [&inbox_gauges](pg::Connection* c, const Stopping&) { return inbox_gauges.Sample(*c); }},
          {"stream.guard", h.stream_guard_interval,
           [&guard](pg::Connection*, const Stopping&) { return guard.RunOnce(); },
           /*database=*/false},
          {"stream.trim", h.stream_trim_interval,
           [&streams](pg::Connection*, const Stopping&) { return streams.Trim(); },
           /*database=*/false},
          {"sequence.watch", h.sample_interval,
           [&sequences](pg::Connection* c, const Stopping&) { return sequences.Check(*c); }},
          {"stream.gauges", h.sample_interval,
           [&streams](pg::Connection*, const Stopping&) { return streams.Sample(); },
           /*database=*/false}},
      context.registry()));
}

// --owner-operations: empty (erasure refused), or one endpoint for each
// owner: an erasure that skipped one would leave its values there.
absl::StatusOr<std::vector<operations::OwnerEndpoint>> OwnerEndpoints(absl::string_view list) {
  std::vector<operations::OwnerEndpoint> out;
  if (list.empty()) return out;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const audit::Owner owner = audit::OwnerFromName(kv.first);
    if ((owner != audit::v1::OWNER_AUTH && owner != audit::v1::OWNER_APP) || kv.second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--owner-operations: \"", item,
                                                     "\" is not auth=HOST:PORT or app=HOST:PORT"));
    }
    for (const auto& seen : out) {
      if (seen.owner == owner) {
        return absl::InvalidArgumentError(
            absl::StrCat("--owner-operations: ", kv.first, " is given twice"));
      }
    }
    out.push_back({owner, std::string(kv.second)});
  }
  if (out.size() != 2) {
    return absl::InvalidArgumentError(
        "--owner-operations: give both auth=HOST:PORT and app=HOST:PORT (an erasure must reach "
        "every owner)");
  }
  return out;
}

void ServeApis(const Options& options, std::vector<operations::OwnerEndpoint> owners,
               runtime::ServiceContext& context) {
  query::QueryServiceOptions query;
  query.streams = options.bridge.streams;
  query.group = options.bridge.group;
  query.consumer = options.bridge.inbox_consumer;
  query.max_cost = static_cast<double>(options.query_max_cost);
  query.max_exports = static_cast<int>(options.export_max_concurrent);
  inbox::BridgeOptions reading = options.bridge;
  reading.redis = AdminRedis(context);
  query.redis = inbox::ReadingOptions(reading);
  watch::WatchOptions watching = options.watch;
  watching.pg = context.Connection("watch");
  auto& watches =
      context.Start(std::make_unique<watch::WatchHub>(std::move(watching), context.registry()));
  context.BeforeDrain([&watches] { watches.EndAll(); });
  context.Serve(std::make_unique<query::AuditQueryService>(context.pool(),
                                                           context.Authorizer(query::AccessRules()),
                                                           watches, context.registry(), query),
                "ulticode.admin.v1.AdminService");
  context.Serve(std::make_unique<transparency::AuditLogService>(
                    context.pool(), context.Authorizer(transparency::AccessRules())),
                transparency::kServiceName);
  context.Serve(
      std::make_unique<operations::AdminOperationsService>(
          context.pool(), context.Authorizer(operations::AccessRules()),
          operations::OperationsOptions{options.bridge.inbox_consumer, options.bridge.streams,
                                        options.bridge.limits, &context.keys(), &context.signer(),
                                        std::move(owners), options.owner_token_file,
                                        options.owner_cacert, options.personal_data_commitments}),
      operations::kServiceName);
}

}  // namespace

void RegisterFlags(config::Flags& flags, Options* options) {
  inbox::RegisterBridgeFlags(flags, &options->bridge, &options->auth_stream, &options->app_stream);
  consumer::RegisterConsumerFlags(flags, &options->consumer);
  maintenance::RegisterHousekeepingFlags(flags, &options->housekeeping);
  transparency::RegisterLogFlags(flags, &options->log);
  watch::RegisterWatchFlags(flags, &options->watch);
  flags.Int("query-max-cost", &options->query_max_cost,
            "QueryAuditLogs refuses a filter combination whose plan PostgreSQL estimates above "
            "this cost at the table's current size (no index serves it): INVALID_ARGUMENT "
            "naming the filters to add",
            1000, int64_t{1} << 40);
  flags.Int("export-max-concurrent", &options->export_max_concurrent,
            "ExportAuditLogs calls running at once (each holds one of the RPC threads while it "
            "streams); one more is refused with RESOURCE_EXHAUSTED and a RetryInfo",
            1, 64);
  flags.String("owner-operations", &options->owner_operations,
               "where ErasePersonalData reaches each owner's OutboxOperations: "
               "auth=HOST:PORT,app=HOST:PORT (empty: erasure is refused)");
  flags.String("owner-token-file", &options->owner_token_file,
               "bearer token (role privacy.officer, audience of the owners) Admin presents to the "
               "owners for ErasePersonalData; read at each call, so a rotated token takes effect");
  flags.String("owner-cacert", &options->owner_cacert,
               "PEM CA certificate(s) to trust for the owners' TLS (empty: plaintext)");
  flags.Bool("personal-data-commitments", &options->personal_data_commitments,
             "Admin's own records commit to their personal values (the caller's address and "
             "agent), as the owners' do (docs/personal-data.md)");
}

const std::vector<std::string>& RuntimeGrants() {
  static const auto* kGrants = new std::vector<std::string>{
      "GRANT SELECT, INSERT, UPDATE ON consumer_inbox TO {role}",
      "GRANT SELECT, INSERT ON poison_events TO {role}",
      // Operators resolve poison entries; nothing else of a poison row changes.
      "GRANT UPDATE (resolved_at, resolution) ON poison_events TO {role}",
      // Retention, only through these (no DELETE on the tables).
      "GRANT EXECUTE ON FUNCTION inbox_retention(float8, integer),"
      " poison_retention(float8, integer), idempotency_retention(float8, integer) TO {role}",
      // Operator mutations' request ids (AIP-155): written once, never changed.
      "GRANT SELECT, INSERT ON idempotency_keys TO {role}",
      "GRANT SELECT, INSERT ON audit_logs TO {role}",
      // The log only grows: leaves, nodes, checkpoints and cosignatures are
      // appended, never changed or deleted.
      "GRANT SELECT, INSERT ON log_leaves, log_nodes, log_checkpoints, log_cosignatures TO {role}",
      // New audit rows wait here for the sequencer (admin/migrations/0001_admin.sql), which
      // takes them off only through log_queue_done (0016): never a row that
      // is not yet a leaf.
      "GRANT SELECT, INSERT ON log_queue TO {role}",
      "GRANT EXECUTE ON FUNCTION log_queue_done(uuid[]) TO {role}",
      "GRANT SELECT, INSERT, UPDATE ON log_witnesses TO {role}",
      "GRANT SELECT, INSERT, DELETE ON log_proof_requests TO {role}",
      "GRANT SELECT, INSERT, UPDATE ON owner_sequence_checked, owner_sequence_gaps TO {role}",
      // Personal values are kept, and go only through erase_personal_data
      // (0001_admin.sql), which records every erasure.
      "GRANT SELECT, INSERT ON personal_values TO {role}",
      "GRANT SELECT ON personal_erasures TO {role}",
      "GRANT EXECUTE ON FUNCTION erase_personal_data(text, timestamptz, text, uuid) TO {role}",
      "GRANT USAGE ON SEQUENCE consumer_inbox_id_seq, poison_events_id_seq,"
      " consumer_inbox_fencing_token, log_queue_seq_seq TO {role}",
  };
  return *kGrants;
}

absl::Status Assemble(Options options, runtime::ServiceContext& context) {
  ASSIGN_OR_RETURN(std::vector<operations::OwnerEndpoint> owners,
                   OwnerEndpoints(options.owner_operations));
  inbox::FinishBridgeOptions(&options.bridge, options.auth_stream, options.app_stream);
  StartPipeline(options, context);
  RETURN_IF_ERROR(StartLog(options, context));
  StartHousekeeping(options, context);
  ServeApis(options, std::move(owners), context);
  return absl::OkStatus();
}

}  // namespace ulticode::admin
