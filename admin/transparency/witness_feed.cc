#include "admin/transparency/witness_feed.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "admin/transparency/log_reader.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/redis/stream_id.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
#include "common/tlog/stored.h"
#include "common/tlog/witnessing.h"

namespace ulticode::admin::transparency {
namespace {

constexpr char kComponent[] = "admin.witness";
constexpr int kReadBatch = 100;

// Held for a whole run (a session lock): two replicas feeding at once would
// send checkpoints out of order.
constexpr pg::Statement kLock{
    "log.witness.lock", "SELECT pg_try_advisory_lock(hashtextextended('ulticode.log.witness', 0))"};
constexpr pg::Statement kUnlock{
    "log.witness.unlock", "SELECT pg_advisory_unlock(hashtextextended('ulticode.log.witness', 0))"};

constexpr pg::Statement kEnroll{
    "log.witness.enroll", "INSERT INTO log_witnesses (witness) VALUES ($1) ON CONFLICT DO NOTHING"};

constexpr pg::Statement kWitness{
    "log.witness.state",
    "SELECT cosigned_size, proved_size,"
    "  coalesce(sent_at <= now() - $2::float8 * interval '1 second', true), proving_size"
    " FROM log_witnesses WHERE witness = $1"};

constexpr pg::Statement kSent{
    "log.witness.sent",
    "UPDATE log_witnesses SET proved_size = $2, proving_size = $3, sent_at = now()"
    " WHERE witness = $1"};

constexpr pg::Statement kCursor{"log.witness.cursor",
                                "SELECT cursor FROM log_witnesses WHERE witness = $1"};

constexpr pg::Statement kRead{"log.witness.read",
                              "UPDATE log_witnesses SET cursor = $2 WHERE witness = $1"};

// A request for an event that never became a leaf (its delivery ended as
// poison) is dropped after a day.
constexpr pg::Statement kForget{
    "log.witness.forget",
    "DELETE FROM log_proof_requests WHERE requested_at < now() - interval '1 day'"};

constexpr pg::Statement kKeep{
    "log.witness.keep",
    "WITH kept AS (INSERT INTO log_cosignatures (size, witness, line, cosigned_at)"
    "  VALUES ($1, $2, $3, to_timestamp($4::float8)) ON CONFLICT DO NOTHING)"
    // The latest answer wins: a witness that lost its state (restored from
    // a backup) is fed from what it holds again. Latest by the time the
    // witness signed (a time ahead of Admin's clock counts as a minute
    // ahead, so a clock that jumped forward and back wedges nothing for
    // longer): an old cosignature written again changes nothing, nor does
    // one of a smaller tree signed in the same second.
    " UPDATE log_witnesses SET cosigned_size = $1,"
    "   cosigned_at = least(to_timestamp($4::float8), now() + interval '1 minute')"
    " WHERE witness = $2 AND (cosigned_at IS NULL"
    "   OR cosigned_at < least(to_timestamp($4::float8), now() + interval '1 minute')"
    "   OR (cosigned_at = least(to_timestamp($4::float8), now() + interval '1 minute')"
    "       AND cosigned_size <= $1))"};

// The events of a witness a checkpoint newly covers, and those it asked
// for again (a re-delivery): their leaf indexes, and the key id and seal
// their leaves hold. Driven by the range of leaves (each one's row an index
// probe), never by the owner's rows.
constexpr pg::Statement kCovered{
    "log.witness.covered",
    "SELECT l.event_id::text, l.log_index, a.key_id, a.seal FROM log_leaves l"
    " JOIN audit_logs a ON a.event_id = l.event_id"
    " WHERE l.log_index >= $2 AND l.log_index < $3 AND a.owner = $1 AND a.seal IS NOT NULL"
    " ORDER BY l.log_index LIMIT $4"};

constexpr pg::Statement kRequested{
    "log.witness.requested",
    "SELECT r.event_id::text, l.log_index, a.key_id, a.seal FROM log_proof_requests r"
    " JOIN log_leaves l USING (event_id) JOIN audit_logs a ON a.event_id = r.event_id"
    " WHERE r.owner = $1 AND l.log_index < $2 AND a.seal IS NOT NULL"
    " ORDER BY l.log_index LIMIT $3"};

constexpr pg::Statement kAnswered{
    "log.witness.answered", "DELETE FROM log_proof_requests WHERE event_id = ANY($1::uuid[])"};

// Proofs a witness gets per run at most; a later re-delivery of an event
// beyond them asks for its proof again.
constexpr int kMaxProofsPerRun = 8 * static_cast<int>(tlog::kProofsPerEntry);

struct Located {
  std::string event_id;
  uint64_t index = 0;
  std::string key_id;
  std::string seal;
};

absl::StatusOr<std::vector<Located>> Locate(pg::Connection& conn, const pg::Statement& statement,
                                            const pg::Params& params) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(statement, params));
  std::vector<Located> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back({r.GetString(i, 0), static_cast<uint64_t>(r.GetInt64(i, 1)), r.GetString(i, 2),
                   r.GetBytes(i, 3)});
  }
  return out;
}

