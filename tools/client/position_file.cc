#include "tools/client/position_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tools/client/admin_channel.h"

namespace ulticode::client {

bool LooksLikeToken(absl::string_view v) {
  if (v.empty() || v.size() > 256) return false;
  for (char c : v) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

absl::StatusOr<std::optional<std::string>> LoadPosition(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<std::string>();
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be read"));
  }
  const absl::string_view v = absl::StripAsciiWhitespace(*text);
  if (!LooksLikeToken(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a resume token: \"", v.substr(0, 64), "\""));
  }
  return std::optional<std::string>(std::string(v));
}

absl::Status SavePosition(const std::string& path, const std::string& token) {
  const std::string tmp = path + ".tmp";
  const std::string text = absl::StrCat(token, "\n");
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
