#include "admin/query/audit_query_service.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin/personal/personal_store.h"
#include "admin/query/audit_rows.h"
#include "admin/query/page_token.h"
#include "admin/transparency/log_reader.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/redis/reply.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::admin::query {
namespace {

// The filters of a query as one short line for the read log.
std::string Filters(const v1::QueryAuditLogsRequest& req) {
  v1::QueryAuditLogsRequest filters = req;
  filters.clear_page_token();
  return std::string(text::TruncateUtf8(filters.ShortDebugString(), 512));
}

constexpr char kComponent[] = "admin.query";

constexpr pg::Statement kGetAuditLog{"admin.audit_logs.get",
                                     "SELECT " ULTI_AUDIT_LOG_COLUMNS
                                     " FROM audit_logs LEFT JOIN log_leaves USING (event_id)"
                                     " WHERE event_id = $1::uuid"};

// The query's SQL is assembled per request from the filters present (see
// BuildQuery); its name labels it in logs and errors like any statement.
constexpr char kQueryName[] = "admin.audit_logs.query";
constexpr int kPageFullColumn = kAuditLogColumns;  // after ULTI_AUDIT_LOG_COLUMNS
// Below the pool's patience (pg::PoolOptions::acquire_timeout, 5 s): one
// slow read never makes another reader wait out its turn for a connection.
constexpr absl::Duration kQueryTimeout = absl::Seconds(4);

// One pass over the consumer's inbox rows, plus the poison count, in one
// statement (one snapshot). Ages use the database clock, like the rows'
// timestamps, so a skewed Admin host cannot distort them.
constexpr pg::Statement kInboxStatus{
    "admin.pipeline.inbox_status",
    "SELECT count(*) FILTER (WHERE status = 'PENDING'), "
    "count(*) FILTER (WHERE status = 'PROCESSING'), "
    "count(*) FILTER (WHERE status = 'PROCESSED'), "
    "count(*) FILTER (WHERE status = 'DEAD'), "
    "COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - min(received_at) "
    "FILTER (WHERE status = 'PENDING')), 0), 0)::float8, "
    "COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - min(leased_at) "
    "FILTER (WHERE status = 'PROCESSING')), 0), 0)::float8, "
    "COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - min(first_failed_at) "
    "FILTER (WHERE status = 'PENDING' AND first_failed_at IS NOT NULL)), 0), 0)::float8, "
    "(SELECT count(*) FROM poison_events WHERE consumer = $1), "
    "now() "
    "FROM consumer_inbox WHERE consumer = $1",
    kQueryTimeout};

bool Proven(const v1::QueryAuditLogsRequest& req) {
  return req.view() == v1::AUDIT_LOG_VIEW_PROVEN;
}

// Seconds as a Duration, to the microsecond.
google::protobuf::Duration AgeOf(double seconds) {
  return google::protobuf::util::TimeUtil::MicrosecondsToDuration(
      static_cast<int64_t>(seconds * 1e6));
}

// A request, validated.
struct AuditQuery {
  AuditFilters filters;
  uint64_t fingerprint = 0;
  int page_size = 0;
  std::optional<PageCursor> cursor;
  // The last row this page may read (ScanFloor): rows below it are the next
  // page's.
  std::optional<PageCursor> floor;
};

// The filters the scan of a page walks: the one an index leads with (the
// entity with its type, the actor, the action, the entity type, the owner;
// none: the index of every row by time) and the time bounds. Every row of
// that walk matches them; the other filters are checked row by row.
AuditFilters Leading(const AuditFilters& f) {
  AuditFilters l;
  l.start_time = f.start_time;
  l.end_time = f.end_time;
  if (!f.entity_id.empty()) {
    l.entity_type = f.entity_type;
    l.entity_id = f.entity_id;
  } else if (!f.actor.empty()) {
    l.actor = f.actor;
  } else if (!f.action.empty()) {
    l.action = f.action;
  } else if (!f.entity_type.empty()) {
    l.entity_type = f.entity_type;
  } else if (!f.owner.empty()) {
    l.owner = f.owner;
  }
  return l;
}

bool SameFilters(const AuditFilters& a, const AuditFilters& b) {
  return a.owner == b.owner && a.actor == b.actor && a.action == b.action &&
         a.entity_type == b.entity_type && a.entity_id == b.entity_id;
}

absl::StatusOr<AuditQuery> ParseRequest(const v1::QueryAuditLogsRequest& req,
                                        const QueryServiceOptions& options) {
  AuditQuery q;
  ASSIGN_OR_RETURN(q.filters, FiltersOf(req.filter()));
  if (req.page_size() < 0 || req.page_size() > options.max_page_size) {
    return absl::InvalidArgumentError(absl::StrCat("page_size: must be 0..", options.max_page_size,
                                                   " (0 means ", options.default_page_size, ")"));
  }
  q.page_size = req.page_size() == 0 ? options.default_page_size : req.page_size();
  q.fingerprint = FilterFingerprint(q.filters);
  if (!req.page_token().empty()) {
    ASSIGN_OR_RETURN(q.cursor, DecodePageToken(req.page_token(), q.fingerprint));
  }
  return q;
}

// The query for one page: only the filters present, every value a numbered
// parameter. Rows come newest first by (occurred_at, event_id), the order of
// every audit_logs index, so the planner walks one index range; the keyset
// condition starts right after the previous page's last row. One extra row
// tells whether another page follows.
//
// The page also stops at a byte budget: `page` adds up each row's size (its
// text as sent) and keeps the rows that start before the budget is spent,
// so at least one row comes and Admin never holds more than the budget plus
// one row. The last column says the budget was reached (a next page may
// follow).
struct SqlQuery {
  std::string sql;
  pg::Params params;
};

// A served row is its envelope's fields, a little more than the envelope.
#define ULTI_PAGE_ROW_BYTES "(octet_length(envelope) + 256)"

// The keyset condition of a page token: the rows after `cursor`, newest
// first.
std::string Below(const PageCursor& cursor, const std::function<std::string(pg::Param)>& param) {
  const std::string at = param(pg::Time(cursor.occurred_at));
  const std::string id = param(pg::Text(cursor.event_id));
  return absl::StrCat("(occurred_at, event_id) < (", at, "::timestamptz, ", id, "::uuid)");
}

SqlQuery BuildQuery(const AuditQuery& q, int64_t max_page_bytes) {
  SqlQuery out;
  auto param = [&out](pg::Param p) {
    out.params.push_back(std::move(p));
    return absl::StrCat("$", out.params.size());
  };
  std::vector<std::string> where = FilterConditions(q.filters, param);
  if (q.cursor) where.push_back(Below(*q.cursor, param));
  if (q.floor) {
    const std::string at = param(pg::Time(q.floor->occurred_at));
    const std::string id = param(pg::Text(q.floor->event_id));
    // The first condition lets every index on (..., occurred_at) stop there.
    where.push_back(absl::StrCat("occurred_at >= ", at, "::timestamptz"));
    where.push_back(
        absl::StrCat("(occurred_at, event_id) >= (", at, "::timestamptz, ", id, "::uuid)"));
  }
  std::string rows =
      "SELECT event_id, event_id::text AS event_text, owner, event_type, actor, subject, action,"
      " entity_type, entity_id, old_value::text AS old_text, new_value::text AS new_text,"
      " client_ip, user_agent, request_id, trace_id, occurred_at, ingested_at, log_index,"
      " envelope, coalesce(key_id, '') AS key_text, coalesce(seal, ''::bytea) AS sig,"
      " (SELECT n.hash FROM log_nodes n WHERE n.level = 0 AND n.idx = log_index) AS leaf_hash"
      " FROM audit_logs LEFT JOIN log_leaves USING (event_id)";
  if (!where.empty()) absl::StrAppend(&rows, " WHERE ", absl::StrJoin(where, " AND "));
  absl::StrAppend(&rows, " ORDER BY occurred_at DESC, event_id DESC LIMIT ",
                  param(pg::Int(q.page_size + 1)));
  const std::string budget = param(pg::Int(max_page_bytes));
  out.sql = absl::StrCat(
      "SELECT event_text, owner, event_type, actor, subject, action, entity_type, entity_id,"
      " old_text, new_text, client_ip, user_agent, request_id, trace_id, occurred_at,"
      " ingested_at, log_index, envelope, key_text, sig, leaf_hash, page_bytes >= ",
      budget,
      " FROM (SELECT r.*, " ULTI_PAGE_ROW_BYTES " AS row_bytes, sum(" ULTI_PAGE_ROW_BYTES
      ") OVER (ORDER BY occurred_at DESC, event_id DESC ROWS UNBOUNDED PRECEDING) AS page_bytes"
      " FROM (",
      rows, ") r) page WHERE page_bytes - row_bytes < ", budget,
      " ORDER BY occurred_at DESC, event_id DESC");
  return out;
}

// What PostgreSQL's planner expects `sql` to cost ("Total Cost" of the top
// node of EXPLAIN's plan), at the table's current size and statistics.
absl::StatusOr<double> PlannedCost(pg::Connection& conn, const SqlQuery& sql) {
  const std::string explain = absl::StrCat("EXPLAIN (FORMAT JSON) ", sql.sql);
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(pg::Statement{"admin.audit_logs.query.plan",
                                                            explain.c_str(), kQueryTimeout},
                                              sql.params));
  const std::string plan = r.GetString(0, 0);
  const std::string key = "\"Total Cost\": ";
  const size_t at = plan.find(key);
  double cost = 0;
  if (at == std::string::npos) {
    return absl::InternalError("query plan: no Total Cost in EXPLAIN's answer");
  }
  const size_t from = at + key.size();
  if (!absl::SimpleAtod(plan.substr(from, plan.find_first_of(",\n}", from) - from), &cost)) {
    return absl::InternalError("query plan: its Total Cost is not a number");
  }
  return cost;
}

