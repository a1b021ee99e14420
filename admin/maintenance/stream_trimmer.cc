#include "admin/maintenance/stream_trimmer.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/redis/stream_id.h"

namespace ulticode::admin::maintenance {

absl::StatusOr<TrimResult> TrimStream(redis::Client& redis, const std::string& stream) {
  TrimResult result;
  auto groups = redis.XInfoGroups(stream);
  if (absl::IsNotFound(groups.status())) return result;  // no stream yet
  RETURN_IF_ERROR(groups.status());
  if (groups->empty()) return result;
  std::string min_id;
  for (const redis::GroupInfo& g : *groups) {
    std::string keep_from = redis::NextStreamId(g.last_delivered_id);
    if (g.pending > 0) {
      ASSIGN_OR_RETURN(redis::PendingSummary pending, redis.XPendingSummary(stream, g.name));
      if (pending.smallest_id && redis::StreamIdLess(*pending.smallest_id, keep_from)) {
        keep_from = *pending.smallest_id;
      }
    }
    if (!redis::ParseStreamId(keep_from)) {
      return absl::InternalError(absl::StrCat("stream ", stream, " group ", g.name,
                                              ": unexpected id \"", keep_from, "\""));
    }
    if (min_id.empty() || redis::StreamIdLess(keep_from, min_id)) min_id = keep_from;
  }
  ASSIGN_OR_RETURN(redis::Reply reply, redis.Command({"XTRIM", stream, "MINID", min_id}));
  ASSIGN_OR_RETURN(result.removed, reply.AsInteger());
  result.min_id = min_id;
  return result;
}

}  // namespace ulticode::admin::maintenance
