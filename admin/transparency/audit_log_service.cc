#include "admin/transparency/audit_log_service.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "admin/transparency/log_reader.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/log/log.h"
#include "common/server/grpc_server.h"
#include "common/server/grpc_status.h"
#include "common/tlog/stored.h"
#include "common/tlog/tiles.h"

namespace ulticode::admin::transparency {
namespace {

constexpr int kMaxPage = 1000;
constexpr int kDefaultPage = 100;

// The size of the latest signed tree; FAILED_PRECONDITION before the first.
absl::StatusOr<uint64_t> SignedSize(pg::Connection& conn) {
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> latest, LatestCheckpoint(conn));
  if (!latest) return absl::FailedPreconditionError("the log has no checkpoint yet");
  return latest->size;
}

// `requested` (0: the latest signed size), refused beyond it.
absl::StatusOr<uint64_t> TreeSize(pg::Connection& conn, uint64_t requested, const char* field) {
  ASSIGN_OR_RETURN(const uint64_t signed_size, SignedSize(conn));
  if (requested > signed_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": ", requested, " is beyond the latest checkpoint's tree size ", signed_size));
  }
  return requested == 0 ? signed_size : requested;
}

void AddHashes(const std::vector<tlog::Hash>& hashes,
               google::protobuf::RepeatedPtrField<std::string>* out) {
  for (const tlog::Hash& h : hashes) out->Add(tlog::ToBytes(h));
}

// Tree sizes and indexes are PostgreSQL bigints.
absl::Status InRange(const char* field, uint64_t value) {
  if (value > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": at most ", INT64_MAX));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SignedCheckpoint> Checkpoint(pg::Connection& conn,
                                                const v1::GetCheckpointRequest& req) {
  RETURN_IF_ERROR(InRange("tree_size", req.tree_size()));
  if (req.witnessed() && req.tree_size() != 0) {
    return absl::InvalidArgumentError("witnessed: only with tree_size 0");
  }
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> c,
                   req.tree_size() != 0 ? CheckpointAt(conn, req.tree_size())
                   : req.witnessed()    ? LatestWitnessedCheckpoint(conn)
                                        : LatestCheckpoint(conn));
  if (!c) {
    return absl::NotFoundError(req.tree_size() == 0
                                   ? std::string("the log has no checkpoint yet")
                                   : absl::StrCat("no checkpoint of tree size ", req.tree_size()));
  }
  return ToProto(*c);
}

absl::StatusOr<v1::ListCheckpointsResponse> Checkpoints(pg::Connection& conn,
                                                        const v1::ListCheckpointsRequest& req) {
  if (req.page_size() < 0 || req.page_size() > kMaxPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be 0..", kMaxPage, " (0 means ", kDefaultPage, ")"));
  }
  RETURN_IF_ERROR(InRange("first_size", req.first_size()));
  const int page = req.page_size() == 0 ? kDefaultPage : req.page_size();
  ASSIGN_OR_RETURN(std::vector<StoredCheckpoint> rows,
                   CheckpointsFrom(conn, req.first_size(), page + 1));
  v1::ListCheckpointsResponse resp;
  for (int i = 0; i < static_cast<int>(rows.size()) && i < page; ++i) {
    *resp.add_checkpoints() = ToProto(rows[i]);
  }
  if (static_cast<int>(rows.size()) > page) resp.set_next_first_size(rows[page].size);
  return resp;
}

absl::StatusOr<v1::InclusionProof> Inclusion(pg::Connection& conn,
                                             const v1::GetInclusionProofRequest& req) {
  uint64_t index = 0;
  switch (req.leaf_case()) {
    case v1::GetInclusionProofRequest::kEventId: {
      if (!ids::IsValidUuid(req.event_id())) {
        return absl::InvalidArgumentError("event_id: must be a UUID");
      }
      ASSIGN_OR_RETURN(std::optional<uint64_t> found, IndexOf(conn, req.event_id()));
      if (!found) {
        return absl::FailedPreconditionError(
            absl::StrCat("audit log ", req.event_id(), " has no log index yet"));
      }
      index = *found;
      break;
    }
    case v1::GetInclusionProofRequest::kIndex:
      RETURN_IF_ERROR(InRange("index", req.index()));
      index = req.index();
      break;
    default:
      return absl::InvalidArgumentError("event_id or index: one is required");
  }
  RETURN_IF_ERROR(InRange("tree_size", req.tree_size()));
  ASSIGN_OR_RETURN(const uint64_t size, TreeSize(conn, req.tree_size(), "tree_size"));
  if (index >= size) {
    return absl::FailedPreconditionError(
        absl::StrCat("leaf ", index, " is not inside the tree of size ", size, " yet"));
  }
  ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                   WithNodesOf(conn, [&](const tlog::NodeReader& read) {
                     return tlog::StoredInclusionProof(index, size, read);
                   }));
  v1::InclusionProof resp;
  resp.set_leaf_index(index);
  resp.set_tree_size(size);
  AddHashes(proof, resp.mutable_hashes());
  return resp;
}

absl::StatusOr<v1::ConsistencyProof> Consistency(pg::Connection& conn,
                                                 const v1::GetConsistencyProofRequest& req) {
  RETURN_IF_ERROR(InRange("second", req.second()));
  if (req.first() == 0 || req.first() > req.second()) {
    return absl::InvalidArgumentError("first: must be 1..second");
  }
  ASSIGN_OR_RETURN(const uint64_t second, TreeSize(conn, req.second(), "second"));
  ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                   WithNodesOf(conn, [&](const tlog::NodeReader& read) {
                     return tlog::StoredConsistencyProof(req.first(), second, read);
                   }));
  v1::ConsistencyProof resp;
  AddHashes(proof, resp.mutable_hashes());
  return resp;
}

