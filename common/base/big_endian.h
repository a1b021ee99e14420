// Fixed-width big-endian integers in byte strings: the wire formats of the
// log (leaves, notes, cosignatures, tiles) and of seals.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace ulticode::base {

// Appends the low `kBytes` bytes of `v`, most significant first.
template <int kBytes>
void AppendBigEndian(uint64_t v, std::string& out) {
  static_assert(kBytes > 0 && kBytes <= 8);
  for (int i = kBytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

template <int kBytes>
std::string BigEndian(uint64_t v) {
  std::string out;
  AppendBigEndian<kBytes>(v, out);
  return out;
}

// The first `kBytes` bytes of `b` (the caller checks there are that many).
template <int kBytes>
uint64_t ReadBigEndian(absl::string_view b) {
  static_assert(kBytes > 0 && kBytes <= 8);
  uint64_t v = 0;
  for (int i = 0; i < kBytes; ++i) v = (v << 8) | static_cast<uint8_t>(b[i]);
  return v;
}

}  // namespace ulticode::base
