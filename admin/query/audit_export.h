// ExportAuditLogs (docs/exporting.md): the rows that match a filter over a
// log index range, in log order, rendered in an export format
// (common/export/row_text.h), as of the newest witnessed checkpoint, with
// each row's inclusion proof on request. The export reads the log in
// windows of index positions, so one statement stays short however rarely
// the filter matches; a chunk holds at most a window's rows and about a
// MiB of them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/pg/pool.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::admin::query {

struct ExportOptions {
  // Index positions one statement reads at most.
  uint64_t window = 10000;
  // Rows one statement returns at most.
  int window_rows = 256;
  // A chunk ends once its rows reach this many bytes (one row always fits).
  size_t chunk_bytes = 1 << 20;
};

// At most `max` exports at once (each holds a sync RPC thread while it
// streams). Thread-safe.
class ExportSlots {
  struct Release {
    void operator()(ExportSlots* slots) const { slots->running_.fetch_sub(1); }
  };

 public:
  // Held while one export runs; frees its place when destroyed.
  using Slot = std::unique_ptr<ExportSlots, Release>;
  explicit ExportSlots(int max) : max_(max) {}
  // RESOURCE_EXHAUSTED, with a RetryInfo, when `max` exports run.
  absl::StatusOr<Slot> Enter();

 private:
  const int max_;
  std::atomic<int> running_{0};
};

// Validates `req` in full first (INVALID_ARGUMENT naming the field), then
// sends the header and the chunks through `send`, which returns false once
// the client is gone (the export then stops: CANCELLED). FAILED_PRECONDITION
// before the log's first checkpoint; DATA_LOSS naming the event when a row
// is not what the log proves.
absl::Status Export(pg::Pool& pool, const v1::ExportAuditLogsRequest& req,
                    const ExportOptions& options,
                    const std::function<bool(const v1::ExportAuditLogsResponse&)>& send);

}  // namespace ulticode::admin::query
