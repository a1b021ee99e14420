#include "admin/maintenance/housekeeping.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "admin/maintenance/stream_trimmer.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"

namespace ulticode::admin::maintenance {
namespace {

constexpr int64_t kCountCap = 1000000;

// Through the migration role's functions (admin/migrations/0001_admin.sql): the runtime role
// has no DELETE on these tables.
constexpr pg::Statement kDeleteProcessed{
    "inbox.retention", "SELECT inbox_retention($1::float8, $2::integer)", absl::Seconds(30)};
constexpr pg::Statement kDeletePoison{
    "poison.retention", "SELECT poison_retention($1::float8, $2::integer)", absl::Seconds(30)};
// Migration 0018.
constexpr pg::Statement kDeleteKeys{"idempotency.retention",
                                    "SELECT idempotency_retention($1::float8, $2::integer)",
                                    absl::Seconds(30)};

// Partial indexes and capped scans only. Oldest PENDING and oldest retry are
// looked for among the first 10,000 PENDING rows in due order.
constexpr pg::Statement kSample{
    "inbox.sample",
    "SELECT"
    " (SELECT count(*) FROM (SELECT 1 FROM consumer_inbox WHERE consumer = $1"
    "   AND status = 'PENDING' LIMIT $2) s),"
    " (SELECT count(*) FROM (SELECT 1 FROM consumer_inbox WHERE consumer = $1"
    "   AND status = 'PROCESSING' LIMIT $2) s),"
    " (SELECT count(*) FROM (SELECT 1 FROM consumer_inbox WHERE consumer = $1"
    "   AND status = 'DEAD' LIMIT $2) s),"
    " (SELECT greatest(reltuples, 0)::bigint FROM pg_class"
    "   WHERE oid = 'consumer_inbox'::regclass),"
    " coalesce(extract(epoch FROM now() - (SELECT min(received_at) FROM (SELECT received_at"
    "   FROM consumer_inbox WHERE consumer = $1 AND status = 'PENDING'"
    "   ORDER BY next_retry_at LIMIT 10000) p)), 0)::float8,"
    " coalesce(extract(epoch FROM now() - (SELECT min(leased_at) FROM consumer_inbox"
    "   WHERE consumer = $1 AND status = 'PROCESSING')), 0)::float8,"
    " coalesce(extract(epoch FROM now() - (SELECT min(first_failed_at) FROM (SELECT"
    "   first_failed_at FROM consumer_inbox WHERE consumer = $1 AND status = 'PENDING'"
    "   ORDER BY next_retry_at LIMIT 10000) p)), 0)::float8,"
    " (SELECT count(*) FROM (SELECT 1 FROM poison_events WHERE consumer = $1"
    "   AND resolved_at IS NULL LIMIT $2) s)",
    absl::Seconds(10)};

}  // namespace

void RegisterHousekeepingFlags(config::Flags& flags, AdminHousekeepingOptions* options) {
  flags.Duration("inbox-retention", &options->inbox_retention,
                 "PROCESSED inbox rows are deleted this long after they were processed (at least "
                 "48h: it must outlive every re-send of the event)",
                 absl::Hours(1), absl::Hours(24 * 3650));
  flags.Duration("poison-retention", &options->poison_retention,
                 "poison entries are deleted this long after they arrived", absl::Hours(1),
                 absl::Hours(24 * 3650));
  flags.Duration("idempotency-retention", &options->idempotency_retention,
                 "operator request ids are forgotten this long after the request (a retry after "
                 "that is a new request)",
                 absl::Minutes(1), absl::Hours(24 * 3650));
  flags.Duration("stream-trim-interval", &options->stream_trim_interval,
                 "how often the owner streams are trimmed up to what every group acknowledged",
                 absl::Seconds(1), absl::Hours(1));
  flags.Int("owner-stream-max-bytes", &options->owner_stream_bytes,
            "each owner stream's share of Redis's memory, in bytes: past it its oldest entries "
            "are removed (the owner publishes them again); Redis's maxmemory must hold every "
            "owner's share plus its proof stream's (docs/operating.md)",
            int64_t{1} << 20, int64_t{1} << 40);
  flags.Int("proof-stream-max-bytes", &options->proof_stream_bytes,
            "each owner's proof stream's share of Redis's memory, in bytes: past it its oldest "
            "checkpoints and proofs are removed (the owner's re-send is proved again)",
            int64_t{1} << 20, int64_t{1} << 40);
  flags.Duration("stream-guard-interval", &options->stream_guard_interval,
                 "how often every owner-writable stream is held to its share of Redis's memory",
                 absl::Milliseconds(50), absl::Minutes(1));
  flags.Duration("sequence-gap-grace", &options->sequence_gap_grace,
                 "an owner's event number still missing this long after a higher one arrived "
                 "is reported (ulticode_owner_sequence_missing)",
                 absl::Seconds(1), absl::Hours(24));
  retention::RegisterScheduleFlags(flags, &options->retention_interval, &options->sample_interval);
  flags.AddCheck([options] { return CheckRetention(*options); });
}

absl::Status CheckRetention(const AdminHousekeepingOptions& options) {
  if (options.inbox_retention < kMinInboxRetention) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inbox-retention=", absl::FormatDuration(options.inbox_retention), " is shorter than ",
        absl::FormatDuration(kMinInboxRetention),
        ": an owner may re-send an event up to 24 h after its previous attempt, and the inbox "
        "row must still be there to absorb it"));
  }
  return absl::OkStatus();
}

