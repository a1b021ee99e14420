#include "common/pg/params.h"

#include "absl/strings/str_cat.h"

namespace ulticode::pg {

Param Null() { return Param{std::nullopt, false}; }
Param Text(absl::string_view v) { return Param{std::string(v), false}; }
Param TextOrNull(absl::string_view v) { return v.empty() ? Null() : Text(v); }
Param Bytes(absl::string_view v) { return Param{std::string(v), true}; }
Param Int(int64_t v) { return Param{absl::StrCat(v), false}; }
Param Bool(bool v) { return Param{v ? "t" : "f", false}; }
Param Time(absl::Time t) {
  return Param{absl::FormatTime("%E4Y-%m-%d %H:%M:%E6S+00", t, absl::UTCTimeZone()), false};
}
Param Seconds(absl::Duration d) { return Param{absl::StrCat(absl::ToDoubleSeconds(d)), false}; }

Param TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return Param{std::move(out), false};
}

}  // namespace ulticode::pg
