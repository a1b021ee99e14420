// The owner as a witness of Admin's transparency log (common/tlog/
// witnessing.h, docs/transparency-log.md "Witnesses"). For each checkpoint
// entry on the receipt stream it
//  - verifies the note with the log's keys (--log-keys-file);
//  - accepts it only if it extends the newest checkpoint this owner
//    accepted before (log_witnessed): the same tree, or a larger one with a
//    consistency proof from it that verifies; the first one is taken as is;
//  - on acceptance keeps it and returns a cosignature/v1 line signed with
//    the owner's own key, named as the owner ("auth", "app"), on
//    `<audit stream>:cosignatures`;
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

#include "absl/status/status.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
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
};

class Witness {
 public:
  // INVALID_ARGUMENT when the owner's name cannot name a cosignature key.
  static absl::StatusOr<std::unique_ptr<Witness>> Create(WitnessOptions options,
                                                         prometheus::Registry& registry);

  // True for an entry of the receipt stream that carries a checkpoint.
  static bool IsCheckpoint(const redis::StreamFields& fields);

  // Handles one checkpoint entry. An error only for a failed database or
  // Redis call (the entry is then handled again); a refusal is OK.
  absl::Status Observe(pg::Connection& pg, redis::Client& redis, const redis::StreamFields& fields);

 private:
  Witness(WitnessOptions options, tlog::CosignatureSigner signer, prometheus::Registry& registry);
  absl::Status Cosign(redis::Client& redis, uint64_t size, absl::string_view text);
  void Refuse(const std::string& outcome, const std::string& why);

  const WitnessOptions options_;
  const tlog::CosignatureSigner signer_;
  prometheus::Family<prometheus::Counter>& outcomes_;
  prometheus::Gauge& size_;
  prometheus::Gauge& accepted_at_;
};

}  // namespace ulticode::outbox
