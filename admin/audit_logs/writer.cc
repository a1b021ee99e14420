#include "admin/audit_logs/writer.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/metrics/metrics.h"
#include "google/protobuf/util/json_util.h"

namespace ulticode::admin::audit_logs {
namespace {

// Text arrays cannot carry NULL here: "" stands for an absent value.
constexpr pg::Statement kInsert{
    "audit_logs.insert",
    "INSERT INTO audit_logs (event_id, owner, event_type, actor, subject, action, entity_type,"
    "   entity_id, old_value, new_value, client_ip, user_agent, request_id, trace_id,"
    "   occurred_at, envelope, seal, key_id, owner_sequence)"
    " SELECT t.id, t.owner, t.type, t.actor, t.subject, t.action, t.etype, t.eid,"
    "   NULLIF(t.old, '')::jsonb, NULLIF(t.new, '')::jsonb, t.ip, t.ua, t.req, t.trace,"
    "   t.at::timestamptz, decode(t.env, 'hex'), NULLIF(decode(t.seal, 'hex'), ''), NULLIF(t.key, "
    "''), NULLIF(t.seq, '0')::bigint"
    " FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],"
    "   $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],"
    "   $14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::text[])"
    "   AS t(id, owner, type, actor, subject, action, etype, eid, old, new, ip, ua, req, trace,"
    "        at, env, seal, key, seq)"
    " ON CONFLICT (event_id) DO NOTHING",
    absl::Seconds(30)};

absl::StatusOr<std::string> Json(const google::protobuf::Struct& s) {
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(s, &out);
  if (!status.ok()) return absl::InvalidArgumentError(std::string(status.message()));
  return out;
}

}  // namespace

absl::StatusOr<int64_t> InsertAuditLogs(pg::Transaction& tx,
                                        const std::vector<AuditLogInput>& logs) {
  if (logs.empty()) return 0;
  std::vector<std::string> cols[19];
  for (const AuditLogInput& in : logs) {
    const audit::AuditEvent& e = *in.event;
    const auto& r = e.record();
    std::string old_json, new_json;
    if (r.has_old_value()) {
      ASSIGN_OR_RETURN(old_json, Json(r.old_value()));
    }
    if (r.has_new_value()) {
      ASSIGN_OR_RETURN(new_json, Json(r.new_value()));
    }
    const absl::Time at = absl::FromUnixSeconds(e.occurred_at().seconds()) +
                          absl::Nanoseconds(e.occurred_at().nanos());
    const std::string values[19] = {e.event_id(),
                                    audit::OwnerName(e.owner()),
                                    e.event_type(),
                                    r.actor(),
                                    r.subject(),
                                    r.action(),
                                    r.entity_type(),
                                    r.entity_id(),
                                    old_json,
                                    new_json,
                                    r.client_ip(),
                                    r.user_agent(),
                                    r.request_id(),
                                    r.trace_id(),
                                    absl::FormatTime(absl::RFC3339_full, at, absl::UTCTimeZone()),
                                    absl::BytesToHexString(*in.envelope),
                                    absl::BytesToHexString(*in.seal),
                                    *in.key_id,
                                    absl::StrCat(e.owner_sequence())};
    for (int i = 0; i < 19; ++i) cols[i].push_back(values[i]);
  }
  pg::Params params;
  for (auto& c : cols) params.push_back(pg::TextArray(c));
  ASSIGN_OR_RETURN(pg::Result res, tx.Execute(kInsert, params));
  return res.affected_rows();
}

WriterMetrics::WriterMetrics(prometheus::Registry& registry) {
  written_ = &metrics::Counter(registry, "ulticode_audit_logs_written_total",
                               "audit_logs rows inserted (re-processed events insert nothing)");
  auto& lag =
      prometheus::BuildHistogram()
          .Name("ulticode_audit_commit_lag_seconds")
          .Help("Time from the owner's commit (occurred_at) to the audit_logs row committing")
          .Register(registry);
  for (audit::Owner owner : {audit::v1::OWNER_AUTH, audit::v1::OWNER_APP}) {
    lag_[owner] = &lag.Add({{"owner", audit::OwnerName(owner)}}, metrics::LatencyBuckets());
  }
}

void WriterMetrics::Committed(const std::vector<AuditLogInput>& logs, int64_t written,
                              absl::Time now) {
  written_->Increment(static_cast<double>(written));
  for (const AuditLogInput& in : logs) {
    const int owner = in.event->owner();
    if (owner < 0 || owner >= 3 || lag_[owner] == nullptr) continue;
    const auto& ts = in.event->occurred_at();
    lag_[owner]->Observe(absl::ToDoubleSeconds(now - absl::FromUnixSeconds(ts.seconds()) -
                                               absl::Nanoseconds(ts.nanos())));
  }
}

}  // namespace ulticode::admin::audit_logs
