// Witness cosignatures of checkpoints, c2sp.org/tlog-cosignature version
// cosignature/v1 with Ed25519 keys:
//  - a witness key's id is the first 4 bytes (big-endian) of
//    SHA-256(name || "\n" || 0x04 || the 32-byte public key), and its
//    verifier key is "<name>+<key id, 8 hex digits>+<base64(0x04 || key)>";
//  - the signed message is "cosignature/v1\ntime <seconds since the epoch,
//    decimal>\n" followed by the checkpoint's text;
//  - the cosignature is a signature line of the checkpoint's note (note.h):
//    U+2014, a space, the name, a space, and base64 of the key id, the
//    time as 8 bytes big-endian and the 64-byte signature.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crypto/crypto.h"

namespace ulticode::tlog {

class CosignatureSigner {
 public:
  // INVALID_ARGUMENT for a name that is empty or holds "+" or whitespace.
  // `key` must outlive the signer.
  static absl::StatusOr<CosignatureSigner> Create(std::string name, const crypto::SigningKey& key);
  const std::string& name() const { return name_; }
  uint32_t key_id() const { return key_id_; }
  std::string VerifierKey() const;
  // The signature line (with its "\n") to append to the note of
  // `checkpoint_text`, cosigned at `time`. INVALID_ARGUMENT for a text that
  // is empty or does not end with a newline.
  absl::StatusOr<std::string> Cosign(absl::string_view checkpoint_text, uint64_t time) const;

 private:
  CosignatureSigner(std::string name, const crypto::SigningKey& key, uint32_t key_id)
      : name_(std::move(name)), key_(&key), key_id_(key_id) {}
  std::string name_;
  const crypto::SigningKey* key_;
  uint32_t key_id_;
};

class CosignatureVerifier {
 public:
  // From a verifier key string; INVALID_ARGUMENT naming what is wrong (a
  // key of another type, a key id that is not the key's).
  static absl::StatusOr<CosignatureVerifier> Parse(absl::string_view vkey);
  const std::string& name() const { return name_; }
  uint32_t key_id() const { return key_id_; }
  // The time of the cosignature `signature_line` (with or without its "\n")
  // of `checkpoint_text`. NOT_FOUND when the line is by another key (another
  // name or key id: the spec says to ignore it), FAILED_PRECONDITION when
  // the signature does not verify, INVALID_ARGUMENT when the line or the
  // text is malformed.
  absl::StatusOr<uint64_t> Verify(absl::string_view checkpoint_text,
                                  absl::string_view signature_line) const;

 private:
  CosignatureVerifier(std::string name, uint32_t key_id, crypto::VerifyKey key)
      : name_(std::move(name)), key_id_(key_id), key_(std::move(key)) {}
  std::string name_;
  uint32_t key_id_;
  crypto::VerifyKey key_;
};

}  // namespace ulticode::tlog
