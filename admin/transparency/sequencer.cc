#include "admin/transparency/sequencer.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/pg/params.h"
#include "common/tlog/leaf.h"
#include "common/tlog/stored.h"

namespace ulticode::admin::transparency {
namespace {

constexpr pg::Statement kLock{
    "log.lock", "SELECT pg_try_advisory_xact_lock(hashtextextended('ulticode.log.sequencer', 0))"};

constexpr pg::Statement kSize{"log.size", "SELECT coalesce(max(log_index) + 1, 0) FROM log_leaves"};

// The head of the queue: the audit rows waiting for an index, in the order
// they were inserted. Their rows are then read by id (=ANY, an index probe
// each), so no plan ever scans audit_logs or log_leaves whole.
constexpr pg::Statement kHead{"log.head",
                              "SELECT event_id::text FROM log_queue ORDER BY seq LIMIT $1"};

// Each queued event's audit row (none when it is gone) and whether it is a
// leaf already.
constexpr pg::Statement kQueued{
    "log.queued",
    "SELECT a.event_id::text, a.owner, coalesce(a.key_id, ''), coalesce(a.seal, ''::bytea),"
    " a.envelope, (SELECT l.log_index FROM log_leaves l WHERE l.event_id = a.event_id) IS NOT NULL"
    " FROM audit_logs a WHERE a.event_id = ANY($1::uuid[])"};

// Queued events not to be sequenced: an event whose audit row is gone, or
// one already a leaf whose audit row was inserted again (Admin lost the row
// and its owner sent the event again). Such an owner has not confirmed the
// event, so its proof is sent again (log_proof_requests).
// Only log_queue_done (admin/migrations/0001_admin.sql) takes entries off the queue, and only
// those of events that are leaves or whose audit row is gone.
constexpr pg::Statement kDropStale{
    "log.drop_stale",
    "WITH stale AS (SELECT log_queue_done($1::uuid[]) AS event_id)"
    " INSERT INTO log_proof_requests (event_id, owner)"
    " SELECT s.event_id, a.owner FROM stale s JOIN audit_logs a USING (event_id)"
    " ON CONFLICT (event_id) DO NOTHING"};

constexpr pg::Statement kAssign{
    "log.assign",
    "INSERT INTO log_leaves (log_index, event_id)"
    " SELECT idx, id FROM unnest($1::uuid[], $2::bigint[]) AS t(id, idx)"};

// After kAssign and kStoreNodes, in the same transaction: the new leaves
// and their hashes are visible.
constexpr pg::Statement kTaken{"log.taken", "SELECT count(*) FROM log_queue_done($1::uuid[])"};

constexpr pg::Statement kStoreNodes{
    "log.store_nodes",
    "INSERT INTO log_nodes (level, idx, hash)"
    " SELECT t.level, t.idx, decode(t.hash, 'hex')"
    " FROM unnest($1::smallint[], $2::bigint[], $3::text[]) AS t(level, idx, hash)"};

constexpr pg::Statement kNode{"log.node",
                              "SELECT hash FROM log_nodes WHERE level = $1 AND idx = $2"};

constexpr pg::Statement kLastCheckpoint{
    "log.last_checkpoint",
    "SELECT size, signed_at <= now() - $1::float8 * interval '1 second' FROM log_checkpoints"
    " ORDER BY size DESC LIMIT 1"};

constexpr pg::Statement kCheckpoint{
    "log.checkpoint", "INSERT INTO log_checkpoints (size, root, note) VALUES ($1, $2, $3)"};

// The queue's head split into the leaves to append, in queue order, and
// the stale events to drop.
struct Head {
  std::vector<tlog::LeafV1> leaves;
  std::vector<std::string> stale;
  int64_t taken = 0;
};

absl::StatusOr<Head> ReadHead(pg::Transaction& tx, int batch) {
  ASSIGN_OR_RETURN(pg::Result head, tx.Execute(kHead, {pg::Int(batch)}));
  Head out;
  out.taken = head.rows();
  if (head.empty()) return out;
  std::vector<std::string> ids;
  for (int i = 0; i < head.rows(); ++i) ids.push_back(head.GetString(i, 0));
  ASSIGN_OR_RETURN(pg::Result rows, tx.Execute(kQueued, {pg::TextArray(ids)}));
  absl::flat_hash_map<std::string, int> found;
  for (int i = 0; i < rows.rows(); ++i) found[rows.GetString(i, 0)] = i;
  for (const std::string& id : ids) {
    const auto it = found.find(id);
    if (it == found.end() || rows.GetBool(it->second, 5)) {
      out.stale.push_back(id);
      continue;
    }
    const int i = it->second;
    out.leaves.push_back(
        {rows.GetString(i, 1), id, rows.GetString(i, 2), rows.GetBytes(i, 3), rows.GetBytes(i, 4)});
  }
  return out;
}

tlog::NodeReader Reader(pg::Transaction& tx) {
  return [&tx](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
    ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kNode, {pg::Int(id.level),
                                                      pg::Int(static_cast<int64_t>(id.index))}));
    if (r.empty()) {
      return absl::DataLossError(absl::StrCat("log node ", id.level, "/", id.index, " missing"));
    }
    return tlog::FromBytes(r.GetBytes(0, 0));
  };
}

}  // namespace

