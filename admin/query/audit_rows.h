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

namespace ulticode::admin::query {

// The validated filters of one query. Empty strings and nullopt mean "no
// filter". `owner` is the owner's name ("auth" / "app").
struct AuditFilters {
  std::string owner;
  std::string actor;
  std::string action;
  std::string entity_type;
  std::string entity_id;
  std::optional<absl::Time> from;  // inclusive
  std::optional<absl::Time> to;    // exclusive
};

// The columns every audit log read returns, in AuditLogFromRow's order, from
// audit_logs LEFT JOIN log_leaves (the row's log index). The envelope stays
// out: it is for signature checks, not for the query API.
#define ULTI_AUDIT_LOG_COLUMNS                                                          \
  "event_id::text, owner, event_type, actor, subject, action, entity_type, entity_id, " \
  "old_value::text, new_value::text, client_ip, user_agent, request_id, trace_id, "     \
  "occurred_at, ingested_at, log_index"

// The filter fields of a request (QueryAuditLogsRequest and
// WatchAuditLogsRequest share them), validated: INVALID_ARGUMENT names the
// field and the rule.
absl::StatusOr<AuditFilters> ParseFilters(int owner, const std::string& actor,
                                          const std::string& action, const std::string& entity_type,
                                          const std::string& entity_id,
                                          const google::protobuf::Timestamp* from,
                                          const google::protobuf::Timestamp* to);

template <typename Request>
absl::StatusOr<AuditFilters> FiltersOf(const Request& req) {
  return ParseFilters(req.owner(), req.actor(), req.action(), req.entity_type(), req.entity_id(),
                      req.has_from() ? &req.from() : nullptr, req.has_to() ? &req.to() : nullptr);
}

// The SQL conditions of `filters` on audit_logs' columns (unqualified),
// each value a parameter numbered by `param`.
std::vector<std::string> FilterConditions(const AuditFilters& filters,
                                          const std::function<std::string(pg::Param)>& param);

// Whether `log` passes `filters`: the same rows as FilterConditions selects.
bool Matches(const AuditFilters& filters, const v1::AuditLog& log);

// A column's time as sent to clients (microseconds, as stored).
google::protobuf::Timestamp ToProto(absl::Time t);

// Row `row` of a result whose first columns are ULTI_AUDIT_LOG_COLUMNS.
absl::StatusOr<v1::AuditLog> AuditLogFromRow(const pg::Result& r, int row);

}  // namespace ulticode::admin::query