// The newest witnessed checkpoint, and the proof of each row inside it
// (`leaves[i]` is row i's log entry).
absl::Status AddProofs(pg::Connection& conn, const std::vector<std::string>& leaves,
                       v1::QueryAuditLogsResponse& resp) {
  ASSIGN_OR_RETURN(std::optional<transparency::StoredCheckpoint> checkpoint,
                   transparency::LatestWitnessedCheckpoint(conn));
  if (!checkpoint) return absl::OkStatus();
  *resp.mutable_checkpoint() = transparency::ToProto(*checkpoint);
  std::vector<uint64_t> indexes;
  std::vector<v1::AuditLog*> proved;
  for (int i = 0; i < resp.audit_logs_size(); ++i) {
    v1::AuditLog* log = resp.mutable_audit_logs(i);
    if (!log->has_log_index() || log->log_index() >= checkpoint->size) continue;
    indexes.push_back(log->log_index());
    proved.push_back(log);
    log->mutable_proof()->set_leaf(leaves[i]);
  }
  ASSIGN_OR_RETURN(const auto proofs,
                   transparency::InclusionProofs(conn, indexes, checkpoint->size));
  for (size_t i = 0; i < proofs.size(); ++i) {
    for (const tlog::Hash& h : proofs[i]) proved[i]->mutable_proof()->add_hashes(tlog::ToBytes(h));
  }
  return absl::OkStatus();
}

