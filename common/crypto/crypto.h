// Hashes and Ed25519 signatures on OpenSSL 3 (EVP), and secret files.
//
// Keys never appear in logs or error texts: errors name the file and the
// problem, never its content. EVP objects are held by the owning pointers of
// openssl_ptr.h. Signing and verifying are thread-safe (each call makes its
// own EVP_MD_CTX).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace ulticode::crypto {

inline constexpr size_t kSha256Bytes = 32;
inline constexpr size_t kEd25519PublicKeyBytes = 32;
inline constexpr size_t kEd25519SignatureBytes = 64;

// SHA-256 of `data`: 32 raw bytes.
std::string Sha256(absl::string_view data);

// `n` bytes from OpenSSL's CSPRNG (RAND_bytes). Aborts when it cannot
// deliver: going on with predictable bytes would be worse than stopping.
std::string RandomBytes(size_t n);

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string HmacSha256(absl::string_view key, absl::string_view data);

// True when `a` and `b` are equal, in time that depends on their lengths
// only (for comparing MACs).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Reads a secret (password, private key) from `path`. Refuses, with
// FAILED_PRECONDITION naming the path (and the mode), a file that others may
// access or its group may write, a file its group may read unless root owns
// it and the group is one of this process's (how Kubernetes mounts a Secret
// for a pod's fsGroup), an empty file, and a file over 64 KiB. One trailing newline
// ("\n" or "\r\n") is dropped, so `echo pw > file` works.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// Writes `content` to `path` with mode 0600 (created or truncated).
absl::Status WriteSecretFile(const std::string& path, absl::string_view content);

// The key id of a public key: the first 16 hex digits of SHA-256 over its
// 32 raw bytes. Derived, so a key directory and a signer always agree.
std::string KeyIdOf(absl::string_view raw_public_key);

class VerifyKey {
 public:
  // From the 32 raw bytes of an Ed25519 public key.
  static absl::StatusOr<VerifyKey> FromRaw(absl::string_view raw);
  // From standard base64 (with or without padding) of the raw bytes.
  static absl::StatusOr<VerifyKey> FromBase64(absl::string_view b64);

  const std::string& key_id() const { return key_id_; }
  const std::string& raw() const { return raw_; }
  // True only for a valid signature of exactly `message`.
  bool Verify(absl::string_view message, absl::string_view signature) const;

 private:
  VerifyKey(std::shared_ptr<EVP_PKEY> key, std::string raw);
  std::shared_ptr<EVP_PKEY> key_;
  std::string raw_;
  std::string key_id_;
};

class SigningKey {
 public:
  // A fresh random key (tests, dev keys).
  static absl::StatusOr<SigningKey> Generate();
  // A PKCS#8 PEM private key ("openssl genpkey -algorithm ed25519").
  static absl::StatusOr<SigningKey> FromPem(absl::string_view pem);
  // ReadSecretFile + FromPem; the error names the file, never the key.
  static absl::StatusOr<SigningKey> FromFile(const std::string& path);

  const std::string& key_id() const { return public_key_.key_id(); }
  const VerifyKey& public_key() const { return public_key_; }
  // The 64-byte Ed25519 signature of `message`. INTERNAL naming the OpenSSL
  // call that failed (with OpenSSL's reason, never the key), or
  // FAILED_PRECONDITION for a moved-from key; never a short or empty
  // signature.
  absl::StatusOr<std::string> Sign(absl::string_view message) const;
  // A 32-byte secret for `label`, derived from the private key
  // (HMAC-SHA256 keyed by the Ed25519 seed): another key for another job,
  // with nothing more to store or rotate. Never the key itself.
  absl::StatusOr<std::string> DeriveSecret(absl::string_view label) const;
  // PKCS#8 PEM of the private key (for writing dev keys to a 0600 file);
  // INTERNAL when OpenSSL cannot write it.
  absl::StatusOr<std::string> PrivatePem() const;

 private:
  SigningKey(std::shared_ptr<EVP_PKEY> key, VerifyKey public_key);
  std::shared_ptr<EVP_PKEY> key_;
  VerifyKey public_key_;
};

}  // namespace ulticode::crypto
