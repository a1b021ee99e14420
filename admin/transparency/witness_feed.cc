#include "admin/transparency/witness_feed.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "admin/transparency/log_reader.h"
#include "common/audit/receipt.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
#include "common/tlog/stored.h"
#include "common/tlog/witnessing.h"

namespace ulticode::admin::transparency {
namespace {

constexpr char kComponent[] = "admin.witness";
constexpr int kReadBatch = 100;

constexpr pg::Statement kLock{
    "log.witness.lock",
    "SELECT pg_try_advisory_xact_lock(hashtextextended('ulticode.log.witness', 0))"};

constexpr pg::Statement kWitness{
    "log.witness.state",
    "INSERT INTO log_witnesses (witness) VALUES ($1) ON CONFLICT (witness) DO UPDATE"
    " SET witness = EXCLUDED.witness"
    " RETURNING cosigned_size, sent_size,"
    "  coalesce(sent_at <= now() - $2::float8 * interval '1 second', true)"};

constexpr pg::Statement kSent{
    "log.witness.sent",
    "UPDATE log_witnesses SET sent_size = $2, sent_at = now() WHERE witness = $1"};

constexpr pg::Statement kKeep{
    "log.witness.keep",
    "WITH kept AS (INSERT INTO log_cosignatures (size, witness, line, cosigned_at)"
    "  VALUES ($1, $2, $3, to_timestamp($4::float8)) ON CONFLICT DO NOTHING)"
    " UPDATE log_witnesses SET cosigned_size = greatest(cosigned_size, $1) WHERE witness = $2"};

std::optional<std::string> Field(const redis::StreamFields& fields, absl::string_view name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return std::nullopt;
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
                        .Help("Cosignatures received from a witness, by outcome (kept, invalid)")
                        .Register(registry)) {}

absl::Status WitnessFeed::RunOnce(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(pg::Result locked, tx.Execute(kLock));
  RETURN_IF_ERROR(tx.Commit());
  if (!locked.GetBool(0, 0)) return absl::OkStatus();
  absl::Status first;
  for (const auto& [witness, stream] : options_.owners) {
    absl::Status s = Collect(conn, witness, stream);
    if (s.ok()) s = Feed(conn, witness, stream);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status WitnessFeed::Collect(pg::Connection& conn, const std::string& witness,
                                  const std::string& stream) {
  const std::string key = tlog::CosignatureStreamFor(stream);
  std::string& cursor = cursors_.try_emplace(key, "0-0").first->second;
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> entries,
                   redis_.XRead(key, kReadBatch, absl::ZeroDuration(), cursor));
  if (entries.empty()) return absl::OkStatus();
  const std::vector<tlog::CosignatureVerifier> keys =
      WitnessKeys(*options_.keys->Current(), witness);
  for (const redis::StreamEntry& e : entries) {
    cursor = e.id;
    const auto size_text = Field(e.fields, tlog::kSizeField);
    auto line = Field(e.fields, tlog::kCosignatureField);
    if (line) line = std::string(absl::StripSuffix(*line, "\n"));
    uint64_t size = 0;
    if (!size_text || !line || !absl::SimpleAtoi(*size_text, &size)) continue;
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
      continue;
    }
    RETURN_IF_ERROR(conn.Execute(kKeep, {pg::Int(static_cast<int64_t>(size)), pg::Text(witness),
                                         pg::Text(*line), pg::Int(static_cast<int64_t>(*time))})
                        .status());
    cosignatures_.Add({{"witness", witness}, {"outcome", "kept"}}).Increment();
  }
  return absl::OkStatus();
}

absl::Status WitnessFeed::Feed(pg::Connection& conn, const std::string& witness,
                               const std::string& stream) {
  ASSIGN_OR_RETURN(std::optional<StoredCheckpoint> latest, LatestCheckpoint(conn));
  if (!latest) return absl::OkStatus();
  ASSIGN_OR_RETURN(pg::Result state,
                   conn.Execute(kWitness, {pg::Text(witness), pg::Seconds(options_.resend)}));
  const uint64_t cosigned = static_cast<uint64_t>(state.GetInt64(0, 0));
  const uint64_t sent = static_cast<uint64_t>(state.GetInt64(0, 1));
  const bool stale = state.GetBool(0, 2);
  if (latest->size <= cosigned || (latest->size == sent && !stale)) return absl::OkStatus();
  std::vector<tlog::Hash> proof;
  if (cosigned > 0) {
    ASSIGN_OR_RETURN(proof, tlog::StoredConsistencyProof(cosigned, latest->size, NodesOf(conn)));
  }
  RETURN_IF_ERROR(redis_
                      .XAddBatch(audit::ReceiptStreamFor(stream),
                                 {{{tlog::kCheckpointField, latest->note},
                                   {tlog::kFromField, absl::StrCat(cosigned)},
                                   {tlog::kConsistencyField, tlog::EncodeHashes(proof)}}})
                      .status());
  sent_.Add({{"witness", witness}}).Increment();
  return conn.Execute(kSent, {pg::Text(witness), pg::Int(static_cast<int64_t>(latest->size))})
      .status();
}

}  // namespace ulticode::admin::transparency