// The entries of one send of a checkpoint: its proofs kProofsPerEntry at a
// time, each marked as part i of n; `more` when a later send carries more
// proofs of the same checkpoint (the owner cosigns after the last part of a
// send without it).
std::vector<redis::StreamFields> Entries(const StoredCheckpoint& checkpoint, uint64_t from,
                                         const std::vector<tlog::Hash>& consistency,
                                         const std::vector<tlog::LeafProof>& proofs, bool more) {
  const size_t parts =
      std::max<size_t>(1, (proofs.size() + tlog::kProofsPerEntry - 1) / tlog::kProofsPerEntry);
  std::vector<redis::StreamFields> entries;
  for (size_t part = 0; part < parts; ++part) {
    const auto first = proofs.begin() + static_cast<std::ptrdiff_t>(
                                            std::min(proofs.size(), part * tlog::kProofsPerEntry));
    const auto last = proofs.begin() + static_cast<std::ptrdiff_t>(std::min(
                                           proofs.size(), (part + 1) * tlog::kProofsPerEntry));
    redis::StreamFields fields = {{tlog::kCheckpointField, checkpoint.note},
                                  {tlog::kFromField, absl::StrCat(from)},
                                  {tlog::kConsistencyField, tlog::EncodeHashes(consistency)},
                                  {tlog::kProofsField, tlog::EncodeProofs({first, last})},
                                  {tlog::kPartField, absl::StrCat(part + 1, "/", parts)}};
    if (more) fields.emplace_back(tlog::kMoreField, "1");
    entries.push_back(std::move(fields));
  }
  return entries;
}

// The inclusion proofs of `covered` (consecutive leaves of the tree of
// `size`: their nodes are loaded a level at a time) and of `requested`
// (anywhere: read node by node).
absl::StatusOr<std::vector<tlog::LeafProof>> Prove(NodeCache& nodes,
                                                   const std::vector<Located>& covered,
                                                   const std::vector<Located>& requested,
                                                   uint64_t size) {
  // Loaded a level at a time when the leaves are close together; an owner
  // with few events among many leaves reads its proofs' nodes one by one.
  if (!covered.empty() &&
      covered.back().index - covered.front().index <= 16 * covered.size() + 1024) {
    RETURN_IF_ERROR(nodes.Prefetch(covered.front().index, covered.back().index + 1, size));
  }
  const tlog::NodeReader read = nodes.Reader();
  std::vector<tlog::LeafProof> proofs;
  for (const std::vector<Located>* events : {&covered, &requested}) {
    for (const Located& e : *events) {
      ASSIGN_OR_RETURN(std::vector<tlog::Hash> path,
                       tlog::StoredInclusionProof(e.index, size, read));
      proofs.push_back({e.event_id, e.index, std::move(path), e.key_id, e.seal});
    }
  }
  return proofs;
}

