#include "common/log/log.h"

#include <atomic>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ulticode::log {
namespace {

std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};
absl::Mutex g_write_mu;

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void SetMinLevel(Level level) { g_min_level.store(static_cast<int>(level)); }

absl::Status ParseLevel(absl::string_view text, Level* out) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "debug")
    *out = Level::kDebug;
  else if (lower == "info")
    *out = Level::kInfo;
  else if (lower == "warn" || lower == "warning")
    *out = Level::kWarn;
  else if (lower == "error")
    *out = Level::kError;
  else
    return absl::InvalidArgumentError(
        absl::StrCat("log level must be one of debug, info, warn, error; got \"", text, "\""));
  return absl::OkStatus();
}

std::string JsonEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

void Write(Level level, absl::string_view component, absl::string_view message,
           const Fields& fields) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  std::string line = absl::StrCat(
      "{\"time\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()),
      "\",\"level\":\"", LevelName(level), "\",\"component\":\"", JsonEscape(component),
      "\",\"message\":\"", JsonEscape(message), "\"");
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&line, ",\"", JsonEscape(key), "\":\"", JsonEscape(value), "\"");
  }
  line += "}\n";
  absl::MutexLock lock(&g_write_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace ulticode::log