v1::StreamStatus UnknownStream(audit::Owner owner, const std::string& stream) {
  v1::StreamStatus s;
  s.set_stream(stream);
  s.set_owner(owner);
  s.set_group_exists(false);
  return s;
}

}  // namespace

AuditQueryService::AuditQueryService(pg::Pool& pool, const server::Authorizer& authorizer,
                                     watch::WatchHub& watches, prometheus::Registry& registry,
                                     QueryServiceOptions options)
    : pool_(pool),
      authorizer_(authorizer),
      watches_(watches),
      refused_(prometheus::BuildCounter()
                   .Name("ulticode_admin_audit_rows_refused_total")
                   .Help("Reads failed with DATA_LOSS: a row that is not what the log proves "
                         "(a column or the envelope changed after it was written)")
                   .Register(registry)),
      options_([&] {
        options.max_page_size = std::max(options.max_page_size, 1);
        options.default_page_size = std::clamp(options.default_page_size, 1, options.max_page_size);
        return std::move(options);
      }()),
      exports_(options_.max_exports) {
  // Shown from the start, so that the alert on them has a series.
  for (const char* rpc : {"QueryAuditLogs", "GetAuditLog", "ExportAuditLogs"})
    refused_.Add({{"rpc", rpc}});
}

// When the page's filters are more than its leading one, the row
// `max_scan_rows` deep into the leading walk (from the cursor): the page
// reads no further, however rarely the other filters match, and the next
// page starts below it. Nullopt when the walk is shorter or nothing else
// filters.
absl::StatusOr<std::optional<PageCursor>> ScanFloor(pg::Connection& conn, const AuditQuery& q,
                                                    int64_t max_scan_rows) {
  const AuditFilters leading = Leading(q.filters);
  if (SameFilters(leading, q.filters)) return std::nullopt;
  pg::Params params;
  auto param = [&params](pg::Param p) {
    params.push_back(std::move(p));
    return absl::StrCat("$", params.size());
  };
  std::vector<std::string> where = FilterConditions(leading, param);
  if (q.cursor) where.push_back(Below(*q.cursor, param));
  std::string sql = "SELECT occurred_at, event_id::text FROM audit_logs";
  if (!where.empty()) absl::StrAppend(&sql, " WHERE ", absl::StrJoin(where, " AND "));
  absl::StrAppend(&sql, " ORDER BY occurred_at DESC, event_id DESC OFFSET ",
                  param(pg::Int(max_scan_rows - 1)), " LIMIT 1");
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(pg::Statement{"admin.audit_logs.query.floor",
                                                            sql.c_str(), kQueryTimeout},
                                              params));
  if (r.empty()) return std::nullopt;
  return PageCursor{r.GetTime(0, 0), r.GetString(0, 1)};
}

