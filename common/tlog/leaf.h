// The leaf of the audit log (docs/transparency-log.md, "Leaf"): what one
// audit_logs row proves, in a versioned canonical encoding that anyone can
// re-implement.
//
//   leaf = 0x01                      version
//          field(owner)              "auth", "app" or "admin"
//          field(event_id)           lowercase hyphenated UUID
//          field(key_id)             the signing key's id
//          field(seal)               the envelope's seal (common/seal/seal.h):
//                                    its path to a bundle root the key signed
//          field(envelope)           the sealed envelope bytes, verbatim
//   field(x) = 4-byte big-endian length of x, then x
//
// One row has exactly one encoding; decoding refuses anything else
// (another version, a short or long field, bytes after the last field).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ulticode::tlog {

inline constexpr char kLeafVersion = 0x01;
// Bounds on a decoded leaf: an envelope is at most 256 KiB (the contract).
inline constexpr size_t kMaxLeafFieldBytes = 256 * 1024;

struct LeafV1 {
  std::string owner;
  std::string event_id;
  std::string key_id;
  std::string seal;
  std::string envelope;
  bool operator==(const LeafV1&) const = default;
};

std::string EncodeLeaf(const LeafV1& leaf);
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<LeafV1> DecodeLeaf(absl::string_view bytes);

}  // namespace ulticode::tlog
