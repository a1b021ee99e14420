#include "admin/query/audit_export.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin/personal/personal_store.h"
#include "admin/query/audit_rows.h"
#include "admin/transparency/log_reader.h"
#include "common/base/status_macros.h"
#include "common/export/row_text.h"
#include "common/server/error_details.h"

namespace ulticode::admin::query {
namespace {

constexpr absl::Duration kWindowTimeout = absl::Seconds(4);

struct ExportPlan {
  exports::Format format = exports::Format::kJsonl;
  AuditFilters filters;
  v1::ExportHeader header;
};

absl::StatusOr<ExportPlan> PlanOf(const v1::ExportAuditLogsRequest& req) {
  ExportPlan plan;
  ASSIGN_OR_RETURN(plan.format, exports::FromProto(req.format()));
  ASSIGN_OR_RETURN(plan.filters, FiltersOf(req.filter()));
  if (req.has_end_index() && req.end_index() < req.start_index()) {
    return absl::InvalidArgumentError(
        absl::StrCat("end_index: ", req.end_index(), " is below start_index ", req.start_index()));
  }
  v1::ExportHeader& h = plan.header;
  h.set_format(req.format());
  *h.mutable_filter() = req.filter();
  h.set_start_index(req.start_index());
  h.set_end_index(req.has_end_index() ? req.end_index() : UINT64_MAX);
  h.set_with_proofs(req.with_proofs());
  h.set_preamble(exports::Preamble(plan.format));
  return plan;
}

// The rows of leaves [from, to) that pass the filters, ascending, at most
// `limit`.
absl::StatusOr<pg::Result> ReadWindow(pg::Connection& conn, const AuditFilters& filters,
                                      uint64_t from, uint64_t to, int limit) {
  pg::Params params;
  auto param = [&params](pg::Param p) {
    params.push_back(std::move(p));
    return absl::StrCat("$", params.size());
  };
  std::vector<std::string> where = {
      absl::StrCat("log_index >= ", param(pg::Int(static_cast<int64_t>(from)))),
      absl::StrCat("log_index < ", param(pg::Int(static_cast<int64_t>(to))))};
  for (std::string& c : FilterConditions(filters, param)) where.push_back(std::move(c));
  const std::string sql = absl::StrCat(
      "SELECT " ULTI_AUDIT_LOG_COLUMNS " FROM log_leaves JOIN audit_logs USING (event_id) WHERE ",
      absl::StrJoin(where, " AND "), " ORDER BY log_index LIMIT ", param(pg::Int(limit)));
  return conn.Execute(pg::Statement{"admin.audit_logs.export", sql.c_str(), kWindowTimeout},
                      params);
}

// One window's rows, rendered (and proved), and where the next window
// starts.
struct Window {
  std::vector<v1::ExportedRow> rows;
  uint64_t read_through = 0;
};

absl::StatusOr<Window> NextWindow(pg::Pool& pool, const ExportPlan& plan, uint64_t from,
                                  const ExportOptions& options) {
  const uint64_t end = plan.header.end_index();
  const uint64_t to = from + std::min(options.window, end - from);
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool.Acquire());
  ASSIGN_OR_RETURN(pg::Result r, ReadWindow(*conn, plan.filters, from, to, options.window_rows));
  Window w;
  w.read_through = to;
  std::vector<uint64_t> indexes;
  std::vector<AuditRow> rows;
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(rows.emplace_back(), AuditRowFromResult(r, i));
  }
  RETURN_IF_ERROR(personal::AttachPersonalValues(*conn, rows));
  for (AuditRow& row : rows) {
    v1::ExportedRow& out = w.rows.emplace_back();
    out.set_log_index(row.log.log_index());
    ASSIGN_OR_RETURN(*out.mutable_text(), exports::RenderRow(plan.format, out.log_index(), row.leaf,
                                                             row.log.personal_values()));
    if (plan.header.with_proofs()) {
      out.set_leaf(std::move(row.leaf));
      *out.mutable_personal_values() = std::move(*row.log.mutable_personal_values());
    }
    indexes.push_back(out.log_index());
  }
  if (r.rows() == options.window_rows) w.read_through = indexes.back() + 1;
  if (plan.header.with_proofs() && !indexes.empty()) {
    ASSIGN_OR_RETURN(const auto proofs, transparency::InclusionProofs(
                                            *conn, indexes, plan.header.checkpoint().tree_size()));
    for (size_t i = 0; i < proofs.size(); ++i) {
      for (const tlog::Hash& h : proofs[i]) w.rows[i].add_hashes(tlog::ToBytes(h));
    }
  }
  return w;
}

// Sends `w` as chunks of about options.chunk_bytes; the last carries its
// read_through (the others the index after their last row).
bool SendWindow(Window& w, const ExportOptions& options,
                const std::function<bool(const v1::ExportAuditLogsResponse&)>& send) {
  v1::ExportAuditLogsResponse frame;
  v1::ExportChunk& chunk = *frame.mutable_chunk();
  size_t bytes = 0;
  for (size_t i = 0; i < w.rows.size(); ++i) {
    bytes += w.rows[i].ByteSizeLong();
    *chunk.add_rows() = std::move(w.rows[i]);
    if (bytes >= options.chunk_bytes && i + 1 < w.rows.size()) {
      chunk.set_read_through(chunk.rows(chunk.rows_size() - 1).log_index() + 1);
      if (!send(frame)) return false;
      chunk.clear_rows();
      bytes = 0;
    }
  }
  chunk.set_read_through(w.read_through);
  return send(frame);
}

}  // namespace

absl::StatusOr<ExportSlots::Slot> ExportSlots::Enter() {
  if (running_.fetch_add(1) >= max_) {
    running_.fetch_sub(1);
    return server::WithRetryDelay(absl::ResourceExhaustedError(absl::StrCat(
                                      max_, " exports are running (--export-max-concurrent)")),
                                  absl::Seconds(5));
  }
  return Slot(this);
}

absl::Status Export(pg::Pool& pool, const v1::ExportAuditLogsRequest& req,
                    const ExportOptions& options,
                    const std::function<bool(const v1::ExportAuditLogsResponse&)>& send) {
  ASSIGN_OR_RETURN(ExportPlan plan, PlanOf(req));
  {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool.Acquire());
    ASSIGN_OR_RETURN(std::optional<transparency::StoredCheckpoint> checkpoint,
                     transparency::LatestWitnessedCheckpoint(*conn));
    if (!checkpoint) {
      return absl::FailedPreconditionError("the log has no checkpoint yet: nothing to export");
    }
    *plan.header.mutable_checkpoint() = transparency::ToProto(*checkpoint);
  }
  v1::ExportHeader& h = plan.header;
  h.set_end_index(std::min(h.end_index(), h.checkpoint().tree_size()));
  h.set_start_index(std::min(h.start_index(), h.end_index()));
  v1::ExportAuditLogsResponse header;
  *header.mutable_header() = h;
  if (!send(header)) return absl::CancelledError("the client went away");
  for (uint64_t from = h.start_index(); from < h.end_index();) {
    ASSIGN_OR_RETURN(Window w, NextWindow(pool, plan, from, options));
    from = w.read_through;
    if (!SendWindow(w, options, send)) return absl::CancelledError("the client went away");
  }
  return absl::OkStatus();
}

}  // namespace ulticode::admin::query
