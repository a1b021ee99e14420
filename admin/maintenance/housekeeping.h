// Admin's periodic housekeeping (worker::Periodic jobs):
//  - retention: PROCESSED inbox rows after `--inbox-retention` (30 d) and
//    poison entries after `--poison-retention` (90 d), operator request ids
//    after `--idempotency-retention` (24 h). PENDING, PROCESSING
//    and DEAD inbox rows are never deleted, and audit_logs never is.
//  - stream trimming (stream_trimmer.h) every `--stream-trim-interval`, and
//    every owner-writable stream held to its share of Redis's memory
//    (stream_guard.h) every `--stream-guard-interval`.
//  - gauges: the inbox backlog, the poison store and every owner stream and
//    group, sampled with bounded cost (partial indexes, capped counts).
//
// The inbox retention rule: an inbox row is what makes a re-delivery of its
// event a harmless duplicate (and a re-delivery with other bytes a conflict),
// so it must outlive every re-send. An owner re-sends an unconfirmed event at
// most every max(--dispatch-resend-timeout x 64 capped at one hour,
// --dispatch-resend-timeout), and --dispatch-resend-timeout is at most 24 h:
// no re-send comes more than 24 h after the previous one. Admin refuses an
// --inbox-retention under kMinInboxRetention (twice that). Even past it,
// audit_logs (keyed by event id, never deleted) keeps a late re-send from
// writing a second audit row.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/config/flags.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/retention/retention.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::admin::maintenance {

inline constexpr absl::Duration kMinInboxRetention = absl::Hours(48);

struct AdminHousekeepingOptions {
  absl::Duration inbox_retention = absl::Hours(24 * 30);
  absl::Duration poison_retention = absl::Hours(24 * 90);
  absl::Duration idempotency_retention = absl::Hours(24);
  absl::Duration retention_interval = absl::Minutes(1);
  absl::Duration stream_trim_interval = absl::Minutes(1);
  // Each owner stream's share of Redis's memory, and how often it is held
  // to it (stream_guard.h).
  int64_t owner_stream_bytes = int64_t{192} << 20;
  // Each proof stream's share (Admin writes it; StreamGuard holds it).
  int64_t proof_stream_bytes = int64_t{64} << 20;
  absl::Duration stream_guard_interval = absl::Milliseconds(500);
  absl::Duration sample_interval = absl::Seconds(15);
  // An owner's event number still missing this long after a higher one
  // arrived is reported (sequence_watch.h); checked every sample_interval.
  absl::Duration sequence_gap_grace = absl::Minutes(15);
};

// --inbox-retention, --poison-retention, --idempotency-retention, --stream-trim-interval,
// --owner-stream-max-bytes, --stream-guard-interval, --sequence-gap-grace, --retention-interval and
// --metrics-sample-interval, with CheckRetention.
void RegisterHousekeepingFlags(config::Flags& flags, AdminHousekeepingOptions* options);

// INVALID_ARGUMENT naming the flag when the inbox retention breaks the rule.
absl::Status CheckRetention(const AdminHousekeepingOptions& options);

std::vector<retention::Table> RetentionTables(const AdminHousekeepingOptions& options);

// The inbox and the poison store.
class InboxGauges {
 public:
  InboxGauges(std::string consumer, prometheus::Registry& registry);
  absl::Status Sample(pg::Connection& conn);

 private:
  const std::string consumer_;
  prometheus::Gauge* pending_;
  prometheus::Gauge* processing_;
  prometheus::Gauge* dead_;
  prometheus::Gauge* processed_;  // estimate
  prometheus::Gauge* oldest_pending_;
  prometheus::Gauge* oldest_lease_;
  prometheus::Gauge* oldest_retry_;
  prometheus::Gauge* poison_;
};

// Every owner stream and its consumer groups; also trims them.
class StreamMaintenance {
 public:
  StreamMaintenance(std::vector<std::pair<audit::Owner, std::string>> streams, redis::Options redis,
                    prometheus::Registry& registry);
  absl::Status Sample();
  absl::Status Trim();

 private:
  const std::vector<std::pair<audit::Owner, std::string>> streams_;
  redis::Client sampler_, trimmer_;  // one per job thread
  prometheus::Family<prometheus::Gauge>* length_;
  prometheus::Family<prometheus::Gauge>* lag_;
  prometheus::Family<prometheus::Gauge>* pending_;
  prometheus::Family<prometheus::Gauge>* oldest_pending_idle_;
  prometheus::Family<prometheus::Counter>* trimmed_;
};

}  // namespace ulticode::admin::maintenance
