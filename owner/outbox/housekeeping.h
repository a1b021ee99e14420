// The owner's periodic housekeeping (worker::Periodic jobs):
//  - retention: CONFIRMED outbox rows after `--outbox-retention` (7 d) and
//    idempotency keys after `--idempotency-retention` (24 h). PENDING,
//    PUBLISHED and DEAD rows are never deleted: they are work or evidence.
//  - gauges: the outbox backlog, sampled with bounded cost however large the
//    table (partial indexes, capped counts, no per-scrape queries).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/config/flags.h"
#include "common/pg/connection.h"
#include "common/retention/retention.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct OwnerHousekeepingOptions {
  absl::Duration outbox_retention = absl::Hours(24 * 7);
  absl::Duration idempotency_retention = absl::Hours(24);
  absl::Duration retention_interval = absl::Minutes(1);
  absl::Duration sample_interval = absl::Seconds(15);
  // How old a sequence position must be before the numbers up to it are
  // attested (number_attestor.h); attested every sample_interval.
  absl::Duration number_settle = absl::Minutes(2);
};

// The outbox's tables for retention::Retention.
// --outbox-retention, --idempotency-retention, --outbox-number-settle,
// --retention-interval and --metrics-sample-interval.
void RegisterHousekeepingFlags(config::Flags& flags, OwnerHousekeepingOptions* options);

std::vector<retention::Table> RetentionTables(const OwnerHousekeepingOptions& options);

// Counts above this are reported as this (a count never scans more rows).
inline constexpr int64_t kCountCap = 1000000;

class OutboxGauges {
 public:
  OutboxGauges(audit::Owner owner, prometheus::Registry& registry);
  absl::Status Sample(pg::Connection& conn);

 private:
  prometheus::Gauge* pending_;
  prometheus::Gauge* published_;
  prometheus::Gauge* dead_;
  prometheus::Gauge* confirmed_;  // estimate: the table's row estimate minus the others
  prometheus::Gauge* oldest_pending_;
  prometheus::Gauge* oldest_unconfirmed_;
};

}  // namespace ulticode::outbox
