// Statement parameters. Values always travel as parameters ($1, $2, ...),
// never spliced into SQL text. Text format unless marked binary (bytea).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ulticode::pg {

struct Param {
  std::optional<std::string> value;  // nullopt is SQL NULL
  bool binary = false;               // binary format (use for bytea)
};

using Params = std::vector<Param>;

Param Null();
Param Text(absl::string_view v);
// Text, or NULL when `v` is empty.
Param TextOrNull(absl::string_view v);
Param Bytes(absl::string_view v);
Param Int(int64_t v);
Param Bool(bool v);
Param Time(absl::Time t);         // timestamptz, microsecond precision, UTC
Param Seconds(absl::Duration d);  // as a float number of seconds
// A text[] literal built from `items` (each quoted and escaped).
Param TextArray(const std::vector<std::string>& items);

// A named SQL statement. The name labels logs, errors and metrics; the timeout
// bounds its execution on the server (statement_timeout) and, with a small
// grace, on the client socket.
struct Statement {
  const char* name;
  const char* sql;
  absl::Duration timeout = absl::Seconds(5);
};

}  // namespace ulticode::pg