absl::StatusOr<v1::QueryAuditLogsResponse> AuditQueryService::Query(
    const v1::QueryAuditLogsRequest& req) {
  ASSIGN_OR_RETURN(AuditQuery q, ParseRequest(req, options_));
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
  ASSIGN_OR_RETURN(q.floor, ScanFloor(*conn, q, options_.max_scan_rows));
  const SqlQuery sql = BuildQuery(q, options_.max_page_bytes);
  ASSIGN_OR_RETURN(const double cost, PlannedCost(*conn, sql));
  if (cost > options_.max_cost) {
    return absl::InvalidArgumentError(absl::StrCat(
        "filter: ", text::TruncateUtf8(req.filter().ShortDebugString(), 512),
        ": no index serves this combination at the log's current size "
        "(planned cost ",
        static_cast<int64_t>(cost), " > --query-max-cost ", static_cast<int64_t>(options_.max_cost),
        "); filter by actor, by entity_type with entity_id, by action, by owner, or narrow "
        "start_time/end_time"));
  }
  ASSIGN_OR_RETURN(
      pg::Result r,
      conn->Execute(pg::Statement{kQueryName, sql.sql.c_str(), kQueryTimeout}, sql.params));
  v1::QueryAuditLogsResponse resp;
  const int fetched = std::min(r.rows(), q.page_size);
  // The budget again, on the encoded rows (a Struct can encode larger than
  // its JSON text): the page ends before the row that would pass it.
  std::vector<AuditRow> rows;
  for (int i = 0; i < fetched; ++i) {
    ASSIGN_OR_RETURN(AuditRow row, AuditRowFromResult(r, i));
    rows.push_back(std::move(row));
  }
  RETURN_IF_ERROR(personal::AttachPersonalValues(*conn, rows));
  size_t bytes = 0;
  int n = 0;
  std::vector<std::string> leaves;
  for (; n < fetched; ++n) {
    AuditRow& row = rows[n];
    bytes += row.log.ByteSizeLong() + 8;                  // the row, its tag and length
    if (Proven(req)) bytes += row.leaf.size() + 32 * 40;  // the leaf, a proof
    if (n > 0 && bytes > static_cast<size_t>(options_.max_page_bytes)) break;
    *resp.add_audit_logs() = std::move(row.log);
    leaves.push_back(std::move(row.leaf));
  }
  if (Proven(req)) RETURN_IF_ERROR(AddProofs(*conn, leaves, resp));
  const bool more =
      r.rows() > q.page_size || n < fetched || (n > 0 && r.GetBool(n - 1, kPageFullColumn));
  if (more && n > 0) {
    const PageCursor last{r.GetTime(n - 1, kOccurredAtColumn), r.GetString(n - 1, 0)};
    ASSIGN_OR_RETURN(std::string token, EncodePageToken(last, q.fingerprint));
    resp.set_next_page_token(std::move(token));
  } else if (q.floor) {
    // The walk stopped at its floor: the rest, if any, is below it (this
    // page may be short, even empty).
    ASSIGN_OR_RETURN(std::string token, EncodePageToken(*q.floor, q.fingerprint));
    resp.set_next_page_token(std::move(token));
  }
  return resp;
}