absl::StatusOr<v1::ListLogEntriesResponse> Entries(pg::Connection& conn,
                                                   const v1::ListLogEntriesRequest& req) {
  if (req.count() < 1 || req.count() > kMaxPage) {
    return absl::InvalidArgumentError(absl::StrCat("count: must be 1..", kMaxPage));
  }
  RETURN_IF_ERROR(InRange("start", req.start()));
  ASSIGN_OR_RETURN(std::vector<StoredLeaf> leaves,
                   LeavesFrom(conn, req.start(), req.count(), server::kMaxPageBytes));
  v1::ListLogEntriesResponse resp;
  for (StoredLeaf& leaf : leaves) {
    v1::LogEntry* entry = resp.add_entries();
    entry->set_index(leaf.index);
    entry->set_leaf(std::move(leaf.leaf));
  }
  return resp;
}

absl::StatusOr<v1::Tile> TileOf(pg::Connection& conn, const v1::GetTileRequest& req) {
  if (req.width() < 1 || req.width() > tlog::kTileWidth) {
    return absl::InvalidArgumentError(absl::StrCat("width: must be 1..", tlog::kTileWidth));
  }
  if (req.level() > 7) return absl::InvalidArgumentError("level: must be 0..7");
  const int level = static_cast<int>(req.level()) * tlog::kTileHeight;
  if (req.index() > (uint64_t{1} << 55)) return absl::InvalidArgumentError("index: too large");
  ASSIGN_OR_RETURN(const uint64_t size, SignedSize(conn));
  const uint64_t first = req.index() * tlog::kTileWidth;
  if (first + req.width() > (size >> level)) {
    return absl::FailedPreconditionError(absl::StrCat("tile ", req.level(), "/", req.index(),
                                                      " of width ", req.width(),
                                                      " is not inside the tree of size ", size));
  }
  ASSIGN_OR_RETURN(std::vector<tlog::Hash> hashes, NodeRange(conn, level, first, req.width()));
  v1::Tile resp;
  resp.set_hashes(tlog::EncodeTile(hashes));
  return resp;
}

// Admits the caller, runs `fn` on a pooled connection, maps its error.
template <typename Resp, typename Fn>
grpc::Status Serve(pg::Pool& pool, const server::Authorizer& authorizer, grpc::ServerContext* ctx,
                   const char* method, Resp* resp, Fn fn) {
  auto principal = authorizer.Admit(*ctx, method);
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), method);
  auto slot = authorizer.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), method);
  absl::StatusOr<Resp> r = [&]() -> absl::StatusOr<Resp> {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool.Acquire());
    return fn(*conn, *principal);
  }();
  if (!r.ok()) return server::ToGrpcStatus(r.status(), method);
  *resp = std::move(r).value();
  return grpc::Status::OK;
}

}  // namespace

grpc::Status AuditLogService::GetCheckpoint(grpc::ServerContext* ctx,
                                            const v1::GetCheckpointRequest* req,
                                            v1::SignedCheckpoint* resp) {
  return Serve(pool_, authorizer_, ctx, "GetCheckpoint", resp,
               [&](pg::Connection& c, const server::Principal&) { return Checkpoint(c, *req); });
}

grpc::Status AuditLogService::ListCheckpoints(grpc::ServerContext* ctx,
                                              const v1::ListCheckpointsRequest* req,
                                              v1::ListCheckpointsResponse* resp) {
  return Serve(pool_, authorizer_, ctx, "ListCheckpoints", resp,
               [&](pg::Connection& c, const server::Principal&) { return Checkpoints(c, *req); });
}

grpc::Status AuditLogService::GetInclusionProof(grpc::ServerContext* ctx,
                                                const v1::GetInclusionProofRequest* req,
                                                v1::InclusionProof* resp) {
  return Serve(pool_, authorizer_, ctx, "GetInclusionProof", resp,
               [&](pg::Connection& c, const server::Principal&) { return Inclusion(c, *req); });
}

grpc::Status AuditLogService::GetConsistencyProof(grpc::ServerContext* ctx,
                                                  const v1::GetConsistencyProofRequest* req,
                                                  v1::ConsistencyProof* resp) {
  return Serve(pool_, authorizer_, ctx, "GetConsistencyProof", resp,
               [&](pg::Connection& c, const server::Principal&) { return Consistency(c, *req); });
}

grpc::Status AuditLogService::ListLogEntries(grpc::ServerContext* ctx,
                                             const v1::ListLogEntriesRequest* req,
                                             v1::ListLogEntriesResponse* resp) {
  return Serve(pool_, authorizer_, ctx, "ListLogEntries", resp,
               [&](pg::Connection& c, const server::Principal& principal) {
                 // Who read what: the trail of the trail.
                 log::Info("audit_read", "ListLogEntries",
                           {{"principal", principal.id},
                            {"start", absl::StrCat(req->start())},
                            {"count", absl::StrCat(req->count())}});
                 return Entries(c, *req);
               });
}

grpc::Status AuditLogService::GetTile(grpc::ServerContext* ctx, const v1::GetTileRequest* req,
                                      v1::Tile* resp) {
  return Serve(pool_, authorizer_, ctx, "GetTile", resp,
               [&](pg::Connection& c, const server::Principal&) { return TileOf(c, *req); });
}

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"GetCheckpoint", "audit.reader"},     {"ListCheckpoints", "audit.reader"},
      {"GetInclusionProof", "audit.reader"}, {"GetConsistencyProof", "audit.reader"},
      {"ListLogEntries", "audit.reader"},    {"GetTile", "audit.reader"},
  };
  return *rules;
}

}  // namespace ulticode::admin::transparency
