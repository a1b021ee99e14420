// ulticode.admin.v1.AuditLogService: the transparency log's checkpoints,
// proofs, leaves and hash tiles (proto/ulticode/admin/v1/audit_log.proto),
// for role audit.reader. Proofs are computed from the stored subtree
// hashes: O(log n) node reads each. Proofs and tiles are served only for
// trees the log has signed a checkpoint of (a proof against an unsigned
// root proves nothing to a client).
//
// Thread-safe: handlers share only the pool.
#pragma once

#include "common/pg/pool.h"
#include "common/server/principal.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode::admin::transparency {

namespace v1 = ::ulticode::admin::v1;

class AuditLogService final : public v1::AuditLogService::Service {
 public:
  AuditLogService(pg::Pool& pool, const server::Authorizer& authorizer)
      : pool_(pool), authorizer_(authorizer) {}

  grpc::Status GetCheckpoint(grpc::ServerContext* ctx, const v1::GetCheckpointRequest* req,
                             v1::SignedCheckpoint* resp) override;
  grpc::Status ListCheckpoints(grpc::ServerContext* ctx, const v1::ListCheckpointsRequest* req,
                               v1::ListCheckpointsResponse* resp) override;
  grpc::Status GetInclusionProof(grpc::ServerContext* ctx, const v1::GetInclusionProofRequest* req,
                                 v1::InclusionProof* resp) override;
  grpc::Status GetConsistencyProof(grpc::ServerContext* ctx,
                                   const v1::GetConsistencyProofRequest* req,
                                   v1::ConsistencyProof* resp) override;
  grpc::Status ListLogEntries(grpc::ServerContext* ctx, const v1::ListLogEntriesRequest* req,
                              v1::ListLogEntriesResponse* resp) override;
  grpc::Status GetTile(grpc::ServerContext* ctx, const v1::GetTileRequest* req,
                       v1::Tile* resp) override;

 private:
  pg::Pool& pool_;
  const server::Authorizer& authorizer_;
};

inline constexpr char kServiceName[] = "ulticode.admin.v1.AuditLogService";

// Every RPC: audit.reader.
const server::AccessTable& AccessRules();

}  // namespace ulticode::admin::transparency