absl::StatusOr<v1::AuditLog> AuditQueryService::Get(const v1::GetAuditLogRequest& req) {
  if (req.event_id().empty()) return absl::InvalidArgumentError("event_id: required");
  if (!ids::IsValidUuid(req.event_id())) {
    return absl::InvalidArgumentError("event_id: must be a UUID");
  }
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
  ASSIGN_OR_RETURN(pg::Result r, conn->Execute(kGetAuditLog, {pg::Text(req.event_id())}));
  if (r.empty()) {
    return absl::NotFoundError(absl::StrCat("audit log ", req.event_id(), " not found"));
  }
  std::vector<AuditRow> rows;
  ASSIGN_OR_RETURN(rows.emplace_back(), AuditRowFromResult(r, 0));
  RETURN_IF_ERROR(personal::AttachPersonalValues(*conn, rows));
  return std::move(rows[0].log);
}

std::vector<v1::StreamStatus> AuditQueryService::StreamStatuses() {
  std::vector<v1::StreamStatus> out;
  redis::Client client(options_.redis);
  // After a connection failure the remaining streams are reported unknown
  // without dialling again: one timeout per call, not one per stream.
  bool redis_down = false;
  for (const auto& [owner, stream] : options_.streams) {
    if (redis_down) {
      out.push_back(UnknownStream(owner, stream));
      continue;
    }
    v1::StreamStatus s;
    s.set_stream(stream);
    s.set_owner(owner);
    absl::Status error;
    auto length = client.XLen(stream);
    if (length.ok()) {
      s.set_length(*length);
      auto groups = client.XInfoGroups(stream);
      if (groups.ok()) {
        for (const redis::GroupInfo& g : *groups) {
          if (g.name != options_.group) continue;
          s.set_group_exists(true);
          if (g.lag) s.set_group_lag(*g.lag);
          s.set_pending(g.pending);
          s.set_last_delivered_id(g.last_delivered_id);
        }
      } else if (!absl::IsNotFound(groups.status())) {  // NotFound: deleted in between
        error = groups.status();
      }
    } else {
      error = length.status();
    }
    // NotFound (no stream) and a missing group both leave group_exists false
    // and the group's numbers zero: Redis answered, and there is nothing.
    if (!error.ok()) {
      log::Warn(kComponent, "pipeline status: cannot read stream; reporting it unknown",
                {{"stream", stream}, {"error", error.ToString()}});
      out.push_back(UnknownStream(owner, stream));
      redis_down = redis::IsTransient(error);
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status AuditQueryService::Report(const char* rpc, absl::Status status) {
  if (status.code() == absl::StatusCode::kDataLoss) {
    refused_.Add({{"rpc", rpc}}).Increment();
    log::Error(kComponent, "a read met a row that is not what the log proves; nothing was served",
               {{"rpc", rpc}, {"error", status.ToString()}});
  }
  return status;
}

absl::StatusOr<v1::PipelineStatus> AuditQueryService::Pipeline() {
  v1::PipelineStatus status;
  {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
    ASSIGN_OR_RETURN(pg::Result r, conn->Execute(kInboxStatus, {pg::Text(options_.consumer)}));
    if (r.rows() != 1) return absl::InternalError("inbox status returned no row");
    v1::InboxStatus* inbox = status.mutable_inbox();
    inbox->set_pending(r.GetInt64(0, 0));
    inbox->set_processing(r.GetInt64(0, 1));
    inbox->set_processed(r.GetInt64(0, 2));
    inbox->set_dead(r.GetInt64(0, 3));
    *inbox->mutable_oldest_pending_age() = AgeOf(r.GetDouble(0, 4));
    *inbox->mutable_oldest_lease_age() = AgeOf(r.GetDouble(0, 5));
    *inbox->mutable_oldest_retry_age() = AgeOf(r.GetDouble(0, 6));
    status.set_poison_count(r.GetInt64(0, 7));
    *status.mutable_observed_at() = ToProto(r.GetTime(0, 8));
  }  // the connection goes back before Redis is asked
  for (v1::StreamStatus& s : StreamStatuses()) *status.add_streams() = std::move(s);
  return status;
}

grpc::Status AuditQueryService::QueryAuditLogs(grpc::ServerContext* ctx,
                                               const v1::QueryAuditLogsRequest* req,
                                               v1::QueryAuditLogsResponse* resp) {
  auto principal = authorizer_.Admit(*ctx, "QueryAuditLogs");
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), "QueryAuditLogs");
  auto slot = authorizer_.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), "QueryAuditLogs");
  // Who read what: the trail of the trail.
  log::Info("audit_read", "QueryAuditLogs",
            {{"principal", principal->id}, {"filters", Filters(*req)}});
  auto r = Query(*req);
  if (!r.ok()) return server::ToGrpcStatus(Report("QueryAuditLogs", r.status()), "QueryAuditLogs");
  *resp = std::move(r).value();
  return grpc::Status::OK;
}

