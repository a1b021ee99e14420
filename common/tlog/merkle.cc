#include "common/tlog/merkle.h"

#include <cstring>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"

namespace ulticode::tlog {
namespace {

Hash Sha256(char prefix, absl::string_view a, absl::string_view b = {}) {
  std::string input;
  input.reserve(1 + a.size() + b.size());
  input.push_back(prefix);
  input.append(a.data(), a.size());
  input.append(b.data(), b.size());
  const std::string digest = crypto::Sha256(input);
  Hash out;
  std::memcpy(out.data(), digest.data(), out.size());
  return out;
}

absl::string_view View(const Hash& h) {
  return absl::string_view(reinterpret_cast<const char*>(h.data()), h.size());
}

// The largest power of two smaller than n (n > 1).
uint64_t Split(uint64_t n) {
  uint64_t k = 1;
  while (k << 1 < n) k <<= 1;
  return k;
}

void Path(uint64_t m, absl::Span<const Hash> d, std::vector<Hash>& out) {
  if (d.size() <= 1) return;
  const uint64_t k = Split(d.size());
  if (m < k) {
    Path(m, d.subspan(0, k), out);
    out.push_back(RootOf(d.subspan(k)));
  } else {
    Path(m - k, d.subspan(k), out);
    out.push_back(RootOf(d.subspan(0, k)));
  }
}

void Subproof(uint64_t m, absl::Span<const Hash> d, bool complete, std::vector<Hash>& out) {
  const uint64_t n = d.size();
  if (m == n) {
    if (!complete) out.push_back(RootOf(d));
    return;
  }
  const uint64_t k = Split(n);
  if (m <= k) {
    Subproof(m, d.subspan(0, k), complete, out);
    out.push_back(RootOf(d.subspan(k)));
  } else {
    Subproof(m - k, d.subspan(k), false, out);
    out.push_back(RootOf(d.subspan(0, k)));
  }
}

// MTH(d[lo, hi)); appends to paths[i], for every i in [lo, hi), the
// sibling at each level above the leaf, deepest first (RFC 9162 PATH).
Hash BuildPaths(absl::Span<const Hash> d, size_t lo, size_t hi,
                std::vector<std::vector<Hash>>& paths) {
  if (hi - lo == 1) return d[lo];
  const size_t k = Split(hi - lo);
  const Hash left = BuildPaths(d, lo, lo + k, paths);
  const Hash right = BuildPaths(d, lo + k, hi, paths);
  for (size_t i = lo; i < lo + k; ++i) paths[i].push_back(right);
  for (size_t i = lo + k; i < hi; ++i) paths[i].push_back(left);
  return NodeHash(left, right);
}

absl::Status Mismatch(absl::string_view what) {
  return absl::FailedPreconditionError(std::string(what));
}

}  // namespace

Hash LeafHash(absl::string_view leaf) { return Sha256(0x00, leaf); }

Hash NodeHash(const Hash& left, const Hash& right) { return Sha256(0x01, View(left), View(right)); }

Hash EmptyRoot() {
  const std::string digest = crypto::Sha256("");
  Hash out;
  std::memcpy(out.data(), digest.data(), out.size());
  return out;
}

Hash RootOf(absl::Span<const Hash> leaves) {
  if (leaves.empty()) return EmptyRoot();
  if (leaves.size() == 1) return leaves[0];
  const uint64_t k = Split(leaves.size());
  return NodeHash(RootOf(leaves.subspan(0, k)), RootOf(leaves.subspan(k)));
}

absl::StatusOr<std::vector<Hash>> InclusionProof(uint64_t index, absl::Span<const Hash> leaves) {
  if (index >= leaves.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("index ", index, " is not below the tree size ", leaves.size()));
  }
  std::vector<Hash> out;
  Path(index, leaves, out);
  return out;
}

absl::StatusOr<RootAndPaths> AllInclusionProofs(absl::Span<const Hash> leaves) {
  if (leaves.empty()) return absl::InvalidArgumentError("no leaves to prove");
  RootAndPaths out;
  out.paths.resize(leaves.size());
  out.root = BuildPaths(leaves, 0, leaves.size(), out.paths);
  return out;
}

absl::StatusOr<std::vector<Hash>> ConsistencyProof(uint64_t m, absl::Span<const Hash> leaves) {
  if (m == 0 || m > leaves.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("first size ", m, " is not in 1..", leaves.size()));
  }
  std::vector<Hash> out;
  Subproof(m, leaves, true, out);
  return out;
}

size_t InclusionProofLength(uint64_t index, uint64_t size) {
  size_t n = 0;
  for (uint64_t fn = index, sn = size - 1; sn != 0; fn >>= 1, sn >>= 1, ++n) {
    if ((fn & 1) == 1 || fn == sn) {
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    }
  }
  return n;
}

