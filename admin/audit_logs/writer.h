// Writes audit_logs rows, one per event id, inside the caller's transaction:
// the bridge's (the same one that inserts the inbox rows PROCESSED, the
// common path) or the lease consumer's (the one that marks leased rows
// PROCESSED: retries and failures). A row that already exists is left alone
// (ON CONFLICT DO NOTHING): the event was written before, by this or a
// fenced-off worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::admin::audit_logs {

struct AuditLogInput {
  const audit::AuditEvent* event;
  const std::string* envelope;  // the owner's exact bytes
  const std::string* seal;      // their seal (common/seal/seal.h)
  const std::string* key_id;
};

// Inserts one audit_logs row per input (ON CONFLICT DO NOTHING). Every value
// travels as a text-array element, so no string can break the statement; an
// event that passed audit::Validate always stores (the property the
// generated-input test proves). Returns how many rows were new.
absl::StatusOr<int64_t> InsertAuditLogs(pg::Transaction& tx,
                                        const std::vector<AuditLogInput>& logs);

// The read model's figures, the same series whichever path wrote the rows:
// `ulticode_audit_logs_written_total` and `ulticode_audit_commit_lag_seconds`
// (owner's commit -> audit row committed, per owner).
class WriterMetrics {
 public:
  explicit WriterMetrics(prometheus::Registry& registry);
  // After the transaction committed: `written` new rows; every event's lag.
  void Committed(const std::vector<AuditLogInput>& logs, int64_t written, absl::Time now);

 private:
  prometheus::Counter* written_;
  prometheus::Histogram* lag_[3] = {nullptr, nullptr, nullptr};  // by audit::Owner
};

}  // namespace ulticode::admin::audit_logs