// The bytes of an entry of a send besides its proofs: its other fields, with
// `log_more` and the widest part number a send of `proofs` proofs can have.
size_t EntryOverhead(const StoredCheckpoint& checkpoint, uint64_t from,
                     const std::vector<tlog::Hash>& consistency, size_t proofs) {
  const size_t parts = proofs / tlog::kProofsPerEntry + 1;
  size_t bytes = 2 * (absl::StrCat(parts).size() - 1);  // beyond the "1/1" below
  const std::vector<redis::StreamFields> empty =
      Entries(checkpoint, from, consistency, {}, /*more=*/true);
  for (const auto& [name, value] : empty.front()) bytes += name.size() + value.size();
  return bytes;
}

// How many of `proofs`, in order, one send holds within `budget` bytes,
// each entry of kProofsPerEntry proofs repeating `per_entry` bytes besides
// (EntryOverhead). At least one, so that every run moves on.
size_t ProofsThatFit(const std::vector<tlog::LeafProof>& proofs, size_t per_entry, size_t budget) {
  size_t bytes = 0;
  for (size_t i = 0; i < proofs.size(); ++i) {
    if (i % tlog::kProofsPerEntry == 0) bytes += per_entry;
    bytes += tlog::EncodeProofs({proofs[i]}).size() + 1;
    if (bytes > budget && i > 0) return i;
  }
  return proofs.size();
}

// The checkpoint a send carries: the latest, unless a send was cut short
// (log_more) with its proofs up to `proved` of the checkpoint of size
// `proving` out and more to come. The witness then holds that one: it would
// judge a newer one, sent from its cosigned size, stale, and cosign what it
// holds without the proofs still to come, which would never be sent. So the
// rest of the cut send goes with its own checkpoint; the newer one follows.
absl::StatusOr<StoredCheckpoint> CheckpointToSend(pg::Connection& conn, StoredCheckpoint latest,
                                                  uint64_t cosigned, uint64_t proved,
                                                  uint64_t proving) {
  if (proving <= cosigned || proved >= proving || proving >= latest.size) return latest;
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> cut, CheckpointAt(conn, proving));
  return cut ? *std::move(cut) : latest;
}

// The witness's cosignature key: its party's keys in the directory, as
// cosignature/v1 keys named for it.
std::vector<tlog::CosignatureVerifier> WitnessKeys(const crypto::KeyDirectory& keys,
                                                   const std::string& witness) {
  std::vector<tlog::CosignatureVerifier> out;
  for (const crypto::KeyDirectory::Entry* e : keys.OfParty(witness)) {
    auto v = tlog::CosignatureVerifier::Parse(
        tlog::FormatVerifierKey(witness, tlog::kCosignatureV1Ed25519, e->key.raw()));
    if (v.ok()) out.push_back(*std::move(v));
  }
  return out;
}

}  // namespace

WitnessFeed::WitnessFeed(WitnessFeedOptions options, prometheus::Registry& registry)
    : options_(std::move(options)),
      redis_(options_.redis),
      sent_(prometheus::BuildCounter()
                .Name("ulticode_log_witness_checkpoints_sent_total")
                .Help("Checkpoints handed to a witness (an owner), with their consistency proofs")
                .Register(registry)),
      cosignatures_(prometheus::BuildCounter()
                        .Name("ulticode_log_cosignatures_total")
                        .Help("Cosignatures received from a witness, by outcome: kept, invalid, "
                              "stale (made before the answer Admin holds: ignored)")
                        .Register(registry)) {}

absl::Status WitnessFeed::RunOnce(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result locked, conn.Execute(kLock));
  if (!locked.GetBool(0, 0)) return absl::OkStatus();
  absl::Status first;
  for (const auto& [witness, stream] : options_.owners) {
    absl::Status s = conn.Execute(kEnroll, {pg::Text(witness)}).status();
    if (s.ok()) s = Collect(conn, witness, stream);
    if (s.ok()) s = Feed(conn, witness, stream);
    if (!s.ok() && first.ok()) first = s;
  }
  if (absl::Status s = conn.Execute(kForget).status(); !s.ok() && first.ok()) first = s;
  // A broken connection released the lock with the session.
  (void)conn.Execute(kUnlock);
  return first;
}

