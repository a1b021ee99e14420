// C2SP signed notes (c2sp.org/signed-note) with Ed25519 signatures, and the
// checkpoints of c2sp.org/tlog-checkpoint written in them. What the Go
// implementation golang.org/x/mod/sumdb/note reads (tests/interop checks it):
//  - a note is its text (non-empty, every line ending in "\n", valid UTF-8
//    without control characters other than "\n"), an empty line, then one
//    line per signature: U+2014, a space, the key name, a space, and base64
//    of the 4-byte key id followed by the 64-byte signature of the text;
//  - the key id of an Ed25519 key is the first 4 bytes (big-endian) of
//    SHA-256(name || "\n" || 0x01 || the 32-byte public key);
//  - a verifier key is "<name>+<key id, 8 hex digits>+<base64(0x01 || key)>".
// A checkpoint's text is "<origin>\n<size in decimal>\n<base64 root>\n"
// followed by optional extension lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crypto/crypto.h"
#include "common/tlog/merkle.h"

namespace ulticode::tlog {

struct Checkpoint {
  std::string origin;
  uint64_t size = 0;
  Hash root{};
  std::vector<std::string> extensions;  // lines after the root, without "\n"
  bool operator==(const Checkpoint&) const = default;
};

std::string CheckpointText(const Checkpoint& checkpoint);
// INVALID_ARGUMENT naming the line that is wrong.
absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view text);

// The key id of an Ed25519 key `raw` (32 bytes) named `name`.
uint32_t NoteKeyId(absl::string_view name, absl::string_view raw);

class NoteSigner {
 public:
  // INVALID_ARGUMENT for a name that is empty or holds "+" or whitespace.
  static absl::StatusOr<NoteSigner> Create(std::string name, const crypto::SigningKey& key);
  const std::string& name() const { return name_; }
  uint32_t key_id() const { return key_id_; }
  std::string VerifierKey() const;
  // The signed note: `text`, an empty line, the signature line.
  absl::StatusOr<std::string> Sign(absl::string_view text) const;

 private:
  NoteSigner(std::string name, const crypto::SigningKey& key, uint32_t key_id)
      : name_(std::move(name)), key_(&key), key_id_(key_id) {}
  std::string name_;
  const crypto::SigningKey* key_;
  uint32_t key_id_;
};

class NoteVerifier {
 public:
  // From a verifier key string; INVALID_ARGUMENT naming what is wrong.
  static absl::StatusOr<NoteVerifier> Parse(absl::string_view vkey);
  const std::string& name() const { return name_; }
  uint32_t key_id() const { return key_id_; }
  bool Verify(absl::string_view text, absl::string_view signature) const {
    return key_.Verify(text, signature);
  }

 private:
  NoteVerifier(std::string name, uint32_t key_id, crypto::VerifyKey key)
      : name_(std::move(name)), key_id_(key_id), key_(std::move(key)) {}
  std::string name_;
  uint32_t key_id_;
  crypto::VerifyKey key_;
};

// The text of `note` once a signature by one of `verifiers` verifies.
// Signatures by unknown keys are skipped; a known key whose signature does
// not verify, or no known signature at all, is FAILED_PRECONDITION; a
// malformed note INVALID_ARGUMENT.
absl::StatusOr<std::string> OpenNote(absl::string_view note,
                                     const std::vector<NoteVerifier>& verifiers);

}  // namespace ulticode::tlog
