#include "admin/query/audit_rows.h"

#include "absl/strings/str_cat.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::admin::query {
namespace {

using google::protobuf::util::TimeUtil;

// Longest actor/action/entity filter accepted: far beyond any real value,
// short enough that a request cannot ship megabytes into a query.
constexpr size_t kMaxFilterBytes = 256;

// The range of google.protobuf.Timestamp (0001-01-01 .. 9999-12-31).
constexpr int64_t kMinTimestampSeconds = -62135596800LL;
constexpr int64_t kMaxTimestampSeconds = 253402300799LL;

// Parses a jsonb column (as text) back into the Struct it was written from.
// NULL (and a JSON null) leave the field absent: `mutable` is only called,
// and so the field only set, when there is a value.
template <typename MutableFn>
absl::Status ParseValue(const pg::Result& r, int row, int col, const std::string& event_id,
                        const char* column, MutableFn mutable_field) {
  if (r.IsNull(row, col) || r.Get(row, col) == "null") return absl::OkStatus();
  const auto status =
      google::protobuf::util::JsonStringToMessage(r.GetString(row, col), mutable_field());
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("audit log ", event_id, ": ", column,
                                            " is not a JSON object: ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::Status ValidateFilterString(const char* field, const std::string& value) {
  if (value.size() > kMaxFilterBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": at most ", kMaxFilterBytes, " bytes"));
  }
  // PostgreSQL text cannot hold NUL; refuse it here rather than as a
  // database error.
  if (value.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must not contain NUL"));
  }
  return absl::OkStatus();
}

// A valid Timestamp as absl::Time, rounded UP to whole microseconds (the
// column's precision): ">= from" and "< to" then select exactly the rows the
// nanosecond bound would.
absl::StatusOr<absl::Time> BoundFromProto(const char* field,
                                          const google::protobuf::Timestamp& ts) {
  if (ts.seconds() < kMinTimestampSeconds || ts.seconds() > kMaxTimestampSeconds ||
      ts.nanos() < 0 || ts.nanos() > 999999999) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not a valid timestamp"));
  }
  const absl::Time t = absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  absl::Time micros = absl::FromUnixMicros(absl::ToUnixMicros(t));
  if (micros < t) micros += absl::Microseconds(1);
  return micros;
}

}  // namespace

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

absl::StatusOr<v1::AuditLog> AuditLogFromRow(const pg::Result& r, int row) {
  v1::AuditLog log;
  log.set_event_id(r.GetString(row, 0));
  log.set_owner(audit::OwnerFromName(r.Get(row, 1)));
  log.set_event_type(r.GetString(row, 2));
  log.set_actor(r.GetString(row, 3));
  log.set_subject(r.GetString(row, 4));
  log.set_action(r.GetString(row, 5));
  log.set_entity_type(r.GetString(row, 6));
  log.set_entity_id(r.GetString(row, 7));
  RETURN_IF_ERROR(
      ParseValue(r, row, 8, log.event_id(), "old_value", [&] { return log.mutable_old_value(); }));
  RETURN_IF_ERROR(
      ParseValue(r, row, 9, log.event_id(), "new_value", [&] { return log.mutable_new_value(); }));
  log.set_client_ip(r.GetString(row, 10));
  log.set_user_agent(r.GetString(row, 11));
  log.set_request_id(r.GetString(row, 12));
  log.set_trace_id(r.GetString(row, 13));
  *log.mutable_occurred_at() = ToProto(r.GetTime(row, 14));
  *log.mutable_ingested_at() = ToProto(r.GetTime(row, 15));
  if (!r.IsNull(row, 16)) log.set_log_index(static_cast<uint64_t>(r.GetInt64(row, 16)));
  return log;
}

absl::StatusOr<AuditFilters> ParseFilters(int owner, const std::string& actor,
                                          const std::string& action, const std::string& entity_type,
                                          const std::string& entity_id,
                                          const google::protobuf::Timestamp* from,
                                          const google::protobuf::Timestamp* to) {
  AuditFilters f;
  if (owner != audit::v1::OWNER_UNSPECIFIED) {
    if (!audit::v1::Owner_IsValid(owner)) {
      return absl::InvalidArgumentError(
          absl::StrCat("owner: unknown value ", static_cast<int>(owner)));
    }
    f.owner = audit::OwnerName(static_cast<audit::v1::Owner>(owner));
  }
  RETURN_IF_ERROR(ValidateFilterString("actor", actor));
  RETURN_IF_ERROR(ValidateFilterString("action", action));
  RETURN_IF_ERROR(ValidateFilterString("entity_type", entity_type));
  RETURN_IF_ERROR(ValidateFilterString("entity_id", entity_id));
  // Entity ids are only unique within their type (the index leads with it).
  if (!entity_id.empty() && entity_type.empty()) {
    return absl::InvalidArgumentError("entity_id: requires entity_type");
  }
  f.actor = actor;
  f.action = action;
  f.entity_type = entity_type;
  f.entity_id = entity_id;
  if (from) {
    ASSIGN_OR_RETURN(f.from, BoundFromProto("from", *from));
  }
  if (to) {
    ASSIGN_OR_RETURN(f.to, BoundFromProto("to", *to));
  }
  // Compared as sent: a range inside one microsecond is valid (and empty).
  if (from && to &&
      (from->seconds() > to->seconds() ||
       (from->seconds() == to->seconds() && from->nanos() >= to->nanos()))) {
    return absl::InvalidArgumentError("from: must be before to");
  }
  return f;
}

std::vector<std::string> FilterConditions(const AuditFilters& filters,
                                          const std::function<std::string(pg::Param)>& param) {
  const AuditFilters& f = filters;
  std::vector<std::string> where;
  if (!f.owner.empty()) where.push_back(absl::StrCat("owner = ", param(pg::Text(f.owner))));
  if (!f.actor.empty()) where.push_back(absl::StrCat("actor = ", param(pg::Text(f.actor))));
  if (!f.action.empty()) where.push_back(absl::StrCat("action = ", param(pg::Text(f.action))));
  if (!f.entity_type.empty()) {
    where.push_back(absl::StrCat("entity_type = ", param(pg::Text(f.entity_type))));
  }
  if (!f.entity_id.empty()) {
    where.push_back(absl::StrCat("entity_id = ", param(pg::Text(f.entity_id))));
  }
  if (f.from) {
    where.push_back(absl::StrCat("occurred_at >= ", param(pg::Time(*f.from)), "::timestamptz"));
  }
  if (f.to) {
    where.push_back(absl::StrCat("occurred_at < ", param(pg::Time(*f.to)), "::timestamptz"));
  }
  return where;
}

bool Matches(const AuditFilters& f, const v1::AuditLog& log) {
  if (!f.owner.empty() && audit::OwnerName(log.owner()) != f.owner) return false;
  if (!f.actor.empty() && log.actor() != f.actor) return false;
  if (!f.action.empty() && log.action() != f.action) return false;
  if (!f.entity_type.empty() && log.entity_type() != f.entity_type) return false;
  if (!f.entity_id.empty() && log.entity_id() != f.entity_id) return false;
  if (f.from || f.to) {
    const absl::Time at =
        absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(log.occurred_at()));
    if (f.from && at < *f.from) return false;
    if (f.to && at >= *f.to) return false;
  }
  return true;
}

}  // namespace ulticode::admin::query
