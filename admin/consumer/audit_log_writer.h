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
  const std::string* envelope;   // the owner's exact bytes
  const std::string* signature;  // the owner's Ed25519 signature of them
  const std::string* key_id;
};

// Inserts one audit_logs row per input (ON CONFLICT DO NOTHING). Every value
// travels as a text-array element, so no string can break the statement; an
// event that passed audit::Validate always stores (the property the
// generated-input test proves). Returns how many rows were new.
absl::StatusOr<int64_t> InsertAuditLogs(pg::Transaction& tx,
                                        const std::vector<AuditLogInput>& logs);

}  // namespace ulticode::admin::consumer
