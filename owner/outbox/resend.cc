#include "owner/outbox/resend.h"

#include "absl/status/status.h"
#include "common/base/status_macros.h"
#include "common/redis/stream_id.h"

namespace ulticode::outbox {

StreamWatch::StreamWatch(std::string stream, std::string group)
    : stream_(std::move(stream)), group_(std::move(group)) {}

absl::StatusOr<LossEvidence> StreamWatch::Look(redis::Client& redis) {
  LossEvidence out;
  absl::StatusOr<redis::StreamInfo> info = redis.XInfoStream(stream_);
  if (absl::IsNotFound(info.status())) {
    // No stream, no entry: whatever was published is gone.
    out.lost_through = kMaxStreamId;
    entries_added_.reset();
    return out;
  }
  RETURN_IF_ERROR(info.status());
  // Every id below the first entry is gone (trimmed from the head; XINFO's
  // max-deleted-entry-id counts XDEL only). An entry deleted from the
  // middle (an erasure, personal_erasure.h) is not seen here: its row is
  // PENDING again already, or the unproved sweep publishes it again once
  // Admin's group has passed it.
  out.removed_through = info->first_entry_id.has_value()
                            ? redis::PreviousStreamId(*info->first_entry_id)
                            : info->last_generated_id;
  out.newest = info->last_generated_id;
  const bool never_written = info->last_generated_id == "0-0";  // made by XGROUP ... MKSTREAM
  const bool recreated = entries_added_.has_value() && info->entries_added.has_value() &&
                         *info->entries_added < *entries_added_;
  if (never_written || recreated) {
    // Everything before its first entry went with the old stream, whatever
    // the new group acknowledged; an empty one holds nothing at all.
    out.lost_through =
        info->first_entry_id.has_value() ? out.removed_through : std::string(kMaxStreamId);
  }
  entries_added_ = info->entries_added;
  ASSIGN_OR_RETURN(std::vector<redis::GroupInfo> groups, redis.XInfoGroups(stream_));
  for (const redis::GroupInfo& g : groups) {
    if (g.name != group_) continue;
    out.acked.last_delivered = g.last_delivered_id;
    if (g.pending > 0) {
      ASSIGN_OR_RETURN(redis::PendingSummary pending, redis.XPendingSummary(stream_, group_));
      out.acked.smallest_pending = pending.smallest_id;
    }
  }
  return out;
}

bool LossEvidence::LossPossible() const {
  // Conservative: ids are not dense, so an unacknowledged gap between the
  // group's position and the first entry may have held nothing.
  if (lost_through.has_value()) return true;
  if (!removed_through.has_value()) return false;
  if (!acked.last_delivered.has_value()) return true;
  return redis::StreamIdLess(*acked.last_delivered, *removed_through) ||
         (acked.smallest_pending.has_value() &&
          !redis::StreamIdLess(*removed_through, *acked.smallest_pending));
}

void AckHistory::Record(absl::Time at, const Acked& acked) { seen_.emplace_back(at, acked); }

std::optional<Acked> AckHistory::AsOf(absl::Time cutoff) {
  // Keep the newest look at or before the cutoff and everything after it.
  while (seen_.size() >= 2 && seen_[1].first <= cutoff) seen_.pop_front();
  if (seen_.empty() || seen_.front().first > cutoff) return std::nullopt;
  return seen_.front().second;
}

}  // namespace ulticode::outbox
