#include "common/text/text.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ulticode::text {
namespace {

// Decodes one code point of valid-or-not UTF-8 at `s[*i]`, advancing *i.
// Returns -1 for an ill-formed sequence.
int32_t Decode(absl::string_view s, size_t* i) {
  const auto b0 = static_cast<unsigned char>(s[*i]);
  if (b0 < 0x80) {
    ++*i;
    return b0;
  }
  int len;
  int32_t cp;
  int32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return -1;
  }
  if (*i + len > s.size()) return -1;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[*i + k]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *i += len;
  return cp;
}

bool IsForbiddenControl(int32_t cp, bool multiline) {
  if (multiline && (cp == '\n' || cp == '\t')) return false;
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (Decode(s, &i) < 0) return false;
  }
  return true;
}

size_t CodePoints(absl::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

int FirstForbiddenControl(absl::string_view s, bool multiline) {
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const int32_t cp = Decode(s, &i);
    if (cp < 0) {
      i = at + 1;  // ill-formed: step over one byte
      continue;
    }
    if (IsForbiddenControl(cp, multiline)) return cp;
  }
  return -1;
}

// Characters that render as nothing or change how neighbours render, which a
// name must not hold (two names that look alike must be the same name): the
// whole Unicode 15 format category Cf (bidi controls, zero-width characters,
// tags, invisible operators, deprecated format characters, soft hyphen,
// prepended concatenation marks) and the fillers of other categories (Hangul
// fillers, combining grapheme joiner, variation selectors, Mongolian
// free variation selectors, line and paragraph separators).
bool IsInvisibleInNames(char32_t cp) {
  static constexpr std::pair<char32_t, char32_t> kRanges[] = {
      {0x00AD, 0x00AD},   {0x034F, 0x034F},   {0x0600, 0x0605},   {0x061C, 0x061C},
      {0x06DD, 0x06DD},   {0x070F, 0x070F},   {0x0890, 0x0891},   {0x08E2, 0x08E2},
      {0x115F, 0x1160},   {0x180B, 0x180F},   {0x200B, 0x200F},   {0x2028, 0x202E},
      {0x2060, 0x2064},   {0x2066, 0x206F},   {0x3164, 0x3164},   {0xFE00, 0xFE0F},
      {0xFEFF, 0xFEFF},   {0xFFA0, 0xFFA0},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},
      {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
      {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xE0100, 0xE01EF},
  };
  for (const auto& [lo, hi] : kRanges) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

absl::string_view TruncateUtf8(absl::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

absl::Status Check(absl::string_view field, absl::string_view value, const Rule& rule) {
  const size_t max_bytes = rule.max_bytes != 0 ? rule.max_bytes : 4 * rule.max_chars;
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": at most ", max_bytes, " bytes (got ", value.size(), ")"));
  }
  size_t chars = 0;
  for (size_t i = 0; i < value.size();) {
    const int32_t cp = Decode(value, &i);
    ++chars;
    if (cp < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": not valid UTF-8 at character ", chars));
    }
    if (IsForbiddenControl(cp, rule.multiline)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: control character U+%04X at character %d is not allowed%s", field,
                          cp, chars, rule.multiline ? " (only \\n and \\t are)" : ""));
    }
    if (rule.identifier && IsInvisibleInNames(static_cast<char32_t>(cp))) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: bidi or invisible character U+%04X at character %d is not allowed",
                          field, cp, chars));
    }
  }
  if (chars < rule.min_chars || chars > rule.max_chars) {
    if (rule.min_chars == 1 && chars == 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
    }
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", rule.min_chars, "..",
                                                   rule.max_chars, " characters (got ", chars,
                                                   ")"));
  }
  return absl::OkStatus();
}

}  // namespace ulticode::text
