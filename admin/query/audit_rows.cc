#include "admin/query/audit_rows.h"

#include "absl/strings/str_cat.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
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

// A jsonb column (as text) as the Struct it was written from; nullopt for
// NULL and a JSON null.
absl::StatusOr<std::optional<google::protobuf::Struct>> ColumnStruct(const pg::Result& r, int row,
                                                                     int col) {
  if (r.IsNull(row, col) || r.Get(row, col) == "null") return std::nullopt;
  google::protobuf::Struct value;
  if (!google::protobuf::util::JsonStringToMessage(r.GetString(row, col), &value).ok()) {
    return absl::DataLossError("is not a JSON object");
  }
  return value;
}

absl::Status Disagrees(const std::string& event_id, const char* column) {
  return absl::DataLossError(absl::StrCat("audit log ", event_id, ": column ", column,
                                          " disagrees with the owner's sealed envelope"));
}

// The indexed columns of the row against the envelope they were written
// from: any difference is a row changed after it was written.
absl::Status CheckColumns(const pg::Result& r, int row, const audit::v1::AuditEvent& e) {
  const std::string& id = e.event_id();
  const audit::v1::AuditRecord& rec = e.record();
  // Column (its place in ULTI_AUDIT_LOG_COLUMNS) and the envelope's value.
  struct Text {
    const char* name;
    int column;
    const std::string& value;
  };
  const std::string owner = audit::OwnerName(e.owner());
  const Text texts[] = {{"owner", 1, owner},
                        {"event_type", 2, e.event_type()},
                        {"actor", 3, rec.actor()},
                        {"subject", 4, rec.subject()},
                        {"action", 5, rec.action()},
                        {"entity_type", 6, rec.entity_type()},
                        {"entity_id", 7, rec.entity_id()},
                        {"client_ip", 10, rec.client_ip()},
                        {"user_agent", 11, rec.user_agent()},
                        {"request_id", 12, rec.request_id()},
                        {"trace_id", 13, rec.trace_id()}};
  for (const Text& t : texts) {
    if (r.Get(row, t.column) != t.value) return Disagrees(id, t.name);
  }
  const std::pair<const char*, const google::protobuf::Struct*> values[] = {
      {"old_value", rec.has_old_value() ? &rec.old_value() : nullptr},
      {"new_value", rec.has_new_value() ? &rec.new_value() : nullptr}};
  for (int i = 0; i < 2; ++i) {
    auto column = ColumnStruct(r, row, 8 + i);
    if (!column.ok()) return Disagrees(id, values[i].first);
    const google::protobuf::Struct* signed_value = values[i].second;
    if (column->has_value() != (signed_value != nullptr) ||
        (signed_value != nullptr &&
         !google::protobuf::util::MessageDifferencer::Equals(**column, *signed_value))) {
      return Disagrees(id, values[i].first);
    }
  }
  // The column keeps microseconds; the envelope may carry nanoseconds.
  const absl::Time signed_at =
      absl::FromUnixSeconds(e.occurred_at().seconds()) + absl::Nanoseconds(e.occurred_at().nanos());
  if (absl::AbsDuration(r.GetTime(row, kOccurredAtColumn) - signed_at) >= absl::Microseconds(1)) {
    return Disagrees(id, "occurred_at");
  }
  return absl::OkStatus();
}

}  // namespace

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

