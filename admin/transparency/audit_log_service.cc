#include "admin/transparency/audit_log_service.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "admin/query/list_token.h"
#include "admin/transparency/log_reader.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/log/log.h"
#include "common/server/error_details.h"
#include "common/server/grpc_server.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "common/tlog/stored.h"
#include "common/tlog/tiles.h"

namespace ulticode::admin::transparency {
namespace {

constexpr int kMaxPage = 1000;
constexpr int kDefaultPage = 100;

constexpr pg::Statement kLogSize{"log.read.size",
                                 "SELECT coalesce(max(log_index) + 1, 0) FROM log_leaves"};

absl::StatusOr<int> PageSize(int32_t requested) {
  if (requested < 0 || requested > kMaxPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be 0..", kMaxPage, " (0 means ", kDefaultPage, ")"));
  }
  return requested == 0 ? kDefaultPage : requested;
}

// Where a list starts: `first` for a first page, else the token's position.
absl::StatusOr<uint64_t> PageStart(const std::string& token, query::ListKind kind, uint64_t first) {
  if (token.empty()) return first;
  return query::DecodeListToken("page_token", token, kind, first);
}

// What is not inside the signed tree yet is, after a next checkpoint: a
// RetryInfo says so.
absl::Status NotInsideYet(std::string message) {
  return server::WithRetryDelay(absl::FailedPreconditionError(std::move(message)),
                                absl::Seconds(1));
}

// The size of the latest signed tree; FAILED_PRECONDITION before the first.
absl::StatusOr<uint64_t> SignedSize(pg::Connection& conn) {
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> latest, LatestCheckpoint(conn));
  if (!latest) return NotInsideYet("the log has no checkpoint yet");
  return latest->size;
}

// `requested` (absent: the latest signed size), refused beyond it.
absl::StatusOr<uint64_t> TreeSize(pg::Connection& conn, std::optional<uint64_t> requested,
                                  const char* field) {
  ASSIGN_OR_RETURN(const uint64_t signed_size, SignedSize(conn));
  if (requested && *requested > signed_size) {
    return NotInsideYet(absl::StrCat(field, ": ", *requested,
                                     " is beyond the latest checkpoint's tree size ", signed_size));
  }
  return requested.value_or(signed_size);
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
  const bool sized = req.has_tree_size();
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> c, sized ? CheckpointAt(conn, req.tree_size())
                                                      : req.has_newest_witnessed()
                                                          ? LatestWitnessedCheckpoint(conn)
                                                          : LatestCheckpoint(conn));
  if (!c) {
    return absl::NotFoundError(sized ? absl::StrCat("no checkpoint of tree size ", req.tree_size())
                                     : std::string("the log has no checkpoint yet"));
  }
  return ToProto(*c);
}

absl::StatusOr<v1::ListCheckpointsResponse> Checkpoints(pg::Connection& conn,
                                                        const v1::ListCheckpointsRequest& req) {
  ASSIGN_OR_RETURN(const int page, PageSize(req.page_size()));
  RETURN_IF_ERROR(InRange("min_tree_size", req.min_tree_size()));
  ASSIGN_OR_RETURN(const uint64_t first,
                   PageStart(req.page_token(), query::ListKind::kCheckpoints, req.min_tree_size()));
  RETURN_IF_ERROR(InRange("page_token", first));
  ASSIGN_OR_RETURN(std::vector<StoredCheckpoint> rows, CheckpointsFrom(conn, first, page + 1));
  v1::ListCheckpointsResponse resp;
  for (int i = 0; i < static_cast<int>(rows.size()) && i < page; ++i) {
    *resp.add_checkpoints() = ToProto(rows[i]);
  }
  if (static_cast<int>(rows.size()) > page) {
    resp.set_next_page_token(query::EncodeListToken(query::ListKind::kCheckpoints, rows[page].size,
                                                    req.min_tree_size()));
  }
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
        return NotInsideYet(absl::StrCat("audit log ", req.event_id(), " has no log index yet"));
      }
      index = *found;
      break;
    }
    case v1::GetInclusionProofRequest::kLeafIndex:
      RETURN_IF_ERROR(InRange("leaf_index", req.leaf_index()));
      index = req.leaf_index();
      break;
    default:
      return absl::InvalidArgumentError("event_id: event_id or leaf_index is required");
  }
  RETURN_IF_ERROR(InRange("tree_size", req.tree_size()));
  if (req.has_tree_size() && req.tree_size() == 0) {
    return absl::InvalidArgumentError("tree_size: the empty tree holds no leaf");
  }
  ASSIGN_OR_RETURN(
      const uint64_t size,
      TreeSize(conn, req.has_tree_size() ? std::optional<uint64_t>(req.tree_size()) : std::nullopt,
               "tree_size"));
  if (index >= size) {
    return NotInsideYet(
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
  RETURN_IF_ERROR(InRange("second_tree_size", req.second_tree_size()));
  if (req.second_tree_size() == 0) {
    return absl::InvalidArgumentError("second_tree_size: required (at least 1)");
  }
  if (req.first_tree_size() == 0 || req.first_tree_size() > req.second_tree_size()) {
    return absl::InvalidArgumentError("first_tree_size: must be 1..second_tree_size");
  }
  ASSIGN_OR_RETURN(const uint64_t second,
                   TreeSize(conn, req.second_tree_size(), "second_tree_size"));
  ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                   WithNodesOf(conn, [&](const tlog::NodeReader& read) {
                     return tlog::StoredConsistencyProof(req.first_tree_size(), second, read);
                   }));
  v1::ConsistencyProof resp;
  AddHashes(proof, resp.mutable_hashes());
  return resp;
}

absl::StatusOr<v1::ListLogEntriesResponse> Entries(pg::Connection& conn,
                                                   const v1::ListLogEntriesRequest& req) {
  ASSIGN_OR_RETURN(const int page, PageSize(req.page_size()));
  RETURN_IF_ERROR(InRange("start_index", req.start_index()));
  ASSIGN_OR_RETURN(const uint64_t start,
                   PageStart(req.page_token(), query::ListKind::kLogEntries, req.start_index()));
  RETURN_IF_ERROR(InRange("page_token", start));
  ASSIGN_OR_RETURN(std::vector<StoredLeaf> leaves,
                   LeavesFrom(conn, start, page, server::kMaxPageBytes));
  v1::ListLogEntriesResponse resp;
  if (leaves.empty()) return resp;
  const uint64_t next = leaves.back().index + 1;
  for (StoredLeaf& leaf : leaves) {
    v1::LogEntry* entry = resp.add_log_entries();
    entry->set_leaf_index(leaf.index);
    entry->set_leaf(std::move(leaf.leaf));
  }
  // The log is dense: another page follows while it has a leaf at `next`.
  ASSIGN_OR_RETURN(pg::Result size, conn.Execute(kLogSize));
  if (next < static_cast<uint64_t>(size.GetInt64(0, 0))) {
    resp.set_next_page_token(
        query::EncodeListToken(query::ListKind::kLogEntries, next, req.start_index()));
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
    return NotInsideYet(absl::StrCat("tile ", req.level(), "/", req.index(), " of width ",
                                     req.width(), " is not inside the tree of size ", size));
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
                 log::Info(
                     "audit_read", "ListLogEntries",
                     {{"principal", principal.id},
                      {"start_index", absl::StrCat(req->start_index())},
                      {"page_size", absl::StrCat(req->page_size())},
                      {"page_token", std::string(text::TruncateUtf8(req->page_token(), 64))}});
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
