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

// The values kept for `event_ids`, by event id, in path order.
using ValuesByEvent = absl::flat_hash_map<std::string, std::vector<audit::PersonalValue>>;
absl::StatusOr<ValuesByEvent> ValuesOf(pg::Connection& conn,
                                       const std::vector<std::string>& event_ids);

// For each of `subjects` erased at least once: the latest time its
// erasures reach (erased_through).
absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> ErasedThrough(
    pg::Connection& conn, const std::vector<std::string>& subjects);

// Erases `subject`'s values of events up to `through` and records who asked
// (erase_personal_data). Returns how many values it erased.
absl::StatusOr<int64_t> Erase(pg::Transaction& tx, const std::string& subject, absl::Time through,
                              const std::string& requested_by);

// A served audit log and the event it was read from.
struct ServedLog {
  const audit::AuditEvent* event;
  admin::v1::AuditLog* log;
};

// Fills each log's personal_values from this store: a value held is put in
// its place in the log too (STATE_PRESENT), one whose subject was erased
// through the event's time is STATE_ERASED, any other STATE_NOT_HELD.
// DATA_LOSS, naming the event and path, when a held value does not open
// its commitment: it was changed here, and is never served.
absl::Status AttachPersonalValues(pg::Connection& conn, const std::vector<ServedLog>& logs);
// The same for rows as every audit read serves them.
absl::Status AttachPersonalValues(pg::Connection& conn, std::vector<query::AuditRow>& rows);

}  // namespace ulticode::admin::personal