std::vector<retention::Table> RetentionTables(const AdminHousekeepingOptions& options) {
  return {{"consumer_inbox", kDeleteProcessed, options.inbox_retention},
          {"poison_events", kDeletePoison, options.poison_retention},
          {"idempotency_keys", kDeleteKeys, options.idempotency_retention}};
}

InboxGauges::InboxGauges(std::string consumer, prometheus::Registry& registry)
    : consumer_(std::move(consumer)) {
  auto& rows = prometheus::BuildGauge()
                   .Name("ulticode_inbox_rows")
                   .Help(
                       "Inbox rows by status (sampled; PROCESSED is an estimate from "
                       "PostgreSQL's row estimate; counts capped at 1,000,000)")
                   .Register(registry);
  pending_ = &rows.Add({{"status", "PENDING"}});
  processing_ = &rows.Add({{"status", "PROCESSING"}});
  dead_ = &rows.Add({{"status", "DEAD"}});
  processed_ = &rows.Add({{"status", "PROCESSED"}});
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
  };
  oldest_pending_ =
      gauge("ulticode_inbox_oldest_pending_age_seconds",
            "Age of the oldest PENDING inbox row (waiting for the lease consumer); 0: none");
  oldest_lease_ = gauge("ulticode_inbox_oldest_lease_age_seconds",
                        "How long the oldest PROCESSING row has been leased; 0: none");
  oldest_retry_ = gauge("ulticode_inbox_oldest_retry_age_seconds",
                        "Time since the oldest PENDING row being retried first failed; 0: none");
  poison_ = gauge("ulticode_poison_entries",
                  "Unresolved entries in the poison store (sampled; capped at 1,000,000)");
}

absl::Status InboxGauges::Sample(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kSample, {pg::Text(consumer_), pg::Int(kCountCap)}));
  const int64_t pending = r.GetInt64(0, 0), processing = r.GetInt64(0, 1), dead = r.GetInt64(0, 2);
  pending_->Set(static_cast<double>(pending));
  processing_->Set(static_cast<double>(processing));
  dead_->Set(static_cast<double>(dead));
  processed_->Set(
      static_cast<double>(std::max<int64_t>(0, r.GetInt64(0, 3) - pending - processing - dead)));
  oldest_pending_->Set(r.GetDouble(0, 4));
  oldest_lease_->Set(r.GetDouble(0, 5));
  oldest_retry_->Set(r.GetDouble(0, 6));
  poison_->Set(static_cast<double>(r.GetInt64(0, 7)));
  return absl::OkStatus();
}

StreamMaintenance::StreamMaintenance(std::vector<std::pair<audit::Owner, std::string>> streams,
                                     redis::Options redis, prometheus::Registry& registry)
    : streams_(std::move(streams)), sampler_(redis), trimmer_(redis) {
  length_ = &prometheus::BuildGauge()
                 .Name("ulticode_stream_length")
                 .Help("Entries in the owner stream (sampled)")
                 .Register(registry);
  lag_ = &prometheus::BuildGauge()
              .Name("ulticode_stream_group_lag")
              .Help("Entries of the stream the group has not read yet (Redis 7 XINFO GROUPS lag)")
              .Register(registry);
  pending_ = &prometheus::BuildGauge()
                  .Name("ulticode_stream_group_pending")
                  .Help("Entries delivered to the group and not acknowledged")
                  .Register(registry);
  oldest_pending_idle_ = &prometheus::BuildGauge()
                              .Name("ulticode_stream_group_oldest_pending_idle_seconds")
                              .Help("Idle time of the group's oldest unacknowledged entry; 0: none")
                              .Register(registry);
  trimmed_ = &prometheus::BuildCounter()
                  .Name("ulticode_stream_trimmed_entries_total")
                  .Help("Acknowledged entries removed from an owner stream by XTRIM (MINID)")
                  .Register(registry);
}

absl::Status StreamMaintenance::Sample() {
  for (const auto& [owner, stream] : streams_) {
    ASSIGN_OR_RETURN(const int64_t length, sampler_.XLen(stream));
    length_->Add({{"stream", stream}}).Set(static_cast<double>(length));
    auto listed = sampler_.XInfoGroups(stream);
    if (absl::IsNotFound(listed.status())) continue;
    ASSIGN_OR_RETURN(std::vector<redis::GroupInfo> groups, std::move(listed));
    for (const redis::GroupInfo& g : groups) {
      const prometheus::Labels labels{{"stream", stream}, {"group", g.name}};
      if (g.lag) lag_->Add(labels).Set(static_cast<double>(*g.lag));
      pending_->Add(labels).Set(static_cast<double>(g.pending));
      double idle = 0;
      if (g.pending > 0) {
        ASSIGN_OR_RETURN(redis::Reply oldest,
                         sampler_.Command({"XPENDING", stream, g.name, "-", "+", "1"}));
        // [[id, consumer, idle ms, deliveries]]
        if (!oldest.elements().empty() && oldest.elements()[0].elements().size() == 4) {
          idle = static_cast<double>(oldest.elements()[0].elements()[2].integer()) / 1000.0;
        }
      }
      oldest_pending_idle_->Add(labels).Set(idle);
    }
  }
  return absl::OkStatus();
}

absl::Status StreamMaintenance::Trim() {
  for (const auto& [owner, stream] : streams_) {
    ASSIGN_OR_RETURN(TrimResult r, TrimStream(trimmer_, stream));
    trimmed_->Add({{"stream", stream}}).Increment(static_cast<double>(r.removed));
  }
  return absl::OkStatus();
}

}  // namespace ulticode::admin::maintenance
