// What every read of audit_logs shares (QueryAuditLogs, GetAuditLog,
// WatchAuditLogs): the filters a request may carry, validated, and their SQL
// conditions; the columns a read returns and the AuditLog built from them.
// Pure functions, no I/O; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/pg/params.h"
#include "common/pg/result.h"
#include "google/protobuf/timestamp.pb.h"
#include "ulticode/admin/v1/admin.pb.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::admin::query {

// The validated filters of one query. Empty strings and nullopt mean "no
// filter". `owner` is the owner's name ("auth" / "app").
struct AuditFilters {
  std::string owner;
  std::string actor;
  std::string action;
  std::string entity_type;
  std::string entity_id;
  std::optional<absl::Time> start_time;  // inclusive
  std::optional<absl::Time> end_time;    // exclusive
};

// The columns every audit log read returns, in AuditRowFromResult's order,
// from audit_logs LEFT JOIN log_leaves (the row's log index): the indexed
// columns (what filters use), the sealed envelope with its seal and key
// id (what is served), and the stored hash of the row's leaf (what binds the
// row to the log's checkpoints).
#define ULTI_AUDIT_LOG_COLUMNS                                                          \
  "event_id::text, owner, event_type, actor, subject, action, entity_type, entity_id, " \
  "old_value::text, new_value::text, client_ip, user_agent, request_id, trace_id, "     \
  "occurred_at, ingested_at, log_index, envelope, coalesce(key_id, ''), "               \
  "coalesce(seal, ''::bytea), "                                                         \
  "(SELECT n.hash FROM log_nodes n WHERE n.level = 0 AND n.idx = log_index)"
inline constexpr int kAuditLogColumns = 21;
inline constexpr int kOccurredAtColumn = 14;
inline constexpr int kLogIndexColumn = 16;

// The request's `filter` (QueryAuditLogsRequest and WatchAuditLogsRequest
// share AuditLogFilter), validated: INVALID_ARGUMENT names the field
// ("filter.<name>") and the rule.
absl::StatusOr<AuditFilters> FiltersOf(const v1::AuditLogFilter& filter);

// The SQL conditions of `filters` on audit_logs' columns (unqualified),
// each value a parameter numbered by `param`.
std::vector<std::string> FilterConditions(const AuditFilters& filters,
                                          const std::function<std::string(pg::Param)>& param);

// Whether `log` passes `filters`: the same rows as FilterConditions selects.
bool Matches(const AuditFilters& filters, const v1::AuditLog& log);

// A column's time as sent to clients (microseconds, as stored).
google::protobuf::Timestamp ToProto(absl::Time t);

// One row as served: every field about the event is the sealed envelope's
// (ingested_at, Admin's own time, and the log index excepted), and `leaf` is
// the row's log entry (tlog::EncodeLeaf), as the log's leaf holds it.
struct AuditRow {
  v1::AuditLog log;
  std::string leaf;
  audit::v1::AuditEvent event;  // the envelope, parsed
};

// The AuditLog an event's envelope reads as: every field but ingested_at,
// log_index, log_status and proof. A client holding the leaf checks a
// served row with it.
v1::AuditLog AuditLogOfEvent(const audit::v1::AuditEvent& event);

// Row `row` of a result whose first columns are ULTI_AUDIT_LOG_COLUMNS.
// DATA_LOSS, naming the event, when the row is not what the log proves: its
// envelope does not parse or is another event's, an indexed column disagrees
// with the envelope, or (once sequenced) the row's leaf is not the stored
// leaf hash at its index. Such a row is never served.
absl::StatusOr<AuditRow> AuditRowFromResult(const pg::Result& r, int row);

}  // namespace ulticode::admin::query
