// Completeness of the log (docs/transparency-log.md, "Completeness"): every
// committed audit row becomes a leaf. The runtime role cannot take a row off
// the queue before it is a leaf (log_queue_done, admin/migrations/0001_admin.sql); this check
// finds the rows that still have no leaf inside the newest checkpoint after
// `unlogged_after` (a stalled
// sequencer, or a queue entry removed by someone holding more than the
// runtime role), puts those no longer queued back in the queue, and shows
// them:
//   ulticode_admin_audit_rows_unlogged                 rows past the bound
//   ulticode_admin_audit_rows_unlogged_oldest_seconds  the oldest one's wait
//   ulticode_admin_audit_rows_requeued_total           rows queued again
// A row whose ingested_at lies in the future counts as past the bound.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::admin::transparency {

class Completeness {
 public:
  Completeness(absl::Duration unlogged_after, prometheus::Registry& registry);
  // One pass: one anti-join of audit_logs and log_leaves on their event_id
  // indexes, and the re-queueing, in one statement.
  absl::Status Check(pg::Connection& conn);

 private:
  const absl::Duration unlogged_after_;
  prometheus::Gauge& unlogged_;
  prometheus::Gauge& oldest_;
  prometheus::Counter& requeued_;
};

}  // namespace ulticode::admin::transparency
