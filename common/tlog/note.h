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
// Witness keys (cosignature.h) use the same forms with type byte 0x04.
// A checkpoint's text is "<origin>\n<size in decimal>\n<base64 root>\n"
// followed by optional extension lines.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

// Signature types (c2sp.org/signed-note): the byte hashed into a key id and
// written before the public key in a verifier key.
inline constexpr char kNoteEd25519 = 0x01;
inline constexpr char kCosignatureV1Ed25519 = 0x04;  // c2sp.org/tlog-cosignature

// A key name: non-empty, without '+' or whitespace.
bool ValidKeyName(absl::string_view name);

// The first 4 bytes (big-endian) of SHA-256(name || "\n" || type || raw).
uint32_t KeyIdOf(absl::string_view name, char type, absl::string_view raw);
// The key id of an Ed25519 note key `raw` (32 bytes) named `name`.
uint32_t NoteKeyId(absl::string_view name, absl::string_view raw);

// "<name>+<key id, 8 hex digits>+<base64(type || raw)>".
std::string FormatVerifierKey(absl::string_view name, char type, absl::string_view raw);
// The note verifier key of `key` named `name` (what NoteSigner::VerifierKey
// gives, from the public key alone); INVALID_ARGUMENT for a bad name.
absl::StatusOr<std::string> VerifierKeyOf(absl::string_view name, const crypto::VerifyKey& key);
struct VerifierKeyParts {
  std::string name;
  uint32_t key_id = 0;
  crypto::VerifyKey key;
};
// A verifier key of signature type `type` with an Ed25519 key; INVALID_ARGUMENT
// naming what is wrong (another type, a key id that is not the key's).
absl::StatusOr<VerifierKeyParts> ParseVerifierKey(absl::string_view vkey, char type);

// A signed note cut at its last empty line: the text (ending in "\n") and
// the signature lines, each without its "\n". INVALID_ARGUMENT without an
// empty line or signature lines.
struct SplitNote {
  std::string text;
  std::vector<std::string> signatures;
};
absl::StatusOr<SplitNote> SplitNoteSignatures(absl::string_view note);

// One signature line: the key name, the key id and the bytes after it.
struct NoteSignature {
  std::string name;
  uint32_t key_id = 0;
  std::string signature;
};
// From a line without its "\n"; INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<NoteSignature> ParseSignatureLine(absl::string_view line);
// U+2014, a space, the name, a space, base64(key id || signature), "\n".
std::string SignatureLine(absl::string_view name, uint32_t key_id, absl::string_view signature);

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

// The lines of a key set file that hold a key, with their line numbers:
// '#' starts a comment line, blank lines are skipped.
std::vector<std::pair<int, absl::string_view>> KeyLines(absl::string_view text);
// A key set file's content; NOT_FOUND naming it when it cannot be read.
absl::StatusOr<std::string> ReadKeyFile(const std::string& path);

// A key set of verifier keys of type V (NoteVerifier, CosignatureVerifier),
// one a line: INVALID_ARGUMENT naming the file and the line that is wrong,
// or a set without keys.
template <typename V>
absl::StatusOr<std::vector<V>> VerifiersFromFile(const std::string& path) {
  auto text = ReadKeyFile(path);
  if (!text.ok()) return text.status();
  std::vector<V> keys;
  for (const auto& [n, line] : KeyLines(*text)) {
    auto key = V::Parse(line);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": line ", n, ": ", key.status().message()));
    }
    keys.push_back(*std::move(key));
  }
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no verifier keys"));
  return keys;
}

// The text of `note` once a signature by one of `verifiers` verifies.
// Signatures by unknown keys are skipped; a known key whose signature does
// not verify, or no known signature at all, is FAILED_PRECONDITION; a
// malformed note INVALID_ARGUMENT.
absl::StatusOr<std::string> OpenNote(absl::string_view note,
                                     const std::vector<NoteVerifier>& verifiers);

}  // namespace ulticode::tlog
