// The inbox consumer's handler: writes audit_logs rows, one per event id,
// inside the caller's transaction (the same one that marks the inbox rows
// PROCESSED). A row that already exists is left alone (ON CONFLICT DO
// NOTHING): the event was written before, by this or a fenced-off worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/audit/event.h"
#include "common/pg/connection.h"

namespace ulticode::admin::consumer {

struct AuditLogInput {
  const audit::AuditEvent* event;
  const std::string* envelope;  // the owner's exact bytes
};

// Returns how many rows were new.
absl::StatusOr<int64_t> InsertAuditLogs(pg::Transaction& tx,
                                        const std::vector<AuditLogInput>& logs);

}  // namespace ulticode::admin::consumer
