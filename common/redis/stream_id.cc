#include "common/redis/stream_id.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ulticode::redis {

std::optional<std::pair<uint64_t, uint64_t>> ParseStreamId(absl::string_view id) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(id, absl::MaxSplits('-', 1));
  uint64_t ms = 0, seq = 0;
  if (!absl::SimpleAtoi(parts.first, &ms) || !absl::SimpleAtoi(parts.second, &seq)) {
    return std::nullopt;
  }
  return std::make_pair(ms, seq);
}

bool StreamIdLess(absl::string_view a, absl::string_view b) {
  auto x = ParseStreamId(a), y = ParseStreamId(b);
  return x && y && *x < *y;
}

std::string NextStreamId(absl::string_view id) {
  auto p = ParseStreamId(id);
  if (!p) return std::string(id);
  if (p->second == UINT64_MAX) return absl::StrCat(p->first + 1, "-0");
  return absl::StrCat(p->first, "-", p->second + 1);
}

std::string PreviousStreamId(absl::string_view id) {
  auto p = ParseStreamId(id);
  if (!p) return std::string(id);
  if (p->second > 0) return absl::StrCat(p->first, "-", p->second - 1);
  if (p->first == 0) return "0-0";
  return absl::StrCat(p->first - 1, "-", UINT64_MAX);
}

}  // namespace ulticode::redis