grpc::Status AuditQueryService::GetAuditLog(grpc::ServerContext* ctx,
                                            const v1::GetAuditLogRequest* req, v1::AuditLog* resp) {
  auto principal = authorizer_.Admit(*ctx, "GetAuditLog");
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), "GetAuditLog");
  auto slot = authorizer_.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), "GetAuditLog");
  log::Info("audit_read", "GetAuditLog",
            {{"principal", principal->id}, {"event_id", req->event_id().substr(0, 64)}});
  auto r = Get(*req);
  if (!r.ok()) return server::ToGrpcStatus(Report("GetAuditLog", r.status()), "GetAuditLog");
  *resp = std::move(r).value();
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* AuditQueryService::WatchAuditLogs(
    grpc::CallbackServerContext* ctx, const v1::WatchAuditLogsRequest* req) {
  auto principal = authorizer_.Admit(*ctx, "WatchAuditLogs");
  if (!principal.ok()) {
    return watches_.Refuse(server::ToGrpcStatus(principal.status(), "WatchAuditLogs"));
  }
  return watches_.Open(ctx, *req, *principal);
}

grpc::Status AuditQueryService::ExportAuditLogs(
    grpc::ServerContext* ctx, const v1::ExportAuditLogsRequest* req,
    grpc::ServerWriter<v1::ExportAuditLogsResponse>* writer) {
  auto principal = authorizer_.Admit(*ctx, "ExportAuditLogs");
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), "ExportAuditLogs");
  auto slot = authorizer_.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), "ExportAuditLogs");
  auto export_slot = exports_.Enter();
  if (!export_slot.ok()) return server::ToGrpcStatus(export_slot.status(), "ExportAuditLogs");
  log::Info("audit_read", "ExportAuditLogs",
            {{"principal", principal->id},
             {"request", std::string(text::TruncateUtf8(req->ShortDebugString(), 512))}});
  const absl::Status s =
      Export(pool_, *req, options_.exports, [&](const v1::ExportAuditLogsResponse& frame) {
        return !ctx->IsCancelled() && writer->Write(frame);
      });
  return server::ToGrpcStatus(Report("ExportAuditLogs", s), "ExportAuditLogs");
}

grpc::Status AuditQueryService::GetPipelineStatus(grpc::ServerContext* ctx,
                                                  const v1::GetPipelineStatusRequest* req,
                                                  v1::PipelineStatus* resp) {
  auto principal = authorizer_.Admit(*ctx, "GetPipelineStatus");
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), "GetPipelineStatus");
  auto slot = authorizer_.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), "GetPipelineStatus");
  auto r = Pipeline();
  if (!r.ok()) return server::ToGrpcStatus(r.status(), "GetPipelineStatus");
  *resp = std::move(r).value();
  return grpc::Status::OK;
}

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"QueryAuditLogs", "audit.reader"},      {"GetAuditLog", "audit.reader"},
      {"WatchAuditLogs", "audit.reader"},      {"ExportAuditLogs", "audit.reader"},
      {"GetPipelineStatus", "audit.operator"},
  };
  return *rules;
}

}  // namespace ulticode::admin::query
