#include "admin/maintenance/stream_trimmer.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"

namespace ulticode::admin::maintenance {
namespace {

std::optional<std::pair<uint64_t, uint64_t>> ParseId(const std::string& id) {
  std::pair<std::string, std::string> parts = absl::StrSplit(id, absl::MaxSplits('-', 1));
  uint64_t ms = 0, seq = 0;
  if (!absl::SimpleAtoi(parts.first, &ms) || !absl::SimpleAtoi(parts.second, &seq)) {
    return std::nullopt;
  }
  return std::make_pair(ms, seq);
}

}  // namespace

bool StreamIdLess(const std::string& a, const std::string& b) {
  auto x = ParseId(a), y = ParseId(b);
  return x && y && *x < *y;
}

std::string NextStreamId(const std::string& id) {
  auto p = ParseId(id);
  if (!p) return id;
  if (p->second == UINT64_MAX) return absl::StrCat(p->first + 1, "-0");
  return absl::StrCat(p->first, "-", p->second + 1);
}

absl::StatusOr<TrimResult> TrimStream(redis::Client& redis, const std::string& stream) {
  TrimResult result;
  auto groups = redis.XInfoGroups(stream);
  if (absl::IsNotFound(groups.status())) return result;  // no stream yet
  RETURN_IF_ERROR(groups.status());
  if (groups->empty()) return result;
  std::string min_id;
  for (const redis::GroupInfo& g : *groups) {
    std::string keep_from = NextStreamId(g.last_delivered_id);
    if (g.pending > 0) {
      ASSIGN_OR_RETURN(redis::PendingSummary pending, redis.XPendingSummary(stream, g.name));
      if (pending.smallest_id && StreamIdLess(*pending.smallest_id, keep_from)) {
        keep_from = *pending.smallest_id;
      }
    }
    if (!ParseId(keep_from)) {
      return absl::InternalError(absl::StrCat("stream ", stream, " group ", g.name,
                                              ": unexpected id \"", keep_from, "\""));
    }
    if (min_id.empty() || StreamIdLess(keep_from, min_id)) min_id = keep_from;
  }
  ASSIGN_OR_RETURN(redis::Reply reply, redis.Command({"XTRIM", stream, "MINID", min_id}));
  ASSIGN_OR_RETURN(result.removed, reply.AsInteger());
  result.min_id = min_id;
  return result;
}

}  // namespace ulticode::admin::maintenance
