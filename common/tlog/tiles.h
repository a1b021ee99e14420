// The files of a log export (docs/transparency-log.md, "Export"): hash tiles
// as c2sp.org/tlog-tiles defines them, and entry bundles of the same shape
// whose entries carry a 4-byte length (a leaf can exceed the 64 KiB of a
// C2SP entry bundle).
//  - A tile holds, for tile level L and tile index N, the hashes of tree
//    level 8L, nodes 256N .. 256N + W - 1: W = 256 for a full tile, fewer
//    for the partial tile at the right edge of a tree.
//  - Its path is "tile/<L>/<N>" (with "/.p/<W>" appended for a partial
//    tile), N written as 3-digit groups, every group but the last prefixed
//    with "x": 1234067 is "x001/x234/067".
//  - Entry bundle N holds leaves 256N .. 256N + W - 1, each as uint32
//    big-endian length || leaf, at "entries/<N>" (".p/<W>" likewise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tlog/merkle.h"

namespace ulticode::tlog {

inline constexpr int kTileHeight = 8;
inline constexpr uint64_t kTileWidth = 256;

// "x001/x234/067" for 1234067; "000" for 0.
std::string TileIndexPath(uint64_t n);

// "tile/<level>/<n>[.p/<width>]"; width 256 is a full tile.
std::string TilePath(int level, uint64_t n, uint64_t width);
// "entries/<n>[.p/<width>]".
std::string EntryBundlePath(uint64_t n, uint64_t width);

struct TileRef {
  int level = 0;
  uint64_t index = 0;
  uint64_t width = 0;  // 1..256
};
// Every tile of a tree of `size` leaves: for each tile level with nodes,
// its full tiles and the partial one, in (level, index) order.
std::vector<TileRef> TilesOf(uint64_t size);

// A tile's bytes: the hashes, concatenated.
std::string EncodeTile(const std::vector<Hash>& hashes);
// INVALID_ARGUMENT unless `bytes` is exactly `width` hashes.
absl::StatusOr<std::vector<Hash>> DecodeTile(absl::string_view bytes, uint64_t width);

std::string EncodeEntryBundle(const std::vector<std::string>& leaves);
// INVALID_ARGUMENT naming the entry that is cut short.
absl::StatusOr<std::vector<std::string>> DecodeEntryBundle(absl::string_view bytes);

}  // namespace ulticode::tlog
