#include "owner/outbox/witness.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/redis/stream_id.h"
#include "common/tlog/leaf.h"
#include "common/tlog/witnessing.h"
#include "owner/outbox/outbox_store.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.witness";
// The cosignature stream holds the latest answers only.
constexpr char kCosignatureStreamLength[] = "1000";

// What this owner's witness writes must survive a crash before it cosigns:
// the proof reader's connection commits asynchronously.
constexpr pg::Statement kSynchronous{"witness.synchronous", "SET LOCAL synchronous_commit = on"};

constexpr pg::Statement kHeld{
    "witness.held",
    "SELECT size, root, note, entry_id, cosignature FROM log_witnessed WHERE origin = $1"
    " FOR UPDATE"};

constexpr pg::Statement kSeen{"witness.seen",
                              "UPDATE log_witnessed SET entry_id = $2 WHERE origin = $1"};

constexpr pg::Statement kAccept{
    "witness.accept",
    "INSERT INTO log_witnessed (origin, size, root, note, entry_id, cosignature)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (origin) DO UPDATE SET size = EXCLUDED.size, root = EXCLUDED.root,"
    " note = EXCLUDED.note, entry_id = EXCLUDED.entry_id, cosignature = EXCLUDED.cosignature,"
    " accepted_at = now()"};

}  // namespace

absl::StatusOr<std::unique_ptr<Witness>> Witness::Create(WitnessOptions options,
                                                         prometheus::Registry& registry) {
  if (options.key == nullptr || options.keys == nullptr) {
    return absl::InvalidArgumentError("witness: the owner's key and the key directory are needed");
  }
  // Its own key must be there: every seal it checks is one of its own.
  if (options.keys->Current()->FindOf(audit::OwnerName(options.owner), options.key->key_id()) ==
      nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("witness: this owner's key ", options.key->key_id(),
                     " is not in the key directory "
                     "(--public-keys-file) under \"",
                     audit::OwnerName(options.owner), "\": no seal of its events would verify"));
  }
  ASSIGN_OR_RETURN(tlog::CosignatureSigner signer,
                   tlog::CosignatureSigner::Create(audit::OwnerName(options.owner), *options.key));
  ASSIGN_OR_RETURN(tlog::CosignatureVerifier own,
                   OwnCosignatureVerifier(options.owner, *options.key));
  return std::unique_ptr<Witness>(
      new Witness(std::move(options), std::move(signer), std::move(own), registry));
}

Witness::Witness(WitnessOptions options, tlog::CosignatureSigner signer,
                 tlog::CosignatureVerifier own, prometheus::Registry& registry)
    : options_(std::move(options)),
      signer_(std::move(signer)),
      own_(std::move(own)),
      seals_(options_.seals != nullptr ? options_.seals : &own_seals_),
      outcomes_(prometheus::BuildCounter()
                    .Name("ulticode_log_witness_checkpoints_total")
                    .Help("Checkpoints of Admin's log this owner was shown, by outcome: accepted, "
                          "fork, rollback, bad_signature, malformed, stale_proof, replayed, "
                          "state_forged (what it holds is not its own: refused, not cosigned)")
                    .Register(registry)),
      size_(prometheus::BuildGauge()
                .Name("ulticode_log_witness_size")
                .Help("Tree size of the newest checkpoint of Admin's log this owner accepted")
                .Register(registry)
                .Add({{"owner", audit::OwnerName(options_.owner)}})),
      proofs_(prometheus::BuildCounter()
                  .Name("ulticode_log_witness_proofs_total")
                  .Help("Inclusion proofs of this owner's events in Admin's log: rows they "
                        "confirmed, and proofs refused")
                  .Register(registry)),
      accepted_at_(
          prometheus::BuildGauge()
              .Name("ulticode_log_witness_accepted_timestamp_seconds")
              .Help("When this owner last accepted a checkpoint of Admin's log (or started)")
              .Register(registry)
              .Add({{"owner", audit::OwnerName(options_.owner)}})) {
  // Counted from the start: a restarted owner gets the same time as a new
  // one to accept a checkpoint before UlticodeLogNotWitnessed.
  accepted_at_.SetToCurrentTime();
  for (const char* outcome : {"accepted", "fork", "rollback", "bad_signature", "malformed",
                              "stale_proof", "replayed", "state_forged"}) {
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", outcome}});
  }
}

