// Reads of the transparency log's tables (migrations 0011 and 0013):
// checkpoints with their cosignatures, leaves, stored nodes. Named SQL next to the typed rows it
// returns. What the log stores is written once and never changed, so reads need no transaction: a
// node or checkpoint read once stays true.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/pg/connection.h"
#include "common/tlog/merkle.h"
#include "common/tlog/stored.h"
#include "ulticode/admin/v1/audit_log.pb.h"

namespace ulticode::admin::transparency {

struct StoredCheckpoint {
  uint64_t size = 0;
  std::string note;                       // the signed note, verbatim
  std::vector<std::string> cosignatures;  // the witnesses' lines, without "\n"
};

struct StoredLeaf {
  uint64_t index = 0;
  std::string leaf;  // tlog::EncodeLeaf of the row
};

// As AuditLogService sends it.
admin::v1::SignedCheckpoint ToProto(const StoredCheckpoint& c);

// The latest checkpoint; nullopt before the first.
absl::StatusOr<std::optional<StoredCheckpoint>> LatestCheckpoint(pg::Connection& conn);
// The newest checkpoint that every witness Admin feeds (log_witnesses) has
// cosigned; the latest checkpoint when there are no witnesses; nullopt
// when none qualifies.
absl::StatusOr<std::optional<StoredCheckpoint>> LatestWitnessedCheckpoint(pg::Connection& conn);
// The checkpoint of exactly `size`; nullopt when the log signed none.
absl::StatusOr<std::optional<StoredCheckpoint>> CheckpointAt(pg::Connection& conn, uint64_t size);
// Checkpoints of size >= first, ascending, at most `limit`.
absl::StatusOr<std::vector<StoredCheckpoint>> CheckpointsFrom(pg::Connection& conn, uint64_t first,
                                                              int limit);

// Leaves with index in [start, start + count), ascending; stops once the
// leaves reach `max_bytes` (at least one comes).
absl::StatusOr<std::vector<StoredLeaf>> LeavesFrom(pg::Connection& conn, uint64_t start, int count,
                                                   int64_t max_bytes);
// The log index of an audit row: NOT_FOUND for no such row, nullopt while
// it has none yet.
absl::StatusOr<std::optional<uint64_t>> IndexOf(pg::Connection& conn, const std::string& event_id);

// The inclusion proofs of leaves `indexes` (each below `size`) in the tree
// of `size`, from the stored nodes, all read in one query.
absl::StatusOr<std::vector<std::vector<tlog::Hash>>> InclusionProofs(
    pg::Connection& conn, const std::vector<uint64_t>& indexes, uint64_t size);

// Reads log_nodes one node at a time, through `conn`.
tlog::NodeReader NodesOf(pg::Connection& conn);

// Runs `compute` (a proof or root from stored nodes) with every node it
// needs read in one query: the nodes a proof needs depend only on the
// sizes and indexes, so a first pass records them.
absl::StatusOr<std::vector<tlog::Hash>> WithNodesOf(
    pg::Connection& conn,
    const std::function<absl::StatusOr<std::vector<tlog::Hash>>(const tlog::NodeReader&)>& compute);

// Many proofs at once (the witness feed): the nodes over a range of leaves
// loaded with one query per level, and every node read once.
class NodeCache {
 public:
  explicit NodeCache(pg::Connection& conn) : conn_(conn) {}
  // Loads the stored nodes of every level of a tree of `size` leaves over
  // leaves [first, last), with a neighbour on each side.
  absl::Status Prefetch(uint64_t first, uint64_t last, uint64_t size);
  tlog::NodeReader Reader();

 private:
  pg::Connection& conn_;
  absl::flat_hash_map<tlog::NodeId, tlog::Hash> nodes_;
};
// `width` nodes of `level` from `first`, in order; DATA_LOSS when one is
// not stored.
absl::StatusOr<std::vector<tlog::Hash>> NodeRange(pg::Connection& conn, int level, uint64_t first,
                                                  uint64_t width);

}  // namespace ulticode::admin::transparency
