#include "admin/transparency/log_reader.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/pg/params.h"
#include "common/tlog/leaf.h"

namespace ulticode::admin::transparency {
namespace {

// A checkpoint with its cosignature lines, joined by "\n".
#define ULTI_CHECKPOINT_COLUMNS                                   \
  "size, note, (SELECT string_agg(line, E'\\n' ORDER BY witness)" \
  " FROM log_cosignatures w WHERE w.size = c.size)"

// Below the RPC pool's patience (pg::PoolOptions::acquire_timeout, 5 s):
// a slow read never makes another caller wait out its turn for a connection.
constexpr absl::Duration kReadTimeout = absl::Seconds(4);

constexpr pg::Statement kLatestCheckpoint{"log.read.latest_checkpoint",
                                          "SELECT " ULTI_CHECKPOINT_COLUMNS
                                          " FROM log_checkpoints c ORDER BY size DESC LIMIT 1",
                                          kReadTimeout};

constexpr pg::Statement kLatestWitnessed{
    "log.read.latest_witnessed",
    "SELECT " ULTI_CHECKPOINT_COLUMNS
    " FROM log_checkpoints c"
    " WHERE (SELECT count(*) FROM log_cosignatures w JOIN log_witnesses USING (witness)"
    "        WHERE w.size = c.size) >= (SELECT count(*) FROM log_witnesses)"
    " ORDER BY size DESC LIMIT 1",
    kReadTimeout};

constexpr pg::Statement kCheckpointAt{
    "log.read.checkpoint_at",
    "SELECT " ULTI_CHECKPOINT_COLUMNS " FROM log_checkpoints c WHERE size = $1", kReadTimeout};

constexpr pg::Statement kCheckpointsFrom{"log.read.checkpoints_from",
                                         "SELECT " ULTI_CHECKPOINT_COLUMNS
                                         " FROM log_checkpoints c WHERE size >= $1"
                                         " ORDER BY size LIMIT $2",
                                         kReadTimeout};

// The leaf's fields, and a running size so a page stops at its byte budget
// inside the query (the first row always comes).
constexpr pg::Statement kLeaves{
    "log.read.leaves",
    "SELECT log_index, owner, event_id::text, coalesce(key_id, ''),"
    " coalesce(seal, ''::bytea), envelope FROM ("
    "  SELECT l.log_index, a.*,"
    "   sum(length(a.envelope) + coalesce(length(a.seal), 0) + 128)"
    "   OVER (ORDER BY l.log_index ROWS UNBOUNDED PRECEDING) AS running,"
    "   length(a.envelope) + coalesce(length(a.seal), 0) + 128 AS own"
    "  FROM log_leaves l JOIN audit_logs a USING (event_id)"
    "  WHERE l.log_index >= $1 AND l.log_index < $1 + $2"
    "  ORDER BY l.log_index) page"
    " WHERE running - own < $3 ORDER BY log_index",
    kReadTimeout};

constexpr pg::Statement kIndexOf{
    "log.read.index_of",
    "SELECT l.log_index FROM audit_logs a LEFT JOIN log_leaves l USING (event_id)"
    " WHERE a.event_id = $1::uuid",
    kReadTimeout};

constexpr pg::Statement kNode{
    "log.read.node", "SELECT hash FROM log_nodes WHERE level = $1 AND idx = $2", kReadTimeout};

constexpr pg::Statement kNodeRange{"log.read.node_range",
                                   "SELECT idx, hash FROM log_nodes WHERE level = $1 AND idx >= $2 "
                                   "AND idx < $2 + $3 ORDER BY idx",
                                   kReadTimeout};

constexpr pg::Statement kNodesAt{"log.read.nodes_at",
                                 "SELECT n.level, n.idx, n.hash FROM log_nodes n"
                                 " JOIN unnest($1::smallint[], $2::bigint[]) AS t(level, idx)"
                                 "   ON n.level = t.level AND n.idx = t.idx",
                                 kReadTimeout};

constexpr pg::Statement kNodesOver{
    "log.read.nodes_over",
    "SELECT idx, hash FROM log_nodes WHERE level = $1 AND idx >= $2 AND idx <= $3", kReadTimeout};

StoredCheckpoint CheckpointFromRow(const pg::Result& r, int row) {
  StoredCheckpoint c{static_cast<uint64_t>(r.GetInt64(row, 0)), r.GetString(row, 1), {}};
  if (!r.IsNull(row, 2)) c.cosignatures = absl::StrSplit(r.GetString(row, 2), '\n');
  return c;
}

pg::Param Index(uint64_t v) { return pg::Int(static_cast<int64_t>(v)); }

}  // namespace

absl::StatusOr<std::optional<StoredCheckpoint>> LatestCheckpoint(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kLatestCheckpoint));
  if (r.empty()) return std::nullopt;
  return CheckpointFromRow(r, 0);
}

absl::StatusOr<std::optional<StoredCheckpoint>> LatestWitnessedCheckpoint(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kLatestWitnessed));
  if (r.empty()) return std::nullopt;
  return CheckpointFromRow(r, 0);
}

absl::StatusOr<std::vector<std::vector<tlog::Hash>>> InclusionProofs(
    pg::Connection& conn, const std::vector<uint64_t>& indexes, uint64_t size) {
  std::vector<std::vector<tlog::Hash>> proofs;
  // One pass records the nodes every proof needs, the next reads them all
  // at once (WithNodesOf); each pass computes every proof afresh.
  RETURN_IF_ERROR(
      WithNodesOf(conn,
                  [&](const tlog::NodeReader& read) -> absl::StatusOr<std::vector<tlog::Hash>> {
                    proofs.clear();
                    for (uint64_t index : indexes) {
                      ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                                       tlog::StoredInclusionProof(index, size, read));
                      proofs.push_back(std::move(proof));
                    }
                    return std::vector<tlog::Hash>{};
                  })
          .status());
  return proofs;
}