void Witness::Refuse(const std::string& outcome, const std::string& why) {
  outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", outcome}}).Increment();
  log::Error(kComponent, "checkpoint of Admin's log refused",
             {{"outcome", outcome}, {"reason", why}});
}

absl::Status Witness::Cosign(redis::Client& redis, uint64_t size, absl::string_view text) {
  ASSIGN_OR_RETURN(const std::string line,
                   signer_.Cosign(text, static_cast<uint64_t>(absl::ToUnixSeconds(absl::Now()))));
  const absl::Status sent =
      redis
          .Command({"XADD", tlog::CosignatureStreamFor(options_.audit_stream), "MAXLEN", "~",
                    kCosignatureStreamLength, "*", tlog::kSizeField, absl::StrCat(size),
                    tlog::kCosignatureField, line})
          .status();
  if (!sent.ok()) {  // Admin sends the checkpoint again until it has the cosignature
    log::Warn(kComponent, "cosignature not sent", {{"error", sent.ToString()}});
  }
  return absl::OkStatus();
}

bool Witness::AllParts(uint64_t size, absl::string_view part) {
  const std::vector<absl::string_view> i_n = absl::StrSplit(part, '/');
  uint64_t i = 0, n = 0;
  if (i_n.size() != 2 || !absl::SimpleAtoi(i_n[0], &i) || !absl::SimpleAtoi(i_n[1], &n) || i < 1 ||
      i > n) {
    return false;
  }
  if (parts_size_ != size || parts_total_ != n || i == 1) {
    parts_size_ = size;
    parts_total_ = n;
    parts_seen_.clear();
  }
  parts_seen_.insert(i);
  return i == n && parts_seen_.size() == n;
}

bool Witness::KnownOrigin(absl::string_view origin) const {
  for (const tlog::NoteVerifier& key : options_.log_keys) {
    if (key.name() == origin) return true;
  }
  return false;
}

absl::Status Witness::Observe(pg::Connection& pg, redis::Client& redis,
                              const redis::StreamEntry& entry) {
  const redis::StreamFields& fields = entry.fields;
  const auto note = redis::FieldOf(fields, tlog::kCheckpointField);
  const auto from_text = redis::FieldOf(fields, tlog::kFromField);
  const auto consistency_text = redis::FieldOf(fields, tlog::kConsistencyField);
  uint64_t from = 0;
  if (!note || !from_text || !consistency_text || !absl::SimpleAtoi(*from_text, &from)) {
    Refuse("malformed", "a checkpoint entry needs log_checkpoint, log_from and log_consistency");
    return absl::OkStatus();
  }
  auto text = tlog::OpenNote(*note, options_.log_keys);
  if (!text.ok()) {
    Refuse(absl::IsInvalidArgument(text.status()) ? "malformed" : "bad_signature",
           std::string(text.status().message()));
    return absl::OkStatus();
  }
  auto checkpoint = tlog::ParseCheckpoint(*text);
  auto consistency = tlog::DecodeHashes(*consistency_text);
  auto proofs = tlog::DecodeProofs(redis::FieldOf(fields, tlog::kProofsField).value_or(""));
  for (const absl::Status& s : {checkpoint.status(), consistency.status(), proofs.status()}) {
    if (!s.ok()) {
      Refuse("malformed", std::string(s.message()));
      return absl::OkStatus();
    }
  }
  if (!KnownOrigin(checkpoint->origin)) {
    Refuse("fork", absl::StrCat("a checkpoint of another log, \"", checkpoint->origin,
                                "\", signed with the log's key"));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const Judged judged,
                   Judge(pg, redis, entry.id, *note, *checkpoint, from, *consistency));
  switch (judged.verdict) {
    case Verdict::kRefused:
    case Verdict::kReplayed:
      return absl::OkStatus();
    case Verdict::kStale:  // Admin has not seen the cosignature of what is held
      return Cosign(redis, judged.held.size, judged.held.text);
    case Verdict::kHeld:
      break;
  }
  RETURN_IF_ERROR(ConfirmProved(pg, *checkpoint, *proofs));
  // The cosignature tells Admin every proof of the checkpoint arrived: it
  // waits for every part of a send that no further send follows.
  if (!AllParts(checkpoint->size, redis::FieldOf(fields, tlog::kPartField).value_or("1/1")) ||
      redis::FieldOf(fields, tlog::kMoreField).has_value()) {
    return absl::OkStatus();
  }
  return Cosign(redis, checkpoint->size, *text);
}

