// Structured logging: one JSON object per line on stderr.
//
//   ulticode::log::Info("dispatcher", "published batch", {{"count", "50"}});
//
// Every line carries time (RFC 3339, UTC), level, component and message, plus
// the extra fields given (request_id, event_id, ...). Thread-safe; lines from
// different threads never interleave.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ulticode::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using Field = std::pair<std::string, std::string>;
using Fields = std::vector<Field>;

// Lines below `level` are dropped. Default kInfo.
void SetMinLevel(Level level);
// Parses "debug" / "info" / "warn" / "error".
absl::Status ParseLevel(absl::string_view text, Level* out);

void Write(Level level, absl::string_view component, absl::string_view message,
           const Fields& fields = {});

inline void Debug(absl::string_view c, absl::string_view m, const Fields& f = {}) {
  Write(Level::kDebug, c, m, f);
}
inline void Info(absl::string_view c, absl::string_view m, const Fields& f = {}) {
  Write(Level::kInfo, c, m, f);
}
inline void Warn(absl::string_view c, absl::string_view m, const Fields& f = {}) {
  Write(Level::kWarn, c, m, f);
}
inline void Error(absl::string_view c, absl::string_view m, const Fields& f = {}) {
  Write(Level::kError, c, m, f);
}

// Escapes `s` as the inside of a JSON string (no surrounding quotes).
std::string JsonEscape(absl::string_view s);

}  // namespace ulticode::log
