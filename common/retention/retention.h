// Retention: rows past their keep time are deleted in small batches, each
// batch its own short transaction that first takes a per-table advisory
// lock (pg_try_advisory_xact_lock): one replica deletes a table at a time,
// and a replica that finds the lock taken leaves the run to the holder.
// Batches of at most `batch_size` rows keep every statement short, so the
// hot path never waits behind a long delete. Metrics per table:
// `ulticode_retention_deleted_rows_total{table}` and
// `ulticode_retention_last_run_timestamp_seconds{table}` (the end of the
// last complete run). Not thread-safe: one job thread runs it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/config/flags.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::retention {

// At most this many rows per DELETE statement.
inline constexpr int kMaxBatchSize = 10000;

struct Table {
  std::string name;  // the `table` label and the advisory lock's key
  // Deletes up to $2 rows older than $1 seconds (float8) and returns one row
  // whose first column is the number deleted.
  pg::Statement delete_batch;
  absl::Duration keep;
};

// --retention-interval (how often retention runs) and
// --metrics-sample-interval (how often the backlog gauges are sampled), which
// both sides' housekeeping shares.
void RegisterScheduleFlags(config::Flags& flags, absl::Duration* retention_interval,
                           absl::Duration* sample_interval);

class Retention {
 public:
  Retention(std::vector<Table> tables, int batch_size, prometheus::Registry& registry);

  // One run over every table, batch after batch until a batch comes back
  // short or `stopping()` turns true.
  absl::Status RunOnce(pg::Connection& conn, const std::function<bool()>& stopping);

 private:
  struct Tracked {
    Table table;
    prometheus::Counter* deleted;
    prometheus::Gauge* last_run;
  };
  // Returns the rows deleted, or -1 when another replica holds the lock.
  absl::StatusOr<int64_t> DeleteBatch(pg::Connection& conn, const Table& table);

  const int batch_size_;
  std::vector<Tracked> tables_;
};

}  // namespace ulticode::retention
