#include "common/tlog/tiles.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/big_endian.h"

namespace ulticode::tlog {

std::string TileIndexPath(uint64_t n) {
  std::string path = absl::StrFormat("%03d", n % 1000);
  for (n /= 1000; n > 0; n /= 1000) path = absl::StrFormat("x%03d/", n % 1000) + path;
  return path;
}

namespace {
std::string Partial(uint64_t width) {
  return width == kTileWidth ? "" : absl::StrCat(".p/", width);
}
}  // namespace

std::string TilePath(int level, uint64_t n, uint64_t width) {
  return absl::StrCat("tile/", level, "/", TileIndexPath(n), Partial(width));
}

std::string EntryBundlePath(uint64_t n, uint64_t width) {
  return absl::StrCat("entries/", TileIndexPath(n), Partial(width));
}

std::vector<TileRef> TilesOf(uint64_t size) {
  std::vector<TileRef> tiles;
  for (int level = 0; (size >> (kTileHeight * level)) > 0; ++level) {
    const uint64_t nodes = size >> (kTileHeight * level);
    for (uint64_t n = 0; n * kTileWidth < nodes; ++n) {
      tiles.push_back({level, n, std::min(kTileWidth, nodes - n * kTileWidth)});
    }
  }
  return tiles;
}

std::string EncodeTile(const std::vector<Hash>& hashes) {
  std::string bytes;
  for (const Hash& h : hashes) bytes += ToBytes(h);
  return bytes;
}

absl::StatusOr<std::vector<Hash>> DecodeTile(absl::string_view bytes, uint64_t width) {
  if (bytes.size() != width * 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("a tile of width ", width, " has ", width * 32, " bytes, not ", bytes.size()));
  }
  std::vector<Hash> hashes;
  for (uint64_t i = 0; i < width; ++i) {
    hashes.push_back(*FromBytes(bytes.substr(i * 32, 32)));
  }
  return hashes;
}

std::string EncodeEntryBundle(const std::vector<std::string>& leaves) {
  std::string bytes;
  for (const std::string& leaf : leaves) {
    base::AppendBigEndian<4>(static_cast<uint32_t>(leaf.size()), bytes);
    bytes += leaf;
  }
  return bytes;
}

absl::StatusOr<std::vector<std::string>> DecodeEntryBundle(absl::string_view bytes) {
  std::vector<std::string> leaves;
  while (!bytes.empty()) {
    if (bytes.size() < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", leaves.size(), " of the bundle: its length is cut short"));
    }
    const uint64_t n = base::ReadBigEndian<4>(bytes);
    bytes.remove_prefix(4);
    if (bytes.size() < n) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", leaves.size(), " of the bundle has ",
                                                     n, " bytes but only ", bytes.size(),
                                                     " follow"));
    }
    leaves.emplace_back(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return leaves;
}

}  // namespace ulticode::tlog
