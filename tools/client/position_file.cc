#include "tools/client/position_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/client/admin_channel.h"

namespace ulticode::client {
namespace {

constexpr absl::string_view kMagic = "ulticode-position/v1";

}  // namespace

bool LooksLikeToken(absl::string_view v) {
  if (v.empty() || v.size() > 256) return false;
  for (char c : v) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

std::string PositionText(const Position& p) {
  std::string text = absl::StrCat(kMagic, "\ntoken ", p.token, "\n");
  if (p.next_index) absl::StrAppend(&text, "next ", *p.next_index, "\n");
  if (p.checkpoint) {
    absl::StrAppend(&text, "checkpoint ", absl::Base64Escape(p.checkpoint->SerializeAsString()),
                    "\n");
  }
  return text;
}

absl::StatusOr<Position> ParsePosition(absl::string_view text) {
  const absl::string_view whole = absl::StripAsciiWhitespace(text);
  Position p;
  if (LooksLikeToken(whole)) {
    p.token = std::string(whole);
    return p;
  }
  std::vector<absl::string_view> lines = absl::StrSplit(whole, '\n');
  if (lines.empty() || lines[0] != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("neither a resume token nor a position (", kMagic, ")"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", i + 1, " (", kv.first, "): ", why));
    };
    if (kv.first == "token" && p.token.empty()) {
      if (!LooksLikeToken(kv.second)) return bad("not a resume token");
      p.token = std::string(kv.second);
    } else if (kv.first == "next" && !p.next_index) {
      uint64_t n;
      if (!absl::SimpleAtoi(kv.second, &n)) return bad("not a log index");
      p.next_index = n;
    } else if (kv.first == "checkpoint" && !p.checkpoint) {
      std::string bytes;
      admin::v1::SignedCheckpoint c;
      if (!absl::Base64Unescape(kv.second, &bytes) || !c.ParseFromString(bytes)) {
        return bad("not a base64 SignedCheckpoint");
      }
      p.checkpoint = std::move(c);
    } else {
      return bad("unknown or repeated");
    }
  }
  if (p.token.empty()) return absl::InvalidArgumentError("no token line");
  if (p.checkpoint && !p.next_index)
    return absl::InvalidArgumentError("a checkpoint without its next index");
  if (p.checkpoint && *p.next_index > p.checkpoint->tree_size()) {
    return absl::InvalidArgumentError(absl::StrCat("next index ", *p.next_index,
                                                   " is beyond its checkpoint of ",
                                                   p.checkpoint->tree_size(), " leaves"));
  }
  return p;
}

absl::StatusOr<std::optional<Position>> LoadPosition(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<Position>();
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be read"));
  }
  auto position = ParsePosition(*text);
  if (!position.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", position.status().message()));
  }
  return std::optional<Position>(*std::move(position));
}

absl::Status SavePosition(const std::string& path, const Position& position) {
  return SaveFile(path, PositionText(position));
}

absl::Status SaveFile(const std::string& path, absl::string_view text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(tmp, ": cannot write"));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot replace"));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace ulticode::client