v1::AuditLog AuditLogOfEvent(const audit::v1::AuditEvent& e) {
  const audit::v1::AuditRecord& rec = e.record();
  v1::AuditLog log;
  log.set_event_id(e.event_id());
  log.set_owner(e.owner());
  log.set_event_type(e.event_type());
  log.set_actor(rec.actor());
  log.set_subject(rec.subject());
  log.set_action(rec.action());
  log.set_entity_type(rec.entity_type());
  log.set_entity_id(rec.entity_id());
  if (rec.has_old_value()) *log.mutable_old_value() = rec.old_value();
  if (rec.has_new_value()) *log.mutable_new_value() = rec.new_value();
  log.set_client_ip(rec.client_ip());
  log.set_user_agent(rec.user_agent());
  log.set_request_id(rec.request_id());
  log.set_trace_id(rec.trace_id());
  *log.mutable_occurred_at() = e.occurred_at();
  return log;
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
// column's precision): ">= start_time" and "< end_time" then select exactly the rows the
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

absl::StatusOr<AuditRow> AuditRowFromResult(const pg::Result& r, int row) {
  const std::string id = r.GetString(row, 0);
  audit::v1::AuditEvent event;
  const std::string envelope = r.GetBytes(row, 17);
  if (!event.ParseFromString(envelope) || event.event_id() != id ||
      event.record().audit_id() != id) {
    return absl::DataLossError(
        absl::StrCat("audit log ", id, ": its envelope is not the sealed event ", id));
  }
  RETURN_IF_ERROR(CheckColumns(r, row, event));
  AuditRow out;
  out.log = AuditLogOfEvent(event);
  *out.log.mutable_ingested_at() = ToProto(r.GetTime(row, 15));
  out.leaf = tlog::EncodeLeaf(
      {audit::OwnerName(event.owner()), id, r.GetString(row, 18), r.GetBytes(row, 19), envelope});
  out.event = std::move(event);
  if (r.IsNull(row, kLogIndexColumn)) {
    out.log.set_log_status(v1::AuditLog::LOG_STATUS_PENDING);
    return out;
  }
  const int64_t index = r.GetInt64(row, kLogIndexColumn);
  const tlog::Hash leaf_hash = tlog::LeafHash(out.leaf);
  if (r.IsNull(row, 20) ||
      r.GetBytes(row, 20) !=
          absl::string_view(reinterpret_cast<const char*>(leaf_hash.data()), leaf_hash.size())) {
    return absl::DataLossError(absl::StrCat("audit log ", id, ": the row is not the log's leaf ",
                                            index, " (its hash differs from the stored one)"));
  }
  out.log.set_log_index(static_cast<uint64_t>(index));
  out.log.set_log_status(v1::AuditLog::LOG_STATUS_LOGGED);
  return out;
}

absl::StatusOr<AuditFilters> FiltersOf(const v1::AuditLogFilter& filter) {
  AuditFilters f;
  if (filter.owner() != audit::v1::OWNER_UNSPECIFIED) {
    if (!audit::v1::Owner_IsValid(filter.owner())) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter.owner: unknown value ", static_cast<int>(filter.owner())));
    }
    f.owner = audit::OwnerName(filter.owner());
  }
  RETURN_IF_ERROR(ValidateFilterString("filter.actor", filter.actor()));
  RETURN_IF_ERROR(ValidateFilterString("filter.action", filter.action()));
  RETURN_IF_ERROR(ValidateFilterString("filter.entity_type", filter.entity_type()));
  RETURN_IF_ERROR(ValidateFilterString("filter.entity_id", filter.entity_id()));
  // Entity ids are only unique within their type (the index leads with it).
  if (!filter.entity_id().empty() && filter.entity_type().empty()) {
    return absl::InvalidArgumentError("filter.entity_id: requires filter.entity_type");
  }
  f.actor = filter.actor();
  f.action = filter.action();
  f.entity_type = filter.entity_type();
  f.entity_id = filter.entity_id();
  if (filter.has_start_time()) {
    ASSIGN_OR_RETURN(f.start_time, BoundFromProto("filter.start_time", filter.start_time()));
  }
  if (filter.has_end_time()) {
    ASSIGN_OR_RETURN(f.end_time, BoundFromProto("filter.end_time", filter.end_time()));
  }
  // Compared as sent: a range inside one microsecond is valid (and empty).
  const auto& from = filter.start_time();
  const auto& to = filter.end_time();
  if (filter.has_start_time() && filter.has_end_time() &&
      (from.seconds() > to.seconds() ||
       (from.seconds() == to.seconds() && from.nanos() >= to.nanos()))) {
    return absl::InvalidArgumentError("filter.start_time: must be before filter.end_time");
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
  if (f.start_time) {
    where.push_back(
        absl::StrCat("occurred_at >= ", param(pg::Time(*f.start_time)), "::timestamptz"));
  }
  if (f.end_time) {
    where.push_back(absl::StrCat("occurred_at < ", param(pg::Time(*f.end_time)), "::timestamptz"));
  }
  return where;
}

bool Matches(const AuditFilters& f, const v1::AuditLog& log) {
  if (!f.owner.empty() && audit::OwnerName(log.owner()) != f.owner) return false;
  if (!f.actor.empty() && log.actor() != f.actor) return false;
  if (!f.action.empty() && log.action() != f.action) return false;
  if (!f.entity_type.empty() && log.entity_type() != f.entity_type) return false;
  if (!f.entity_id.empty() && log.entity_id() != f.entity_id) return false;
  if (f.start_time || f.end_time) {
    const absl::Time at =
        absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(log.occurred_at()));
    if (f.start_time && at < *f.start_time) return false;
    if (f.end_time && at >= *f.end_time) return false;
  }
  return true;
}

}  // namespace ulticode::admin::query