absl::Status WitnessFeed::Collect(pg::Connection& conn, const std::string& witness,
                                  const std::string& stream) {
  const std::string key = tlog::CosignatureStreamFor(stream);
  ASSIGN_OR_RETURN(pg::Result read, conn.Execute(kCursor, {pg::Text(witness)}));
  std::string cursor = read.GetString(0, 0);
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> entries,
                   redis_.XRead(key, kReadBatch, absl::ZeroDuration(), cursor));
  if (entries.empty()) return absl::OkStatus();
  // Whatever happens below, what was kept stays read.
  auto keep_cursor = [&]() { return conn.Execute(kRead, {pg::Text(witness), pg::Text(cursor)}); };
  const std::vector<tlog::CosignatureVerifier> keys =
      WitnessKeys(*options_.keys->Current(), witness);
  for (const redis::StreamEntry& e : entries) {
    const auto size_text = redis::FieldOf(e.fields, tlog::kSizeField);
    auto line = redis::FieldOf(e.fields, tlog::kCosignatureField);
    if (line) line = std::string(absl::StripSuffix(*line, "\n"));
    uint64_t size = 0;
    if (!size_text || !line || !absl::SimpleAtoi(*size_text, &size)) {
      cursor = e.id;
      continue;
    }
    ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> checkpoint, CheckpointAt(conn, size));
    std::optional<uint64_t> time;
    if (checkpoint) {
      ASSIGN_OR_RETURN(tlog::SplitNote note, tlog::SplitNoteSignatures(checkpoint->note));
      for (const tlog::CosignatureVerifier& k : keys) {
        auto t = k.Verify(note.text, *line);
        if (t.ok()) time = *t;
      }
    }
    if (!time) {
      cosignatures_.Add({{"witness", witness}, {"outcome", "invalid"}}).Increment();
      log::Warn(kComponent, "cosignature refused: not a valid cosignature of a checkpoint",
                {{"witness", witness}, {"size", *size_text}, {"entry_id", e.id}});
      cursor = e.id;
      continue;
    }
    auto kept = conn.Execute(kKeep, {pg::Int(static_cast<int64_t>(size)), pg::Text(witness),
                                     pg::Text(*line), pg::Int(static_cast<int64_t>(*time))});
    if (!kept.ok()) {
      (void)keep_cursor();
      return kept.status();
    }
    cosignatures_
        .Add({{"witness", witness}, {"outcome", kept->affected_rows() > 0 ? "kept" : "stale"}})
        .Increment();
    cursor = e.id;
  }
  RETURN_IF_ERROR(keep_cursor().status());
  // What was read is gone: the stream holds at most what arrived since.
  return redis_.Command({"XTRIM", key, "MINID", redis::NextStreamId(cursor)}).status();
}