absl::StatusOr<bool> Witness::HeldEntryIsReal(redis::Client& redis, const std::string& entry_id,
                                              const Held& held) const {
  if (!redis::ParseStreamId(entry_id)) return false;
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> entries,
                   redis.XRead(tlog::ProofStreamFor(options_.audit_stream), 1, absl::ZeroDuration(),
                               redis::PreviousStreamId(entry_id)));
  if (entries.empty() || entries[0].id != entry_id) return false;
  const auto note = redis::FieldOf(entries[0].fields, tlog::kCheckpointField);
  if (!note) return false;
  auto text = tlog::OpenNote(*note, options_.log_keys);
  if (!text.ok()) return false;
  auto checkpoint = tlog::ParseCheckpoint(*text);
  return checkpoint.ok() && checkpoint->size == held.size && checkpoint->root == held.root;
}

absl::StatusOr<Witness::Judged> Witness::Judge(pg::Connection& pg, redis::Client& redis,
                                               const std::string& entry_id, const std::string& note,
                                               const tlog::Checkpoint& checkpoint, uint64_t from,
                                               const std::vector<tlog::Hash>& consistency) {
  ASSIGN_OR_RETURN(pg::Transaction tx, pg.Begin());
  RETURN_IF_ERROR(tx.Execute(kSynchronous).status());
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kHeld, {pg::Text(checkpoint.origin)}));
  Judged judged;
  std::string held_entry;
  if (!r.empty()) {
    // Judged only by a state this witness wrote itself.
    ASSIGN_OR_RETURN(const tlog::Hash root, tlog::FromBytes(r.GetBytes(0, 1)));
    const WitnessedState state{static_cast<uint64_t>(r.GetInt64(0, 0)), root, r.GetString(0, 2),
                               r.GetString(0, 4)};
    absl::StatusOr<std::string> text = OwnCheckpointText(own_, state);
    if (!text.ok()) {
      RETURN_IF_ERROR(tx.Commit());
      Refuse("state_forged", std::string(text.status().message()));
      judged.verdict = Verdict::kRefused;
      return judged;
    }
    judged.held = {state.size, root, *std::move(text)};
    held_entry = r.GetString(0, 3);
  }
  const bool holds = !r.empty();
  const Held& held = judged.held;
  const uint64_t size = checkpoint.size;
  bool replayed = holds && size < held.size && !held_entry.empty() &&
                  !redis::StreamIdLess(held_entry, entry_id);
  if (replayed) {
    // The held entry id is only a hint (the owner's database login can set
    // it): the entry must be in the stream and carry the held checkpoint.
    ASSIGN_OR_RETURN(replayed, HeldEntryIsReal(redis, held_entry, held));
  }
  if (replayed) {
    // An older checkpoint in an entry read before (a restarted reader, a
    // replica behind): not news. Shown in a new entry, it is a rollback.
    RETURN_IF_ERROR(tx.Commit());
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "replayed"}})
        .Increment();
    judged.verdict = Verdict::kReplayed;
    return judged;
  }
  if (!holds && from != 0) {
    // The first checkpoint is taken as it is only from a log that has no
    // cosignature of this owner either (an old entry of a log this owner
    // was told to forget is not one).
    RETURN_IF_ERROR(tx.Commit());
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "stale_proof"}})
        .Increment();
    judged.verdict = Verdict::kReplayed;
    return judged;
  }
  std::optional<std::pair<std::string, std::string>> refusal;  // outcome, why
  if (holds && size < held.size) {
    refusal = {"rollback", absl::StrCat("shown a tree of ", size, " leaves after accepting one of ",
                                        held.size)};
  } else if (holds && size == held.size) {
    if (checkpoint.root != held.root) {
      refusal = {"fork", absl::StrCat("another root for the tree of ", size, " leaves")};
    }
  } else if (holds && from != held.size) {
    judged.verdict = Verdict::kStale;
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "stale_proof"}})
        .Increment();
  } else if (holds) {
    const absl::Status consistent =
        tlog::VerifyConsistency(held.size, size, held.root, checkpoint.root, consistency);
    if (!consistent.ok()) {
      refusal = {"fork", absl::StrCat("the tree of ", size, " leaves does not extend the one of ",
                                      held.size, ": ", consistent.message())};
    }
  }
  if (refusal) {
    RETURN_IF_ERROR(tx.Commit());
    Refuse(refusal->first, refusal->second);
    judged.verdict = Verdict::kRefused;
    return judged;
  }
  if (judged.verdict == Verdict::kStale || (holds && size == held.size)) {
    // kStale, or kHeld: the same checkpoint again, in a newer entry.
    if (judged.verdict == Verdict::kHeld) {
      RETURN_IF_ERROR(
          tx.Execute(kSeen, {pg::Text(checkpoint.origin), pg::Text(entry_id)}).status());
    }
    RETURN_IF_ERROR(tx.Commit());
    return judged;
  }
  // Kept with this witness's own cosignature: the mark of a state it wrote.
  ASSIGN_OR_RETURN(const tlog::SplitNote split, tlog::SplitNoteSignatures(note));
  ASSIGN_OR_RETURN(
      const std::string own,
      signer_.Cosign(split.text, static_cast<uint64_t>(absl::ToUnixSeconds(absl::Now()))));
  RETURN_IF_ERROR(
      tx.Execute(kAccept, {pg::Text(checkpoint.origin), pg::Int(static_cast<int64_t>(size)),
                           pg::Bytes(tlog::ToBytes(checkpoint.root)), pg::Text(note),
                           pg::Text(entry_id), pg::Text(own)})
          .status());
  RETURN_IF_ERROR(tx.Commit());
  outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "accepted"}}).Increment();
  size_.Set(static_cast<double>(size));
  accepted_at_.SetToCurrentTime();
  return judged;
}