absl::StatusOr<SequencerRun> Sequencer::RunOnce(pg::Connection& conn) {
  SequencerRun run;
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(pg::Result locked, tx.Execute(kLock));
  if (!locked.GetBool(0, 0)) {  // another replica sequences
    RETURN_IF_ERROR(tx.Commit());
    return run;
  }
  run.locked = true;
  ASSIGN_OR_RETURN(pg::Result size_row, tx.Execute(kSize));
  const int64_t size = size_row.GetInt64(0, 0);
  ASSIGN_OR_RETURN(const Head head, ReadHead(tx, options_.batch));
  std::vector<tlog::Hash> leaves;
  std::vector<std::string> ids, indexes;
  for (const tlog::LeafV1& leaf : head.leaves) {
    leaves.push_back(tlog::LeafHash(tlog::EncodeLeaf(leaf)));
    ids.push_back(leaf.event_id);
    indexes.push_back(absl::StrCat(size + static_cast<int64_t>(ids.size()) - 1));
  }
  run.taken = head.taken;
  run.sequenced = static_cast<int64_t>(leaves.size());
  if (!head.stale.empty()) tx.Defer(kDropStale, {pg::TextArray(head.stale)});
  run.size = size + run.sequenced;
  const tlog::NodeReader read = Reader(tx);
  if (!leaves.empty()) {
    ASSIGN_OR_RETURN(auto nodes, tlog::NodesToAppend(static_cast<uint64_t>(size), leaves, read));
    std::vector<std::string> levels, idxs, hashes;
    for (const auto& [id, hash] : nodes) {
      levels.push_back(absl::StrCat(id.level));
      idxs.push_back(absl::StrCat(id.index));
      hashes.push_back(absl::BytesToHexString(tlog::ToBytes(hash)));
    }
    RETURN_IF_ERROR(tx.Execute(kAssign, {pg::TextArray(ids), pg::TextArray(indexes)}).status());
    RETURN_IF_ERROR(
        tx.Execute(kStoreNodes, {pg::TextArray(levels), pg::TextArray(idxs), pg::TextArray(hashes)})
            .status());
    tx.Defer(kTaken, {pg::TextArray(ids)});
  }
  if (options_.signer != nullptr && run.size > 0) {
    ASSIGN_OR_RETURN(pg::Result last,
                     tx.Execute(kLastCheckpoint, {pg::Seconds(options_.checkpoint_interval)}));
    const bool due = last.empty() || (last.GetInt64(0, 0) < run.size && last.GetBool(0, 1));
    if (due) {
      ASSIGN_OR_RETURN(const tlog::Hash root,
                       tlog::StoredRoot(static_cast<uint64_t>(run.size), read));
      const tlog::Checkpoint checkpoint{options_.origin, static_cast<uint64_t>(run.size), root, {}};
      ASSIGN_OR_RETURN(const std::string note,
                       options_.signer->Sign(tlog::CheckpointText(checkpoint)));
      RETURN_IF_ERROR(tx.Execute(kCheckpoint, {pg::Int(run.size), pg::Bytes(tlog::ToBytes(root)),
                                               pg::Text(note)})
                          .status());
      run.checkpointed = true;
    }
  }
  RETURN_IF_ERROR(tx.Commit());
  return run;
}

}  // namespace ulticode::admin::transparency
