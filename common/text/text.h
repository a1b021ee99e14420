// One validation layer for every client string that reaches a business row
// or an audit event. PostgreSQL text cannot hold NUL, jsonb cannot hold
// \u0000, libpq text parameters are C strings, and a control or bidi-override
// character in a record can hide or disguise what happened. So every string
// is checked here, before anything is written, against a rule that names its
// field: INVALID_ARGUMENT "<field>: <what is wrong>" and nothing is written.
//
// Pure logic, no I/O. Thread-safe.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ulticode::text {

struct Rule {
  size_t min_chars = 0;    // code points
  size_t max_chars = 256;  // code points
  size_t max_bytes = 0;    // 0: 4 x max_chars (the UTF-8 worst case)
  // Documented multi-line text may keep "\n" and "\t" (never "\r", which
  // can overwrite a line on a terminal).
  bool multiline = false;
  // Identifiers, names, emails and anything matched or shown as a key: no
  // character of the format category Cf (bidi controls, zero-width
  // characters, tags, invisible operators) and no filler that renders as
  // nothing (IsInvisibleInNames).
  bool identifier = false;
};

// OK or INVALID_ARGUMENT "<field>: ..." naming the first problem and, for a
// bad character, its code point and position ("at character 3").
absl::Status Check(absl::string_view field, absl::string_view value, const Rule& rule);

// Well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
bool IsValidUtf8(absl::string_view s);

// Code points of valid UTF-8.
size_t CodePoints(absl::string_view s);

// The first code point that no stored string may hold: NUL, C0 (but "\n"
// and "\t" when `multiline`), DEL and C1. -1 when there is none.
// Ill-formed bytes are skipped (Check reports them).
int FirstForbiddenControl(absl::string_view s, bool multiline);

// True for what a name must not hold (see Rule): every format (Cf)
// character and the fillers that render as nothing.
bool IsInvisibleInNames(char32_t cp);

// Cuts `s` (valid UTF-8) to at most `max_bytes` without splitting a code
// point.
absl::string_view TruncateUtf8(absl::string_view s, size_t max_bytes);

}  // namespace ulticode::text
