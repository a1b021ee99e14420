#include "common/retention/retention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"

namespace ulticode::retention {

namespace {

constexpr char kComponent[] = "retention";

constexpr pg::Statement kTryLock{"retention.try_lock",
                                 "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))"};

}  // namespace

void RegisterScheduleFlags(config::Flags& flags, absl::Duration* retention_interval,
                           absl::Duration* sample_interval) {
  flags.Duration("retention-interval", retention_interval, "how often retention runs",
                 absl::Seconds(1), absl::Hours(24));
  flags.Duration("metrics-sample-interval", sample_interval,
                 "how often the backlog gauges are sampled", absl::Seconds(1), absl::Hours(1));
}

Retention::Retention(std::vector<Table> tables, int batch_size, prometheus::Registry& registry)
    : batch_size_(std::clamp(batch_size, 1, kMaxBatchSize)) {
  auto& deleted = prometheus::BuildCounter()
                      .Name("ulticode_retention_deleted_rows_total")
                      .Help("Rows deleted by retention, by table")
                      .Register(registry);
  auto& last_run = prometheus::BuildGauge()
                       .Name("ulticode_retention_last_run_timestamp_seconds")
                       .Help(
                           "When retention last finished a complete run over the table "
                           "(Unix seconds; 0: never)")
                       .Register(registry);
  for (Table& t : tables) {
    const prometheus::Labels labels{{"table", t.name}};
    tables_.push_back(Tracked{std::move(t), &deleted.Add(labels), &last_run.Add(labels)});
  }
}

absl::StatusOr<int64_t> Retention::DeleteBatch(pg::Connection& conn, const Table& table) {
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(
      pg::Result locked,
      tx.Execute(kTryLock, {pg::Text(absl::StrCat("ulticode.retention.", table.name))}));
  if (!locked.GetBool(0, 0)) return -1;  // another replica is on it
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(table.delete_batch, {pg::Seconds(table.keep), pg::Int(batch_size_)}));
  RETURN_IF_ERROR(tx.Commit());
  return r.rows() == 1 ? r.GetInt64(0, 0) : 0;
}

absl::Status Retention::RunOnce(pg::Connection& conn, const std::function<bool()>& stopping) {
  for (Tracked& t : tables_) {
    int64_t total = 0;
    bool complete = false;
    while (!stopping()) {
      ASSIGN_OR_RETURN(int64_t n, DeleteBatch(conn, t.table));
      if (n < 0) break;
      total += n;
      t.deleted->Increment(static_cast<double>(n));
      if (n < batch_size_) {
        complete = true;
        break;
      }
    }
    if (complete) t.last_run->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    if (total > 0) {
      log::Info(kComponent, "deleted rows past their retention",
                {{"table", t.table.name},
                 {"rows", absl::StrCat(total)},
                 {"keep", absl::FormatDuration(t.table.keep)}});
    }
  }
  return absl::OkStatus();
}

}  // namespace ulticode::retention
