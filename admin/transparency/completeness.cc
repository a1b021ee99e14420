#include "admin/transparency/completeness.h"

#include "common/base/status_macros.h"

namespace ulticode::admin::transparency {
namespace {

// $1: the bound in seconds. Rows without a leaf inside the newest
// checkpoint (a leaf row alone can be appended by the runtime role; one
// that no checkpoint covers proves nothing); of those past the bound, the
// ones no longer queued go back to the queue's tail.
constexpr pg::Statement kCheck{
    "log.completeness",
    "WITH unlogged AS ("
    "  SELECT a.event_id, a.ingested_at FROM audit_logs a"
    "  WHERE NOT EXISTS (SELECT 1 FROM log_leaves l WHERE l.event_id = a.event_id"
    "    AND l.log_index < (SELECT coalesce(max(size), 0) FROM log_checkpoints))),"
    " overdue AS ("
    "  SELECT event_id, ingested_at FROM unlogged"
    "  WHERE ingested_at < now() - $1::float8 * interval '1 second'"
    "     OR ingested_at > now() + interval '1 minute'),"
    " requeued AS ("
    "  INSERT INTO log_queue (event_id)"
    "  SELECT o.event_id FROM overdue o"
    "  WHERE NOT EXISTS (SELECT 1 FROM log_queue q WHERE q.event_id = o.event_id)"
    "  ORDER BY o.ingested_at, o.event_id"
    "  ON CONFLICT (event_id) DO NOTHING RETURNING 1)"
    " SELECT (SELECT count(*) FROM overdue),"
    "  coalesce((SELECT extract(epoch FROM now() - min(ingested_at)) FROM overdue), 0)::float8,"
    "  (SELECT count(*) FROM requeued)",
    absl::Seconds(60)};

}  // namespace

Completeness::Completeness(absl::Duration unlogged_after, prometheus::Registry& registry)
    : unlogged_after_(unlogged_after),
      unlogged_(prometheus::BuildGauge()
                    .Name("ulticode_admin_audit_rows_unlogged")
                    .Help("Audit rows committed longer ago than --log-unlogged-after that have "
                          "no log leaf yet")
                    .Register(registry)
                    .Add({})),
      oldest_(prometheus::BuildGauge()
                  .Name("ulticode_admin_audit_rows_unlogged_oldest_seconds")
                  .Help("How long the oldest of those rows has waited (0: none)")
                  .Register(registry)
                  .Add({})),
      requeued_(prometheus::BuildCounter()
                    .Name("ulticode_admin_audit_rows_requeued_total")
                    .Help("Audit rows without a leaf that had left the log's queue, queued again "
                          "(only a role above Admin's runtime can remove a queue entry)")
                    .Register(registry)
                    .Add({})) {}

absl::Status Completeness::Check(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kCheck, {pg::Seconds(unlogged_after_)}));
  unlogged_.Set(static_cast<double>(r.GetInt64(0, 0)));
  oldest_.Set(r.GetDouble(0, 1));
  requeued_.Increment(static_cast<double>(r.GetInt64(0, 2)));
  return absl::OkStatus();
}

}  // namespace ulticode::admin::transparency