absl::StatusOr<std::optional<StoredCheckpoint>> CheckpointAt(pg::Connection& conn, uint64_t size) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kCheckpointAt, {Index(size)}));
  if (r.empty()) return std::nullopt;
  return CheckpointFromRow(r, 0);
}

absl::StatusOr<std::vector<StoredCheckpoint>> CheckpointsFrom(pg::Connection& conn, uint64_t first,
                                                              int limit) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kCheckpointsFrom, {Index(first), pg::Int(limit)}));
  std::vector<StoredCheckpoint> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(CheckpointFromRow(r, i));
  return out;
}

admin::v1::SignedCheckpoint ToProto(const StoredCheckpoint& c) {
  admin::v1::SignedCheckpoint out;
  out.set_checkpoint(c.note);
  out.set_tree_size(c.size);
  for (const std::string& line : c.cosignatures) out.add_cosignatures(line);
  return out;
}

absl::StatusOr<std::vector<StoredLeaf>> LeavesFrom(pg::Connection& conn, uint64_t start, int count,
                                                   int64_t max_bytes) {
  ASSIGN_OR_RETURN(pg::Result r,
                   conn.Execute(kLeaves, {Index(start), pg::Int(count), pg::Int(max_bytes)}));
  std::vector<StoredLeaf> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back({static_cast<uint64_t>(r.GetInt64(i, 0)),
                   tlog::EncodeLeaf({r.GetString(i, 1), r.GetString(i, 2), r.GetString(i, 3),
                                     r.GetBytes(i, 4), r.GetBytes(i, 5)})});
  }
  return out;
}

absl::StatusOr<std::optional<uint64_t>> IndexOf(pg::Connection& conn, const std::string& event_id) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kIndexOf, {pg::Text(event_id)}));
  if (r.empty()) return absl::NotFoundError(absl::StrCat("audit log ", event_id, " not found"));
  if (r.IsNull(0, 0)) return std::nullopt;
  return static_cast<uint64_t>(r.GetInt64(0, 0));
}

tlog::NodeReader NodesOf(pg::Connection& conn) {
  return [&conn](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
    ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kNode, {pg::Int(id.level), Index(id.index)}));
    if (r.empty()) {
      return absl::DataLossError(absl::StrCat("log node ", id.level, "/", id.index, " missing"));
    }
    return tlog::FromBytes(r.GetBytes(0, 0));
  };
}

absl::StatusOr<std::vector<tlog::Hash>> NodeRange(pg::Connection& conn, int level, uint64_t first,
                                                  uint64_t width) {
  ASSIGN_OR_RETURN(pg::Result r,
                   conn.Execute(kNodeRange, {pg::Int(level), Index(first), Index(width)}));
  std::vector<tlog::Hash> out;
  for (int i = 0; i < r.rows(); ++i) {
    if (static_cast<uint64_t>(r.GetInt64(i, 0)) != first + out.size()) break;
    ASSIGN_OR_RETURN(tlog::Hash h, tlog::FromBytes(r.GetBytes(i, 1)));
    out.push_back(h);
  }
  if (out.size() != width) {
    return absl::DataLossError(
        absl::StrCat("log node ", level, "/", first + out.size(), " missing"));
  }
  return out;
}

absl::StatusOr<std::vector<tlog::Hash>> WithNodesOf(
    pg::Connection& conn,
    const std::function<absl::StatusOr<std::vector<tlog::Hash>>(const tlog::NodeReader&)>&
        compute) {
  std::vector<std::string> levels, indexes;
  (void)compute([&](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
    levels.push_back(absl::StrCat(id.level));
    indexes.push_back(absl::StrCat(id.index));
    return tlog::Hash{};
  });
  ASSIGN_OR_RETURN(pg::Result r,
                   conn.Execute(kNodesAt, {pg::TextArray(levels), pg::TextArray(indexes)}));
  absl::flat_hash_map<tlog::NodeId, tlog::Hash> nodes;
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(tlog::Hash h, tlog::FromBytes(r.GetBytes(i, 2)));
    nodes[{static_cast<int>(r.GetInt64(i, 0)), static_cast<uint64_t>(r.GetInt64(i, 1))}] = h;
  }
  return compute([&nodes](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
    auto it = nodes.find(id);
    if (it == nodes.end()) {
      return absl::DataLossError(absl::StrCat("log node ", id.level, "/", id.index, " missing"));
    }
    return it->second;
  });
}

absl::Status NodeCache::Prefetch(uint64_t first, uint64_t last, uint64_t size) {
  for (int level = 0; level < 64 && (size >> level) > 0; ++level) {
    const uint64_t lo = first >> level;
    const uint64_t hi = (last >> level) + 1;
    ASSIGN_OR_RETURN(
        pg::Result r,
        conn_.Execute(kNodesOver, {pg::Int(level), Index(lo > 0 ? lo - 1 : 0), Index(hi)}));
    for (int i = 0; i < r.rows(); ++i) {
      ASSIGN_OR_RETURN(tlog::Hash h, tlog::FromBytes(r.GetBytes(i, 1)));
      nodes_[{level, static_cast<uint64_t>(r.GetInt64(i, 0))}] = h;
    }
  }
  return absl::OkStatus();
}

tlog::NodeReader NodeCache::Reader() {
  return [this, read = NodesOf(conn_)](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
    if (auto it = nodes_.find(id); it != nodes_.end()) return it->second;
    ASSIGN_OR_RETURN(tlog::Hash h, read(id));
    nodes_[id] = h;
    return h;
  };
}

}  // namespace ulticode::admin::transparency
