#include "owner/outbox/housekeeping.h"

#include <algorithm>

#include "common/base/status_macros.h"

namespace ulticode::outbox {
namespace {

// Through the migration role's functions (owner/outbox/migrations/10001_outbox.sql): the runtime
// role has no DELETE on these tables.
constexpr pg::Statement kDeleteConfirmed{
    "outbox.retention", "SELECT outbox_retention($1::float8, $2::integer)", absl::Seconds(30)};
constexpr pg::Statement kDeleteKeys{"idempotency.retention",
                                    "SELECT idempotency_retention($1::float8, $2::integer)",
                                    absl::Seconds(30)};

// Every figure from a partial index or a capped scan. The oldest PENDING row
// is looked for among the first 10,000 by next_attempt_at (the due order).
constexpr pg::Statement kSample{
    "outbox.sample",
    "SELECT"
    " (SELECT count(*) FROM (SELECT 1 FROM audit_outbox WHERE state = 'PENDING' LIMIT $1) s),"
    " (SELECT count(*) FROM (SELECT 1 FROM audit_outbox WHERE state = 'PUBLISHED' LIMIT $1) s),"
    " (SELECT count(*) FROM (SELECT 1 FROM audit_outbox WHERE state = 'DEAD' LIMIT $1) s),"
    " (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = 'audit_outbox'::regclass),"
    " coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM (SELECT created_at"
    "   FROM audit_outbox WHERE state = 'PENDING' ORDER BY next_attempt_at LIMIT 10000) p)),"
    "   0)::float8,"
    " coalesce(extract(epoch FROM now() - (SELECT min(published_at) FROM audit_outbox"
    "   WHERE state = 'PUBLISHED')), 0)::float8",
    absl::Seconds(10)};

}  // namespace

void RegisterHousekeepingFlags(config::Flags& flags, OwnerHousekeepingOptions* options) {
  flags.Duration("outbox-retention", &options->outbox_retention,
                 "CONFIRMED outbox rows are deleted this long after they were confirmed (what "
                 "OutboxOperations/Replay can still publish again)",
                 absl::Minutes(1), absl::Hours(24 * 3650));
  flags.Duration("idempotency-retention", &options->idempotency_retention,
                 "idempotency keys are deleted this long after the request (a retry after that "
                 "is a new request)",
                 absl::Minutes(1), absl::Hours(24 * 3650));
  flags.Duration("outbox-number-settle", &options->number_settle,
                 "event numbers taken at least this long ago and never committed are attested "
                 "to Admin as void (longer than any transaction lasts)",
                 absl::Seconds(1), absl::Hours(1));
  retention::RegisterScheduleFlags(flags, &options->retention_interval, &options->sample_interval);
}

std::vector<retention::Table> RetentionTables(const OwnerHousekeepingOptions& options) {
  return {{"audit_outbox", kDeleteConfirmed, options.outbox_retention},
          {"idempotency_keys", kDeleteKeys, options.idempotency_retention}};
}

OutboxGauges::OutboxGauges(audit::Owner owner, prometheus::Registry& registry) {
  const std::string name = audit::OwnerName(owner);
  auto& rows = prometheus::BuildGauge()
                   .Name("ulticode_outbox_rows")
                   .Help(
                       "Outbox rows by state (sampled; CONFIRMED is an estimate from "
                       "PostgreSQL's row estimate; counts capped at 1,000,000)")
                   .Register(registry);
  pending_ = &rows.Add({{"owner", name}, {"state", "PENDING"}});
  published_ = &rows.Add({{"owner", name}, {"state", "PUBLISHED"}});
  dead_ = &rows.Add({{"owner", name}, {"state", "DEAD"}});
  confirmed_ = &rows.Add({{"owner", name}, {"state", "CONFIRMED"}});
  oldest_pending_ = &prometheus::BuildGauge()
                         .Name("ulticode_outbox_oldest_pending_age_seconds")
                         .Help("Age of the oldest PENDING (not yet published) outbox row; 0: none")
                         .Register(registry)
                         .Add({{"owner", name}});
  oldest_unconfirmed_ = &prometheus::BuildGauge()
                             .Name("ulticode_outbox_oldest_unconfirmed_age_seconds")
                             .Help(
                                 "Time since the oldest PUBLISHED row not yet proved in Admin's "
                                 "log was published; 0: none")
                             .Register(registry)
                             .Add({{"owner", name}});
}

absl::Status OutboxGauges::Sample(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kSample, {pg::Int(kCountCap)}));
  const int64_t pending = r.GetInt64(0, 0), published = r.GetInt64(0, 1), dead = r.GetInt64(0, 2);
  pending_->Set(static_cast<double>(pending));
  published_->Set(static_cast<double>(published));
  dead_->Set(static_cast<double>(dead));
  confirmed_->Set(
      static_cast<double>(std::max<int64_t>(0, r.GetInt64(0, 3) - pending - published - dead)));
  oldest_pending_->Set(r.GetDouble(0, 4));
  oldest_unconfirmed_->Set(r.GetDouble(0, 5));
  return absl::OkStatus();
}

}  // namespace ulticode::outbox