absl::StatusOr<Hash> RootFromInclusion(uint64_t index, uint64_t size, const Hash& leaf,
                                       absl::Span<const Hash> proof) {
  if (index >= size) return Mismatch(absl::StrCat("index ", index, " is not below size ", size));
  uint64_t fn = index, sn = size - 1;
  Hash r = leaf;
  for (const Hash& p : proof) {
    if (sn == 0) return Mismatch("inclusion proof longer than the tree");
    if ((fn & 1) == 1 || fn == sn) {
      r = NodeHash(p, r);
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      r = NodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return Mismatch("inclusion proof shorter than the tree");
  return r;
}

namespace {

// The subtrees [lo, hi) whose hashes PATH(index, D[0:size]) holds, in its
// order (the leaf's sibling first).
std::vector<std::pair<uint64_t, uint64_t>> PathSubtrees(uint64_t index, uint64_t size) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (uint64_t lo = 0, hi = size; hi - lo > 1;) {
    const uint64_t mid = lo + Split(hi - lo);
    if (index < mid) {
      out.emplace_back(mid, hi);
      hi = mid;
    } else {
      out.emplace_back(lo, mid);
      lo = mid;
    }
  }
  return {out.rbegin(), out.rend()};
}

}  // namespace

absl::StatusOr<Hash> RootFromRange(uint64_t first, uint64_t size, absl::Span<const Hash> leaves,
                                   absl::Span<const Hash> first_proof,
                                   absl::Span<const Hash> last_proof) {
  const uint64_t end = first + leaves.size();
  if (leaves.empty() || end > size || end < first) {
    return Mismatch(absl::StrCat("leaves ", first, " .. ", end, " are not in a tree of ", size));
  }
  // Subtree [lo, hi) -> its hash, from the two proofs.
  std::map<std::pair<uint64_t, uint64_t>, Hash> outside;
  for (const auto& [index, proof] :
       {std::pair{first, first_proof}, std::pair{end - 1, last_proof}}) {
    const auto subtrees = PathSubtrees(index, size);
    if (subtrees.size() != proof.size()) {
      return Mismatch(absl::StrCat("the inclusion proof of leaf ", index, " has ", proof.size(),
                                   " hashes; a tree of ", size, " needs ", subtrees.size()));
    }
    for (size_t i = 0; i < proof.size(); ++i) {
      const auto [it, added] = outside.emplace(subtrees[i], proof[i]);
      if (!added && it->second != proof[i]) {
        return Mismatch(absl::StrCat("the two inclusion proofs disagree on leaves ",
                                     subtrees[i].first, " .. ", subtrees[i].second));
      }
    }
  }
  std::function<absl::StatusOr<Hash>(uint64_t, uint64_t)> root =
      [&](uint64_t lo, uint64_t hi) -> absl::StatusOr<Hash> {
    if (hi <= first || lo >= end) {
      const auto it = outside.find({lo, hi});
      if (it == outside.end()) return Mismatch("the proofs lack a subtree outside the range");
      return it->second;
    }
    if (hi - lo == 1) return leaves[lo - first];
    const uint64_t mid = lo + Split(hi - lo);
    absl::StatusOr<Hash> left = root(lo, mid);
    if (!left.ok()) return left.status();
    absl::StatusOr<Hash> right = root(mid, hi);
    if (!right.ok()) return right.status();
    return NodeHash(*left, *right);
  };
  return root(0, size);
}

absl::Status VerifyInclusion(uint64_t index, uint64_t size, const Hash& leaf,
                             absl::Span<const Hash> proof, const Hash& root) {
  absl::StatusOr<Hash> r = RootFromInclusion(index, size, leaf, proof);
  if (!r.ok()) return r.status();
  if (*r != root) return Mismatch("inclusion proof does not lead to the root");
  return absl::OkStatus();
}

absl::Status VerifyConsistency(uint64_t first, uint64_t second, const Hash& first_root,
                               const Hash& second_root, absl::Span<const Hash> proof) {
  if (first > second) return Mismatch(absl::StrCat("first size ", first, " > second ", second));
  if (first == second) {
    if (!proof.empty()) return Mismatch("a proof between equal sizes must be empty");
    if (first_root != second_root) return Mismatch("equal sizes with different roots");
    return absl::OkStatus();
  }
  if (first == 0) {
    if (!proof.empty()) return Mismatch("a proof from the empty tree must be empty");
    return absl::OkStatus();
  }
  std::vector<Hash> path(proof.begin(), proof.end());
  if ((first & (first - 1)) == 0) path.insert(path.begin(), first_root);
  if (path.empty()) return Mismatch("consistency proof is empty");
  uint64_t fn = first - 1, sn = second - 1;
  while ((fn & 1) == 1) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return Mismatch("consistency proof longer than the tree");
    if ((fn & 1) == 1 || fn == sn) {
      fr = NodeHash(c, fr);
      sr = NodeHash(c, sr);
      while ((fn & 1) == 0 && fn != 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else {
      sr = NodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return Mismatch("consistency proof shorter than the tree");
  if (fr != first_root) return Mismatch("consistency proof does not lead to the first root");
  if (sr != second_root) return Mismatch("consistency proof does not lead to the second root");
  return absl::OkStatus();
}

std::string ToBytes(const Hash& h) { return std::string(View(h)); }

absl::StatusOr<Hash> FromBytes(absl::string_view bytes) {
  if (bytes.size() != 32) {
    return absl::InvalidArgumentError(absl::StrCat("a hash is 32 bytes, not ", bytes.size()));
  }
  Hash h;
  std::memcpy(h.data(), bytes.data(), 32);
  return h;
}

}  // namespace ulticode::tlog
