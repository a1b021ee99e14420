// The owner as a witness of Admin's transparency log (common/tlog/
// witnessing.h, docs/transparency-log.md "Witnesses"). For each checkpoint
// entry on the proof stream it
//  - verifies the note with the log's keys (--log-keys-file), whose names
//    are the log's origin: a checkpoint of another origin is refused;
//  - ignores an older checkpoint in an entry read before (at or below the
//    proof stream entry of the checkpoint it holds, once that entry is
//    found in the stream carrying the held checkpoint: a restarted reader, a
//    replica behind), and takes a first checkpoint as it is only from an
//    entry that proves from size 0;
//  - accepts it only if it extends the newest checkpoint this owner
//    accepted before (log_witnessed): the same tree, or a larger one with a
//    consistency proof from it that verifies; the first one is taken as is;
//  - with the checkpoint it holds, checks the inclusion proofs that come
//    with it: each leaf is computed from the owner's own outbox row and the
//    key id and seal the proof says the leaf holds; the seal must verify
//    with one of this owner's keys in the key directory (so the log holds
//    an entry an auditor can check), and a row whose proof verifies turns
//    CONFIRMED (the only way a row does);
//  - then returns a cosignature/v1 line signed with the owner's own key,
//    named as the owner ("auth", "app"), on `<audit stream>:cosignatures`
//    (once it has every part of a send no further send follows: the
//    cosignature tells Admin every proof arrived);
//  - keeps what it accepted with its own cosignature of it, and judges only
//    by a state that carries one (witnessed_state.h): a state written by
//    another login is refused, counted (state_forged) and never cosigned;
//  - refuses, counts and logs anything else: a smaller tree (rollback), the
//    same size with another root or a proof that fails (fork), a bad
//    signature, a malformed entry. A proof from a size other than the
//    owner's (Admin has not seen its last cosignature) is not a fork: the
//    owner sends that cosignature again.
// Counted in ulticode_log_witness_checkpoints_total{owner,outcome}; the
// alert UlticodeLogForkOrRollback fires on fork and rollback, and
// UlticodeLogNotWitnessed when the owner has accepted nothing for 10 minutes
// while Admin signed new checkpoints.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
#include "common/tlog/witnessing.h"
#include "owner/outbox/witnessed_state.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct WitnessOptions {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  std::string audit_stream;
  std::vector<tlog::NoteVerifier> log_keys;
  const crypto::SigningKey* key = nullptr;  // the owner's own
  // The parties' public keys: the seals of proved leaves must verify with
  // one of this owner's.
  const crypto::KeyDirectoryFile* keys = nullptr;
  // Shared with the dispatcher, which remembers the bundles it sealed: their
  // seals cost a few hashes here. The witness's own when null.
  seal::Verifier* seals = nullptr;
};

class Witness {
 public:
  // INVALID_ARGUMENT when the owner's name cannot name a cosignature key.
  static absl::StatusOr<std::unique_ptr<Witness>> Create(WitnessOptions options,
                                                         prometheus::Registry& registry);

  // Handles one checkpoint entry. An error only for a failed database or
  // Redis call (the entry is then handled again); a refusal is OK.
  absl::Status Observe(pg::Connection& pg, redis::Client& redis, const redis::StreamEntry& entry);

 private:
  Witness(WitnessOptions options, tlog::CosignatureSigner signer, tlog::CosignatureVerifier own,
          prometheus::Registry& registry);
  // What the owner holds for a log.
  struct Held {
    uint64_t size = 0;
    tlog::Hash root{};
    std::string text;  // the checkpoint body it cosigned
  };
  enum class Verdict {
    kHeld,      // the checkpoint is now (or was already) the one held
    kStale,     // a proof from another size: not judged
    kRefused,   // counted and logged
    kReplayed,  // an entry read before
  };
  struct Judged {
    Verdict verdict = Verdict::kHeld;
    Held held;  // what was held before
  };
  // Compares `checkpoint` with what the owner holds and keeps it when it
  // extends that.
  absl::StatusOr<Judged> Judge(pg::Connection& pg, redis::Client& redis,
                               const std::string& entry_id, const std::string& note,
                               const tlog::Checkpoint& checkpoint, uint64_t from,
                               const std::vector<tlog::Hash>& consistency);
  // Whether the proof stream entry `entry_id` exists and carries the held
  // checkpoint (then an older checkpoint in an entry up to it was read
  // before).
  absl::StatusOr<bool> HeldEntryIsReal(redis::Client& redis, const std::string& entry_id,
                                       const Held& held) const;
  // Confirms the rows whose proofs verify against `checkpoint`.
  absl::Status ConfirmProved(pg::Connection& pg, const tlog::Checkpoint& checkpoint,
                             const std::vector<tlog::LeafProof>& proofs);
  // Sends a cosignature; a failure is logged (Admin asks again).
  absl::Status Cosign(redis::Client& redis, uint64_t size, absl::string_view text);
  // Whether `origin` names one of the log's keys: a checkpoint signed by
  // the log's key under another origin is another log, refused.
  bool KnownOrigin(absl::string_view origin) const;
  // Records part "<i>/<n>" of a send of the checkpoint of `size`; true when
  // it completes the send (every part seen, in this process).
  bool AllParts(uint64_t size, absl::string_view part);
  void Refuse(const std::string& outcome, const std::string& why);

  const WitnessOptions options_;
  const tlog::CosignatureSigner signer_;
  const tlog::CosignatureVerifier own_;  // what it holds carries this key's cosignature
  seal::Verifier own_seals_;
  seal::Verifier* const seals_;
  // The parts seen of the latest send (the proof reader's thread only).
  uint64_t parts_size_ = 0;
  uint64_t parts_total_ = 0;
  absl::flat_hash_set<uint64_t> parts_seen_;
  prometheus::Family<prometheus::Counter>& outcomes_;
  prometheus::Gauge& size_;
  prometheus::Family<prometheus::Counter>& proofs_;
  prometheus::Gauge& accepted_at_;
};

}  // namespace ulticode::outbox
