// One signature for a bundle of messages, and a seal per message that
// proves it was in the bundle.
//
// The messages' RFC 9162 leaf hashes make a Merkle tree; the signer signs
// its root and size once; each message's seal carries its index, the
// bundle's size, its inclusion path and that signature:
//
//   seal = 0x01                       version
//          index  (4 bytes, big-endian)
//          size   (4 bytes, big-endian)   1..kMaxBundle
//          path   (32 bytes per hash)     RFC 9162 PATH(index, bundle)
//          signature (64 bytes)           Ed25519 over SignedMessage(size, root)
//
// Anyone holding the public key checks a seal alone: the path from the
// message's leaf hash gives the root, the signature must verify over it. A
// seal has exactly one encoding; decoding refuses anything else.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/crypto/crypto.h"
#include "common/tlog/merkle.h"

namespace ulticode::seal {

inline constexpr char kSealVersion = 0x01;
inline constexpr uint32_t kMaxBundle = 1u << 16;
// The longest seal: a path of 16 hashes (kMaxBundle leaves).
inline constexpr size_t kMaxSealBytes = 9 + 16 * 32 + crypto::kEd25519SignatureBytes;

struct Seal {
  uint32_t index = 0;
  uint32_t size = 0;
  std::vector<tlog::Hash> path;
  std::string signature;
  bool operator==(const Seal&) const = default;
};

// What the signature covers: "ulticode/bundle/v1\n", the size (8 bytes,
// big-endian) and the root (32 bytes).
std::string SignedMessage(uint64_t size, const tlog::Hash& root);

std::string Encode(const Seal& seal);
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<Seal> Decode(absl::string_view bytes);

class Verifier;

// The seal of each of `messages` (1..kMaxBundle of them), in order, under
// one signature of `signer`. `made`, when given, remembers that signature
// as verified: this process made it, so whoever checks these seals with the
// same Verifier (the owner's witness, its proofs) pays no verification.
absl::StatusOr<std::vector<std::string>> SealBundle(const crypto::SigningKey& signer,
                                                    absl::Span<const absl::string_view> messages,
                                                    Verifier* made = nullptr);

// Checks seals, remembering the last `remembered` bundle signatures it
// verified, so each bundle costs one Ed25519 verification and each message
// a few hashes. Thread-safe.
class Verifier {
 public:
  explicit Verifier(size_t remembered = 4096) : remembered_(remembered) {}

  // OK when `seal` shows `message` in a bundle whose root and size `key`
  // signed; INVALID_ARGUMENT for a seal that does not decode,
  // FAILED_PRECONDITION naming what does not match otherwise.
  absl::Status Verify(const crypto::VerifyKey& key, absl::string_view message,
                      absl::string_view seal);
  // Ed25519 verifications done so far (what the remembering saves).
  uint64_t verifications() const { return verifications_.load(std::memory_order_relaxed); }

 private:
  friend absl::StatusOr<std::vector<std::string>> SealBundle(const crypto::SigningKey&,
                                                             absl::Span<const absl::string_view>,
                                                             Verifier*);
  // What a verification of `signature` by `key` over `signed_message` is
  // remembered by.
  static std::string Digest(const crypto::VerifyKey& key, absl::string_view signed_message,
                            absl::string_view signature);
  bool Known(const std::string& digest);
  void Remember(std::string digest);

  const size_t remembered_;
  std::atomic<uint64_t> verifications_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> known_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ulticode::seal
