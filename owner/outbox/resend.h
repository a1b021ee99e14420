// Re-send only on evidence of loss (docs/life-of-an-event.md, "Re-sends").
//
// An outbox row stays PUBLISHED until a proof that its event is in Admin's
// log confirms it. Between the two, the owner looks at its own stream and at
// Admin's consumer group on it (XINFO STREAM, XINFO GROUPS, XPENDING) and
// publishes a row again only when
//  - its entry is gone unread: below the stream's first entry (trimmed by
//    Admin's stream guard) and not acknowledged by the group;
//  - the stream lost its data: it is missing, was re-created empty (by
//    Admin's XGROUP CREATE ... MKSTREAM) or re-created since the previous
//    look (its entries-added went down), so every entry published before is
//    gone;
//  - its entry was acknowledged at least `resend_timeout` ago, or is above
//    the stream's last generated id (written to another incarnation of the
//    stream, whose clock was ahead), and it is still unproved after the
//    resend timeout (Admin refused it, or a proof was lost), with the wait
//    doubling on each re-send.
// An entry that is in the stream and not yet read (Admin is down or behind)
// is never published again: the drain after an outage reads each event once.
// Only rows published before the sweep began to look count as lost (a row
// published since may be in a stream the look did not see), and a look at a
// lost stream forgets what its group had acknowledged.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/redis/redis_client.h"

namespace ulticode::outbox {

// The entries Admin's group has acknowledged: at or below `last_delivered`
// and below `smallest_pending`. Nothing when `last_delivered` is empty (no
// group).
struct Acked {
  std::optional<std::string> last_delivered;
  std::optional<std::string> smallest_pending;
};

// What the owner may conclude from one look at its stream.
struct LossEvidence {
  // Every entry at or below was published before the stream lost its data.
  std::optional<std::string> lost_through;
  // Entries at or below are no longer in the stream (trimmed); those not
  // acknowledged were removed unread.
  std::optional<std::string> removed_through;
  // The stream's last generated id: an entry above it was written to
  // another incarnation of the stream (a Redis whose clock was ahead).
  std::optional<std::string> newest;
  Acked acked;  // now

  // Whether any entry can have been lost: the stream lost its data, or an
  // entry was removed that the group had not acknowledged.
  bool LossPossible() const;
};

// The largest stream id: "everything".
inline constexpr char kMaxStreamId[] = "18446744073709551615-18446744073709551615";

// One look at the owner's stream and Admin's group on it, compared with the
// previous look (kept by the caller, one per sweeping thread).
class StreamWatch {
 public:
  StreamWatch(std::string stream, std::string group);

  // PERMISSION_DENIED when the owner's Redis login may not look (an ACL of
  // a previous release).
  absl::StatusOr<LossEvidence> Look(redis::Client& redis);

 private:
  const std::string stream_, group_;
  std::optional<int64_t> entries_added_;  // at the previous look
};

// What Admin had acknowledged at least `age` ago: remembered from earlier
// looks (none until one is that old).
class AckHistory {
 public:
  void Record(absl::Time at, const Acked& acked);
  void Clear() { seen_.clear(); }
  std::optional<Acked> AsOf(absl::Time cutoff);

 private:
  std::deque<std::pair<absl::Time, Acked>> seen_;
};

}  // namespace ulticode::outbox