absl::Status Witness::ConfirmProved(pg::Connection& pg, const tlog::Checkpoint& checkpoint,
                                    const std::vector<tlog::LeafProof>& proofs) {
  std::vector<std::string> ids;
  for (const tlog::LeafProof& p : proofs) {
    if (ids::IsValidUuid(p.event_id)) ids.push_back(p.event_id);
  }
  if (ids.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<OutboxPayload> rows, PayloadsOf(pg, ids));
  absl::flat_hash_map<std::string, const std::string*> payload_of;
  for (const OutboxPayload& row : rows) payload_of[row.event_id] = &row.payload;
  const std::string owner(audit::OwnerName(options_.owner));
  const auto keys = options_.keys->Current();
  std::vector<Proved> proved;
  int refused = 0;
  for (const tlog::LeafProof& p : proofs) {
    auto row = payload_of.find(p.event_id);
    if (row == payload_of.end()) continue;  // not this owner's, or retention took it
    const std::string& payload = *row->second;
    const crypto::KeyDirectory::Entry* key = keys->FindOf(owner, p.key_id);
    const bool sealed = key != nullptr && seals_->Verify(key->key, payload, p.seal).ok();
    const std::string leaf = tlog::EncodeLeaf({owner, p.event_id, p.key_id, p.seal, payload});
    if (sealed && tlog::VerifyInclusion(p.index, checkpoint.size, tlog::LeafHash(leaf), p.hashes,
                                        checkpoint.root)
                      .ok()) {
      proved.push_back({p.event_id, p.key_id, p.seal});
    } else {
      ++refused;
    }
  }
  if (refused > 0) {
    proofs_.Add({{"owner", owner}, {"outcome", "refused"}}).Increment(refused);
    log::Error(kComponent, "inclusion proofs refused: those rows stay unconfirmed",
               {{"count", absl::StrCat(refused)}, {"tree_size", absl::StrCat(checkpoint.size)}});
  }
  ASSIGN_OR_RETURN(const int64_t confirmed, ConfirmLogged(pg, proved));
  proofs_.Add({{"owner", owner}, {"outcome", "confirmed"}})
      .Increment(static_cast<double>(confirmed));
  return absl::OkStatus();
}

}  // namespace ulticode::outbox
