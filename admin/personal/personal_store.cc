#include "admin/personal/personal_store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "admin/query/audit_rows.h"
#include "common/base/status_macros.h"

namespace ulticode::admin::personal {
namespace {

constexpr pg::Statement kStore{
    "personal.store",
    "INSERT INTO personal_values (event_id, path, subject, value, salt, commitment, occurred_at)"
    " SELECT t.id, t.path, t.subject, t.value, decode(t.salt, 'hex'), decode(t.c, 'hex'),"
    "        t.at::timestamptz"
    " FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],"
    "             $7::text[]) AS t(id, path, subject, value, salt, c, at)"
    " WHERE NOT EXISTS (SELECT 1 FROM personal_erasures e"
    "                   WHERE e.subject = t.subject AND e.erased_through >= t.at::timestamptz)"
    " ON CONFLICT (event_id, path, commitment) DO NOTHING",
    absl::Seconds(30)};

constexpr pg::Statement kValuesOf{"personal.values_of",
                                  "SELECT event_id::text, path, value, salt, commitment"
                                  " FROM personal_values"
                                  " WHERE event_id = ANY($1::uuid[]) ORDER BY event_id, path",
                                  absl::Seconds(30)};

// Only erasures in the log: each with its admin.personal_data.erased record.
constexpr pg::Statement kErasedThrough{
    "personal.erased_through",
    "SELECT e.subject, max(e.erased_through) FROM personal_erasures e"
    " JOIN audit_logs a ON a.event_id = e.event_id"
    "  AND a.event_type = 'admin.personal_data.erased' AND a.entity_id = e.subject"
    " WHERE e.subject = ANY($1::text[]) GROUP BY e.subject"};

constexpr pg::Statement kErase{"personal.erase", "SELECT erase_personal_data($1, $2, $3, $4::uuid)",
                               absl::Seconds(30)};

std::string Rfc3339(const google::protobuf::Timestamp& ts) {
  return absl::FormatTime(absl::RFC3339_full,
                          absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos()),
                          absl::UTCTimeZone());
}

using LogValue = admin::v1::AuditLog::PersonalValue;

// The log's personal_values, and each opened value in its place.
void RestoreIntoLog(const audit::AuditEvent& e, const std::vector<audit::PersonalValue>& opened,
                    const absl::flat_hash_map<std::string, absl::Time>& erased,
                    admin::v1::AuditLog& log) {
  const auto& ts = e.occurred_at();
  const absl::Time at = absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
  log.clear_personal_values();
  for (const audit::PersonalCommitment& c : e.record().personal()) {
    LogValue* v = log.add_personal_values();
    v->set_path(c.path());
    v->set_subject(c.subject());
    v->set_commitment(c.commitment());
    auto held = std::find_if(opened.begin(), opened.end(),
                             [&](const audit::PersonalValue& p) { return p.path() == c.path(); });
    auto through = erased.find(c.subject());
    const bool is_erased = through != erased.end() && through->second >= at;
    if (held != opened.end() && !is_erased) {
      v->set_state(LogValue::STATE_PRESENT);
      v->set_value(held->value());
      v->set_salt(held->salt());
      continue;
    }
    v->set_state(is_erased ? LogValue::STATE_ERASED : LogValue::STATE_NOT_HELD);
  }
  // Every field as the event was built, with what the reader holds kept.
  audit::AuditEvent restored = e;
  audit::RestorePersonalValues(opened, *restored.mutable_record());
  admin::v1::AuditLog rebuilt = query::AuditLogOfEvent(restored);
  *rebuilt.mutable_ingested_at() = log.ingested_at();
  if (log.has_log_index()) rebuilt.set_log_index(log.log_index());
  rebuilt.set_log_status(log.log_status());
  if (log.has_proof()) *rebuilt.mutable_proof() = log.proof();
  *rebuilt.mutable_personal_values() = std::move(*log.mutable_personal_values());
  log = std::move(rebuilt);
}

}  // namespace