absl::Status WitnessFeed::Feed(pg::Connection& conn, const std::string& witness,
                               const std::string& stream) {
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> latest, LatestCheckpoint(conn));
  if (!latest) return absl::OkStatus();
  ASSIGN_OR_RETURN(pg::Result state,
                   conn.Execute(kWitness, {pg::Text(witness), pg::Seconds(options_.resend)}));
  const uint64_t cosigned = static_cast<uint64_t>(state.GetInt64(0, 0));
  const uint64_t proved = static_cast<uint64_t>(state.GetInt64(0, 1));
  const bool stale = state.GetBool(0, 2);
  const uint64_t proving = static_cast<uint64_t>(state.GetInt64(0, 3));
  ASSIGN_OR_RETURN(latest, CheckpointToSend(conn, *std::move(latest), cosigned, proved, proving));
  const int64_t size = static_cast<int64_t>(latest->size);
  // Not cosigned yet: prove from where the last send stopped, or, once it
  // is stale (lost, refused), everything since the cosigned size again.
  const uint64_t start = stale ? cosigned : std::max(proved, cosigned);
  const bool due = latest->size > cosigned && (start < latest->size || stale);
  // At or behind what the witness cosigned, the latest checkpoint still goes
  // out every resend interval: a log that went back (rollback) or was
  // signed anew at the same size (fork) is judged by the witness within one
  // interval, whatever Admin's tables now say.
  const bool check = !due && stale && latest->size <= cosigned;
  ASSIGN_OR_RETURN(
      std::vector<Located> requested,
      Locate(conn, kRequested, {pg::Text(witness), pg::Int(size), pg::Int(kMaxProofsPerRun)}));
  if (!due && !check && requested.empty()) return absl::OkStatus();
  std::vector<Located> covered;
  if (due) {
    ASSIGN_OR_RETURN(covered, Locate(conn, kCovered,
                                     {pg::Text(witness), pg::Int(static_cast<int64_t>(start)),
                                      pg::Int(size), pg::Int(kMaxProofsPerRun + 1)}));
  }
  // More than a page: the rest of this checkpoint's proofs follow in the
  // next run.
  bool more = covered.size() > static_cast<size_t>(kMaxProofsPerRun);
  if (more) covered.resize(kMaxProofsPerRun);
  NodeCache nodes(conn);
  std::vector<tlog::Hash> consistency;
  if (cosigned > 0 && cosigned < latest->size) {
    ASSIGN_OR_RETURN(consistency,
                     tlog::StoredConsistencyProof(cosigned, latest->size, nodes.Reader()));
  }
  ASSIGN_OR_RETURN(std::vector<tlog::LeafProof> proofs,
                   Prove(nodes, covered, requested, latest->size));
  // One send holds at most half the stream's share, so that the send before
  // it can still be unread beside it: what does not fit goes in the next run.
  const uint64_t from = std::min(cosigned, latest->size);
  const size_t fit = ProofsThatFit(proofs, EntryOverhead(*latest, from, consistency, proofs.size()),
                                   static_cast<size_t>(options_.proof_stream_bytes / 2));
  if (fit < covered.size()) {
    covered.resize(fit);
    more = true;
  }
  requested.resize(std::min(requested.size(), fit - covered.size()));
  proofs.resize(fit);
  const std::string proof_stream = tlog::ProofStreamFor(stream);
  const std::vector<redis::StreamFields> entries =
      Entries(*latest, from, consistency, proofs, more);
  RETURN_IF_ERROR(redis_.XAddBatch(proof_stream, entries).status());
  // As many entries of this send's size as the share holds: what the owner
  // has not read yet stays (a checkpoint every 500 ms under load), and the
  // stream guard holds the bytes whatever the entries' sizes.
  size_t bytes = 0;
  for (const redis::StreamFields& e : entries) {
    for (const auto& [name, value] : e) bytes += name.size() + value.size();
  }
  const int64_t mean =
      std::max<int64_t>(256, static_cast<int64_t>(bytes / std::max<size_t>(1, entries.size())));
  const int64_t keep = std::max<int64_t>(16, options_.proof_stream_bytes / mean);
  RETURN_IF_ERROR(
      redis_.Command({"XTRIM", proof_stream, "MAXLEN", "~", absl::StrCat(keep)}).status());
  sent_.Add({{"witness", witness}}).Increment();
  std::vector<std::string> answered;
  for (const Located& r : requested) answered.push_back(r.event_id);
  if (!answered.empty()) {
    RETURN_IF_ERROR(conn.Execute(kAnswered, {pg::TextArray(answered)}).status());
  }
  if (check) {
    return conn
        .Execute(kSent, {pg::Text(witness), pg::Int(static_cast<int64_t>(proved)),
                         pg::Int(static_cast<int64_t>(proving))})
        .status();
  }
  if (!due) return absl::OkStatus();
  const int64_t next = more ? static_cast<int64_t>(covered.back().index) + 1 : size;
  return conn.Execute(kSent, {pg::Text(witness), pg::Int(next), pg::Int(more ? size : 0)}).status();
}

}  // namespace ulticode::admin::transparency
