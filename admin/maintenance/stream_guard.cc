#include "admin/maintenance/stream_guard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/tlog/witnessing.h"

namespace ulticode::admin::maintenance {
namespace {

constexpr char kComponent[] = "admin.stream_guard";

}  // namespace

StreamGuard::StreamGuard(const std::vector<std::pair<audit::Owner, std::string>>& streams,
                         int64_t owner_stream_bytes, int64_t proof_stream_bytes,
                         redis::Options redis, prometheus::Registry& registry)
    : redis_(std::move(redis)),
      over_(&prometheus::BuildCounter()
                 .Name("ulticode_stream_over_share_total")
                 .Help("Times a stream an owner writes was found over its share of Redis's "
                       "memory and cut back")
                 .Register(registry)),
      removed_(&prometheus::BuildCounter()
                    .Name("ulticode_stream_over_share_removed_entries_total")
                    .Help("Oldest entries removed from a stream over its share (the owner "
                          "publishes its own again)")
                    .Register(registry)) {
  for (const auto& [owner, stream] : streams) {
    guarded_.push_back({stream, owner_stream_bytes});
    guarded_.push_back({tlog::CosignatureStreamFor(stream), kCosignatureStreamBytes});
    guarded_.push_back({tlog::ProofStreamFor(stream), proof_stream_bytes});
  }
  for (const Guarded& g : guarded_) {
    over_->Add({{"stream", g.key}});
    removed_->Add({{"stream", g.key}});
  }
}

absl::Status StreamGuard::RunOnce() {
  absl::Status first;
  for (const Guarded& g : guarded_) {
    if (absl::Status s = Hold(g); !s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status StreamGuard::Hold(const Guarded& g) {
  // Every node counted (SAMPLES 0): a sample is taken from the stream's
  // head, so small honest entries there would hide large ones behind them.
  // Each node's size is in its header: the cost is one step per node.
  ASSIGN_OR_RETURN(redis::Reply usage, redis_.Command({"MEMORY", "USAGE", g.key, "SAMPLES", "0"}));
  const int64_t bytes = usage.integer();  // nil (no such key): 0
  if (bytes <= g.share) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t entries, redis_.XLen(g.key));
  // Keep what fits in 90 % of the share at the stream's mean entry size.
  const int64_t keep =
      static_cast<int64_t>(static_cast<double>(entries) * 0.9 * static_cast<double>(g.share) /
                           static_cast<double>(bytes));
  ASSIGN_OR_RETURN(
      redis::Reply removed,
      redis_.Command({"XTRIM", g.key, "MAXLEN", absl::StrCat(std::max<int64_t>(0, keep))}));
  over_->Add({{"stream", g.key}}).Increment();
  removed_->Add({{"stream", g.key}}).Increment(static_cast<double>(removed.integer()));
  log::Warn(kComponent, "a stream was over its share of Redis's memory; its oldest entries removed",
            {{"stream", g.key},
             {"bytes", absl::StrCat(bytes)},
             {"share", absl::StrCat(g.share)},
             {"removed", absl::StrCat(removed.integer())}});
  return absl::OkStatus();
}

}  // namespace ulticode::admin::maintenance