absl::StatusOr<int64_t> StoreValues(pg::Transaction& tx, const std::vector<EventValues>& events) {
  std::vector<std::string> ids, paths, subjects, values, salts, commitments, times;
  for (const EventValues& e : events) {
    for (const audit::PersonalValue& v : *e.values) {
      const audit::PersonalCommitment* c = audit::FindCommitment(*e.event, v.path());
      if (c == nullptr) continue;  // opened values always have one
      ids.push_back(e.event->event_id());
      paths.push_back(v.path());
      subjects.push_back(c->subject());
      values.push_back(v.value());
      salts.push_back(absl::BytesToHexString(v.salt()));
      commitments.push_back(absl::BytesToHexString(c->commitment()));
      times.push_back(Rfc3339(e.event->occurred_at()));
    }
  }
  if (ids.empty()) return 0;
  ASSIGN_OR_RETURN(
      pg::Result r,
      tx.Execute(kStore, {pg::TextArray(ids), pg::TextArray(paths), pg::TextArray(subjects),
                          pg::TextArray(values), pg::TextArray(salts), pg::TextArray(commitments),
                          pg::TextArray(times)}));
  return r.affected_rows();
}

absl::StatusOr<ValuesByEvent> ValuesOf(pg::Connection& conn,
                                       const std::vector<std::string>& event_ids) {
  ValuesByEvent out;
  if (event_ids.empty()) return out;
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kValuesOf, {pg::TextArray(event_ids)}));
  for (int i = 0; i < r.rows(); ++i) {
    audit::PersonalValue v;
    v.set_path(r.GetString(i, 1));
    v.set_value(r.GetString(i, 2));
    v.set_salt(r.GetBytes(i, 3));
    out[r.GetString(i, 0)].push_back({std::move(v), r.GetBytes(i, 4)});
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, absl::Time>> ErasedThrough(
    pg::Connection& conn, const std::vector<std::string>& subjects) {
  absl::flat_hash_map<std::string, absl::Time> out;
  if (subjects.empty()) return out;
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kErasedThrough, {pg::TextArray(subjects)}));
  for (int i = 0; i < r.rows(); ++i) {
    out[r.GetString(i, 0)] = r.GetTime(i, 1);
  }
  return out;
}

absl::StatusOr<int64_t> Erase(pg::Transaction& tx, const std::string& subject, absl::Time through,
                              const std::string& requested_by, const std::string& event_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kErase, {pg::Text(subject), pg::Time(through),
                                                     pg::Text(requested_by), pg::Text(event_id)}));
  return r.GetInt64(0, 0);
}

absl::Status AttachPersonalValues(pg::Connection& conn, const std::vector<ServedLog>& logs) {
  std::vector<std::string> ids, subjects;
  for (const ServedLog& s : logs) {
    if (s.event->record().personal().empty()) continue;
    ids.push_back(s.event->event_id());
    for (const auto& c : s.event->record().personal()) subjects.push_back(c.subject());
  }
  if (ids.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const ValuesByEvent held, ValuesOf(conn, ids));
  ASSIGN_OR_RETURN(const auto erased, ErasedThrough(conn, subjects));
  for (const ServedLog& s : logs) {
    const audit::AuditEvent& e = *s.event;
    if (e.record().personal().empty()) continue;
    std::vector<audit::PersonalValue> opened;
    if (auto it = held.find(e.event_id()); it != held.end()) {
      // Only the rows kept for the envelope's own commitments: any other
      // was never this event's value (a row written for a commitment the
      // envelope does not hold), and is not read.
      audit::PersonalValues values;
      for (const KeptValue& v : it->second) {
        const audit::PersonalCommitment* c = audit::FindCommitment(e, v.value.path());
        if (c != nullptr && c->commitment() == v.commitment) *values.add_values() = v.value;
      }
      std::vector<std::string> refused;
      opened = audit::OpenCommitments(e, values, &refused);
      if (!refused.empty()) {
        return absl::DataLossError(absl::StrCat(
            "audit log ", e.event_id(), ": a kept personal value was changed (", refused[0], ")"));
      }
    }
    RestoreIntoLog(e, opened, erased, *s.log);
  }
  return absl::OkStatus();
}

absl::Status AttachPersonalValues(pg::Connection& conn, std::vector<query::AuditRow>& rows) {
  std::vector<ServedLog> logs;
  for (query::AuditRow& row : rows) logs.push_back({&row.event, &row.log});
  return AttachPersonalValues(conn, logs);
}

}  // namespace ulticode::admin::personal
