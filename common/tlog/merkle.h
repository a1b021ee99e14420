// RFC 9162 (RFC 6962) Merkle tree hashing, proofs and their verification:
// leaf hash SHA-256(0x00 || leaf), node hash SHA-256(0x01 || left || right),
// MTH, PATH (inclusion) and PROOF (consistency) as RFC 9162 sections 2.1.1,
// 2.1.3 and 2.1.4 define them. The proof builders here work on the list of
// leaf hashes in memory (tests, small logs, the offline verifier); a stored
// log computes the same proofs from stored subtree hashes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ulticode::tlog {

using Hash = std::array<uint8_t, 32>;

Hash LeafHash(absl::string_view leaf);
Hash NodeHash(const Hash& left, const Hash& right);
// MTH of the empty tree: SHA-256 of the empty string.
Hash EmptyRoot();

// MTH(D[0:n]) of `leaves` (leaf hashes).
Hash RootOf(absl::Span<const Hash> leaves);

// PATH(index, D[0:n]): INVALID_ARGUMENT unless index < n.
absl::StatusOr<std::vector<Hash>> InclusionProof(uint64_t index, absl::Span<const Hash> leaves);

// PROOF(m, D[0:n]): INVALID_ARGUMENT unless 0 < m <= n.
absl::StatusOr<std::vector<Hash>> ConsistencyProof(uint64_t m, absl::Span<const Hash> leaves);

// MTH(D[0:n]) and PATH(i, D[0:n]) for every i < n at once (n - 1 node
// hashes: what sealing a bundle needs). INVALID_ARGUMENT for no leaves.
struct RootAndPaths {
  Hash root;
  std::vector<std::vector<Hash>> paths;
};
absl::StatusOr<RootAndPaths> AllInclusionProofs(absl::Span<const Hash> leaves);

// The number of hashes in PATH(index, D[0:size]) (index < size).
size_t InclusionProofLength(uint64_t index, uint64_t size);

// The root that `proof` leads to from the leaf with hash `leaf` at `index`
// in a tree of `size` leaves (RFC 9162 2.1.3.2 without the comparison);
// FAILED_PRECONDITION when the proof's length does not fit the tree.
absl::StatusOr<Hash> RootFromInclusion(uint64_t index, uint64_t size, const Hash& leaf,
                                       absl::Span<const Hash> proof);

// The root that the consecutive leaves `leaves` (hashes) at indexes
// first .. first + leaves.size() - 1 lead to in a tree of `size` leaves,
// given PATH of the first of them (`first_proof`) and of the last
// (`last_proof`): every subtree outside the range is a sibling on one of
// those two paths, every subtree inside it is computed from the leaves.
// Equal to the tree's root, it proves every leaf of the range at once.
// FAILED_PRECONDITION when the range is not in the tree or a proof does
// not fit it.
absl::StatusOr<Hash> RootFromRange(uint64_t first, uint64_t size, absl::Span<const Hash> leaves,
                                   absl::Span<const Hash> first_proof,
                                   absl::Span<const Hash> last_proof);

// RFC 9162 2.1.3.2: OK when `proof` shows the leaf with hash `leaf` at
// `index` in the tree of `size` leaves whose root is `root`; otherwise
// FAILED_PRECONDITION saying what does not match.
absl::Status VerifyInclusion(uint64_t index, uint64_t size, const Hash& leaf,
                             absl::Span<const Hash> proof, const Hash& root);

// RFC 9162 2.1.4.2: OK when `proof` shows the tree of `first` leaves with
// root `first_root` is a prefix of the tree of `second` leaves with root
// `second_root`; otherwise FAILED_PRECONDITION.
absl::Status VerifyConsistency(uint64_t first, uint64_t second, const Hash& first_root,
                               const Hash& second_root, absl::Span<const Hash> proof);

std::string ToBytes(const Hash& h);
absl::StatusOr<Hash> FromBytes(absl::string_view bytes);

}  // namespace ulticode::tlog
