// Admin's store of personal values (admin/migrations/0001_admin.sql,
// docs/personal-data.md): the values schema_version 2 envelopes commit to,
// kept apart from audit_logs, keyed by data subject; and their erasure.
//
// Functions are stateless; the connection decides the thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "admin/query/audit_rows.h"
#include "common/audit/personal.h"
#include "common/pg/connection.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::admin::personal {

// The opened values of one event (audit::OpenCommitments): each opens a
// commitment of `event`.
struct EventValues {
  const audit::AuditEvent* event;
  const std::vector<audit::PersonalValue>* values;
};

// Keeps the values in `tx` (a value already kept stays as it is); a value
// whose subject was erased through its event's time or later is not kept.
// Returns how many were new.
absl::StatusOr<int64_t> StoreValues(pg::Transaction& tx, const std::vector<EventValues>& events);

// A kept value and the commitment it was kept for (its row's, which the
// database checked the value and salt open).
struct KeptValue {
  audit::PersonalValue value;
  std::string commitment;
};
// The values kept for `event_ids`, by event id, in path order.
using ValuesByEvent = absl::flat_hash_map<std::string, std::vector<KeptValue>>;
absl::StatusOr<ValuesByEvent> ValuesOf(pg::Connection& conn,
                                       const std::vector<std::string>& event_ids);

// For each of `subjects` erased at least once by an erasure in the log (its
// admin.personal_data.erased record): the latest time they reach.
absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> ErasedThrough(
    pg::Connection& conn, const std::vector<std::string>& subjects);

// Erases `subject`'s values of events up to `through` and records who asked
// and the erasure's own audit record `event_id`, which `tx` must write too
// (erase_personal_data; the commit fails otherwise). Returns how many
// values it erased.
absl::StatusOr<int64_t> Erase(pg::Transaction& tx, const std::string& subject, absl::Time through,
                              const std::string& requested_by, const std::string& event_id);

// A served audit log and the event it was read from.
struct ServedLog {
  const audit::AuditEvent* event;
  admin::v1::AuditLog* log;
};

// Fills each log's personal_values from this store: a value held is put in
// its place in the log too (STATE_PRESENT), one whose subject was erased
// through the event's time by a logged erasure is STATE_ERASED (a value
// still held then is not served), any other STATE_NOT_HELD. Only a row
// kept for the envelope's own commitment is read.
// DATA_LOSS, naming the event and path, when a held value does not open
// its commitment: it was changed here, and is never served.
absl::Status AttachPersonalValues(pg::Connection& conn, const std::vector<ServedLog>& logs);
// The same for rows as every audit read serves them.
absl::Status AttachPersonalValues(pg::Connection& conn, std::vector<query::AuditRow>& rows);

}  // namespace ulticode::admin::personal
