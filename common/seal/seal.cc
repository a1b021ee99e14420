#include "common/seal/seal.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/big_endian.h"
#include "common/base/status_macros.h"

namespace ulticode::seal {
namespace {

constexpr char kDomain[] = "ulticode/bundle/v1\n";
constexpr size_t kHeaderBytes = 9;

}  // namespace

std::string SignedMessage(uint64_t size, const tlog::Hash& root) {
  std::string out(kDomain);
  base::AppendBigEndian<8>(size, out);
  out.append(reinterpret_cast<const char*>(root.data()), root.size());
  return out;
}

std::string Encode(const Seal& seal) {
  std::string out;
  out.reserve(kHeaderBytes + 32 * seal.path.size() + seal.signature.size());
  out.push_back(kSealVersion);
  base::AppendBigEndian<4>(seal.index, out);
  base::AppendBigEndian<4>(seal.size, out);
  for (const tlog::Hash& h : seal.path) out.append(reinterpret_cast<const char*>(h.data()), 32);
  out.append(seal.signature);
  return out;
}

absl::StatusOr<Seal> Decode(absl::string_view bytes) {
  const size_t sig = crypto::kEd25519SignatureBytes;
  if (bytes.size() < kHeaderBytes + sig) {
    return absl::InvalidArgumentError(
        absl::StrCat("a seal is at least ", kHeaderBytes + sig, " bytes, not ", bytes.size()));
  }
  if (bytes[0] != kSealVersion) {
    return absl::InvalidArgumentError(absl::StrCat("seal version ",
                                                   static_cast<int>(static_cast<uint8_t>(bytes[0])),
                                                   " is not ", static_cast<int>(kSealVersion)));
  }
  Seal out;
  out.index = static_cast<uint32_t>(base::ReadBigEndian<4>(bytes.substr(1)));
  out.size = static_cast<uint32_t>(base::ReadBigEndian<4>(bytes.substr(5)));
  if (out.size == 0 || out.size > kMaxBundle) {
    return absl::InvalidArgumentError(
        absl::StrCat("seal bundle size ", out.size, " is not in 1..", kMaxBundle));
  }
  if (out.index >= out.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("seal index ", out.index, " is not below its bundle size ", out.size));
  }
  const size_t hashes = tlog::InclusionProofLength(out.index, out.size);
  if (bytes.size() != kHeaderBytes + 32 * hashes + sig) {
    return absl::InvalidArgumentError(
        absl::StrCat("a seal of index ", out.index, " in a bundle of ", out.size, " is ",
                     kHeaderBytes + 32 * hashes + sig, " bytes, not ", bytes.size()));
  }
  for (size_t i = 0; i < hashes; ++i) {
    tlog::Hash h;
    std::memcpy(h.data(), bytes.data() + kHeaderBytes + 32 * i, 32);
    out.path.push_back(h);
  }
  out.signature = std::string(bytes.substr(kHeaderBytes + 32 * hashes));
  return out;
}

absl::StatusOr<std::vector<std::string>> SealBundle(const crypto::SigningKey& signer,
                                                    absl::Span<const absl::string_view> messages,
                                                    Verifier* made) {
  if (messages.empty() || messages.size() > kMaxBundle) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bundle holds 1..", kMaxBundle, " messages, not ", messages.size()));
  }
  std::vector<tlog::Hash> leaves;
  leaves.reserve(messages.size());
  for (absl::string_view m : messages) leaves.push_back(tlog::LeafHash(m));
  ASSIGN_OR_RETURN(tlog::RootAndPaths tree, tlog::AllInclusionProofs(leaves));
  const std::string signed_message = SignedMessage(messages.size(), tree.root);
  ASSIGN_OR_RETURN(std::string signature, signer.Sign(signed_message));
  if (made != nullptr) {
    made->Remember(Verifier::Digest(signer.public_key(), signed_message, signature));
  }
  std::vector<std::string> seals;
  seals.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    seals.push_back(Encode(Seal{static_cast<uint32_t>(i), static_cast<uint32_t>(messages.size()),
                                std::move(tree.paths[i]), signature}));
  }
  return seals;
}

absl::Status Verifier::Verify(const crypto::VerifyKey& key, absl::string_view message,
                              absl::string_view seal_bytes) {
  ASSIGN_OR_RETURN(const Seal seal, Decode(seal_bytes));
  ASSIGN_OR_RETURN(
      const tlog::Hash root,
      tlog::RootFromInclusion(seal.index, seal.size, tlog::LeafHash(message), seal.path));
  const std::string signed_message = SignedMessage(seal.size, root);
  std::string digest = Digest(key, signed_message, seal.signature);
  if (Known(digest)) return absl::OkStatus();
  verifications_.fetch_add(1, std::memory_order_relaxed);
  if (!key.Verify(signed_message, seal.signature)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the seal's signature does not verify with key ", key.key_id(), " over its bundle root"));
  }
  Remember(std::move(digest));
  return absl::OkStatus();
}

std::string Verifier::Digest(const crypto::VerifyKey& key, absl::string_view signed_message,
                             absl::string_view signature) {
  // What was verified: this key, this signed message (fixed length), this
  // signature (64 bytes).
  return crypto::Sha256(absl::StrCat(key.raw(), signed_message, signature));
}

bool Verifier::Known(const std::string& digest) {
  absl::MutexLock lock(&mu_);
  return known_.contains(digest);
}

void Verifier::Remember(std::string digest) {
  absl::MutexLock lock(&mu_);
  if (remembered_ == 0 || !known_.insert(digest).second) return;
  order_.push_back(std::move(digest));
  while (order_.size() > remembered_) {
    known_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace ulticode::seal
