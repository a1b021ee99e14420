// Admin's read side (ulticode.admin.v1.AdminService): the audit read model
// (QueryAuditLogs, GetAuditLog, WatchAuditLogs through admin/watch,
// ExportAuditLogs through audit_export.h) and the pipeline's health
// (GetPipelineStatus).
//
// Reads only: audit_logs, consumer_inbox and poison_events in Admin's own
// database (through the pool), and XINFO on the configured owner streams.
// Every request is validated in full first; INVALID_ARGUMENT names the field
// and the rule. Other errors go through server::ToGrpcStatus, so database
// detail never reaches a client.
//
// GetPipelineStatus never fails because of Redis: when Redis cannot be asked,
// the inbox part is still returned, the streams are reported unknown
// (group_exists false, group_lag -1) and a warning is logged. Each call dials
// its own short-lived Redis connection, so a hung Redis cannot queue calls
// behind one shared client.
//
// Thread-safe: handlers share only the pool and the immutable options.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "admin/query/audit_export.h"
#include "admin/watch/watch_hub.h"
#include "common/audit/event.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/server/grpc_server.h"
#include "common/server/principal.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::admin::query {

namespace v1 = ::ulticode::admin::v1;

struct QueryServiceOptions {
  // Owner -> stream key, e.g. {OWNER_AUTH, "audit:auth"}; reported in order.
  std::vector<std::pair<audit::Owner, std::string>> streams;
  // Admin's consumer group on those streams.
  std::string group = "admin-audit";
  // consumer_inbox.consumer whose rows the inbox status counts.
  std::string consumer = "audit_logs";
  redis::Options redis;
  // page_size bounds: 1..max_page_size; 0 in a request means the default.
  // The constructor clamps the default into 1..max_page_size.
  int max_page_size = 1000;
  int default_page_size = 100;
  // A page ends early, with its next-page token, once its rows reach this
  // many bytes (at least one row always comes).
  int64_t max_page_bytes = server::kMaxPageBytes;
  // A query whose plan PostgreSQL estimates above this cost is refused
  // before it runs (INVALID_ARGUMENT): a filter combination no index
  // serves would walk the table until the statement timeout.
  double max_cost = 100000;
  // When filters combine (actor and action, say), a page walks at most this
  // many rows of the index that serves its leading filter, then ends with
  // its next-page token, however few rows matched.
  int64_t max_scan_rows = 10000;
  // ExportAuditLogs calls at once (each holds a sync RPC thread while it
  // streams); one more is RESOURCE_EXHAUSTED.
  int max_exports = 2;
  ExportOptions exports;
};

// WatchAuditLogs is served by `watches` on the callback API (a watch holds
// no thread); every other method on the bounded sync threads.
class AuditQueryService final
    : public v1::AdminService::WithCallbackMethod_WatchAuditLogs<v1::AdminService::Service> {
 public:
  // `registry` gets ulticode_admin_audit_rows_refused_total{rpc}: reads
  // that met a row which is not what the log proves (DATA_LOSS).
  AuditQueryService(pg::Pool& pool, const server::Authorizer& authorizer, watch::WatchHub& watches,
                    prometheus::Registry& registry, QueryServiceOptions options);

  grpc::Status QueryAuditLogs(grpc::ServerContext* ctx, const v1::QueryAuditLogsRequest* req,
                              v1::QueryAuditLogsResponse* resp) override;
  grpc::Status GetAuditLog(grpc::ServerContext* ctx, const v1::GetAuditLogRequest* req,
                           v1::AuditLog* resp) override;
  grpc::Status GetPipelineStatus(grpc::ServerContext* ctx, const v1::GetPipelineStatusRequest* req,
                                 v1::PipelineStatus* resp) override;
  grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* WatchAuditLogs(
      grpc::CallbackServerContext* ctx, const v1::WatchAuditLogsRequest* req) override;
  grpc::Status ExportAuditLogs(grpc::ServerContext* ctx, const v1::ExportAuditLogsRequest* req,
                               grpc::ServerWriter<v1::ExportAuditLogsResponse>* writer) override;

 private:
  absl::StatusOr<v1::QueryAuditLogsResponse> Query(const v1::QueryAuditLogsRequest& req);
  absl::StatusOr<v1::AuditLog> Get(const v1::GetAuditLogRequest& req);
  absl::StatusOr<v1::PipelineStatus> Pipeline();
  // One entry per configured stream; unknown ones when Redis cannot be asked.
  std::vector<v1::StreamStatus> StreamStatuses();
  // A read's outcome: a row that is not what the log proves is reported
  // (error log, counter), and the call fails with DATA_LOSS naming it.
  absl::Status Report(const char* rpc, absl::Status status);

  pg::Pool& pool_;
  const server::Authorizer& authorizer_;
  watch::WatchHub& watches_;
  prometheus::Family<prometheus::Counter>& refused_;
  const QueryServiceOptions options_;
  ExportSlots exports_;
};

// Who may call what: audit.reader reads the trail, audit.operator the
// pipeline (and every operator action to come).
const server::AccessTable& AccessRules();

}  // namespace ulticode::admin::query
