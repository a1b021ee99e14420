// What an owner holds as a witness of Admin's log (log_witnessed) is its own
// only if it carries the owner's own cosignature of the held checkpoint,
// made when the witness accepted it. The owner's database logins can write
// the table (the runtime login may move it forward, the superuser anywhere),
// but none can sign with the owner's key, which never enters the database.
// A state without that cosignature, or whose size and root are not the held
// note's, was written by someone else: the witness neither judges by it nor
// cosigns it (outcome "state_forged", alert UlticodeWitnessStateForged).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"

namespace ulticode::outbox {

// A row of log_witnessed as stored.
struct WitnessedState {
  uint64_t size = 0;
  tlog::Hash root{};
  std::string note;         // the log's signed note of the checkpoint
  std::string cosignature;  // the owner's cosignature line of its text
};

// The owner's own cosignature verifier ("auth", "app" and its key).
absl::StatusOr<tlog::CosignatureVerifier> OwnCosignatureVerifier(audit::Owner owner,
                                                                 const crypto::SigningKey& key);

// The held checkpoint's text, once the state is the owner's own: its
// cosignature verifies with `own` over the note's text, and the note's
// size and root are the state's. DATA_LOSS naming what does not hold.
absl::StatusOr<std::string> OwnCheckpointText(const tlog::CosignatureVerifier& own,
                                              const WitnessedState& state);

}  // namespace ulticode::outbox
