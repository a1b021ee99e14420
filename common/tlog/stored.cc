#include "common/tlog/stored.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::tlog {
namespace {

uint64_t Split(uint64_t n) {
  uint64_t k = 1;
  while (k << 1 < n) k <<= 1;
  return k;
}

int Log2(uint64_t pow2) {
  int l = 0;
  while ((uint64_t{1} << l) < pow2) ++l;
  return l;
}

bool IsPow2(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// MTH of leaves [lo, hi), lo aligned to the largest power of two below the
// range's size (true of every range of the RFC recursion).
absl::StatusOr<Hash> RangeHash(uint64_t lo, uint64_t hi, const NodeReader& read) {
  const uint64_t n = hi - lo;
  if (IsPow2(n)) {
    const int level = Log2(n);
    return read(NodeId{level, lo >> level});
  }
  const uint64_t k = Split(n);
  ASSIGN_OR_RETURN(const Hash left, RangeHash(lo, lo + k, read));
  ASSIGN_OR_RETURN(const Hash right, RangeHash(lo + k, hi, read));
  return NodeHash(left, right);
}

absl::Status Path(uint64_t m, uint64_t lo, uint64_t hi, const NodeReader& read,
                  std::vector<Hash>& out) {
  if (hi - lo <= 1) return absl::OkStatus();
  const uint64_t k = Split(hi - lo);
  if (m < k) {
    RETURN_IF_ERROR(Path(m, lo, lo + k, read, out));
    ASSIGN_OR_RETURN(Hash h, RangeHash(lo + k, hi, read));
    out.push_back(h);
  } else {
    RETURN_IF_ERROR(Path(m - k, lo + k, hi, read, out));
    ASSIGN_OR_RETURN(Hash h, RangeHash(lo, lo + k, read));
    out.push_back(h);
  }
  return absl::OkStatus();
}

absl::Status Subproof(uint64_t m, uint64_t lo, uint64_t hi, bool complete, const NodeReader& read,
                      std::vector<Hash>& out) {
  const uint64_t n = hi - lo;
  if (m == n) {
    if (!complete) {
      ASSIGN_OR_RETURN(Hash h, RangeHash(lo, hi, read));
      out.push_back(h);
    }
    return absl::OkStatus();
  }
  const uint64_t k = Split(n);
  if (m <= k) {
    RETURN_IF_ERROR(Subproof(m, lo, lo + k, complete, read, out));
    ASSIGN_OR_RETURN(Hash h, RangeHash(lo + k, hi, read));
    out.push_back(h);
  } else {
    RETURN_IF_ERROR(Subproof(m - k, lo + k, hi, false, read, out));
    ASSIGN_OR_RETURN(Hash h, RangeHash(lo, lo + k, read));
    out.push_back(h);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::pair<NodeId, Hash>>> NodesToAppend(uint64_t size,
                                                                   absl::Span<const Hash> leaves,
                                                                   const NodeReader& read) {
  std::vector<std::pair<NodeId, Hash>> out;
  absl::flat_hash_map<NodeId, Hash> fresh;
  auto node = [&](const NodeId& id) -> absl::StatusOr<Hash> {
    if (auto it = fresh.find(id); it != fresh.end()) return it->second;
    return read(id);
  };
  for (size_t j = 0; j < leaves.size(); ++j) {
    const uint64_t n = size + j;
    out.emplace_back(NodeId{0, n}, leaves[j]);
    fresh[NodeId{0, n}] = leaves[j];
    // Every subtree that leaf n completes: level l ends at n when n + 1 is a
    // multiple of 2^l.
    for (int level = 1; level < 64 && ((n + 1) & ((uint64_t{1} << level) - 1)) == 0; ++level) {
      const uint64_t index = (n + 1) >> level;
      ASSIGN_OR_RETURN(const Hash left, node(NodeId{level - 1, 2 * (index - 1)}));
      ASSIGN_OR_RETURN(const Hash right, node(NodeId{level - 1, 2 * (index - 1) + 1}));
      const Hash h = NodeHash(left, right);
      out.emplace_back(NodeId{level, index - 1}, h);
      fresh[NodeId{level, index - 1}] = h;
    }
  }
  return out;
}

absl::StatusOr<Hash> StoredRoot(uint64_t size, const NodeReader& read) {
  if (size == 0) return EmptyRoot();
  return RangeHash(0, size, read);
}

absl::StatusOr<std::vector<Hash>> StoredInclusionProof(uint64_t index, uint64_t size,
                                                       const NodeReader& read) {
  if (index >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("index ", index, " is not below the tree size ", size));
  }
  std::vector<Hash> out;
  RETURN_IF_ERROR(Path(index, 0, size, read, out));
  return out;
}

absl::StatusOr<std::vector<Hash>> StoredConsistencyProof(uint64_t first, uint64_t size,
                                                         const NodeReader& read) {
  if (first == 0 || first > size) {
    return absl::InvalidArgumentError(absl::StrCat("first size ", first, " is not in 1..", size));
  }
  std::vector<Hash> out;
  RETURN_IF_ERROR(Subproof(first, 0, size, true, read, out));
  return out;
}

}  // namespace ulticode::tlog
