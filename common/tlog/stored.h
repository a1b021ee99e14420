// The tree as a log stores it: the hash of every complete subtree, each
// node written once and never changed. Node (level, index) is the hash of
// leaves [index * 2^level, (index + 1) * 2^level). Every range the RFC 9162
// recursion splits a tree into starts with such a complete, aligned
// subtree, so a root or a proof needs O(log n) nodes, read through a
// NodeReader (the log's table, or a map in tests).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tlog/merkle.h"

namespace ulticode::tlog {

struct NodeId {
  int level = 0;
  uint64_t index = 0;
  bool operator==(const NodeId&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const NodeId& n) {
    return H::combine(std::move(h), n.level, n.index);
  }
};

// Reads stored nodes; NOT_FOUND (or any error) for one that is not stored.
using NodeReader = std::function<absl::StatusOr<Hash>(const NodeId&)>;

// The nodes to store when a tree of `size` leaves grows by `leaves` (leaf
// hashes, in order): each new leaf and every subtree it completes.
absl::StatusOr<std::vector<std::pair<NodeId, Hash>>> NodesToAppend(uint64_t size,
                                                                   absl::Span<const Hash> leaves,
                                                                   const NodeReader& read);

// MTH of the tree of `size` leaves.
absl::StatusOr<Hash> StoredRoot(uint64_t size, const NodeReader& read);

// PATH and PROOF (merkle.h) computed from stored nodes.
absl::StatusOr<std::vector<Hash>> StoredInclusionProof(uint64_t index, uint64_t size,
                                                       const NodeReader& read);
absl::StatusOr<std::vector<Hash>> StoredConsistencyProof(uint64_t first, uint64_t size,
                                                         const NodeReader& read);

}  // namespace ulticode::tlog
