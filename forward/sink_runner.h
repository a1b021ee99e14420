// One sink of ulticode-forward (docs/forwarding.md): its own follower of
// the log (verified: a row the log does not prove is never forwarded), its
// batches, its position and its poison file. The position (the resume
// token after the last row the destination took) is saved durably after
// each delivered batch and before the next is sent, so a restart resumes
// with no gap and repeats at most the batch that was in flight. A
// destination that is down makes this sink wait (retries with back-off),
// not the other sinks and not Admin.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/export/row_text.h"
#include "forward/destination.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "tools/client/follower.h"

namespace ulticode::forward {

struct SinkOptions {
  std::string name;
  exports::Format schema = exports::Format::kJsonl;
  size_t max_batch_rows = 100;
  size_t max_batch_bytes = 1 << 20;
  // A partial batch goes out once its first row waited this long.
  absl::Duration linger = absl::Seconds(1);
  std::string state_dir;  // <name>.position, <name>.poison.jsonl
  // The follower: where Admin is, the sink's filter, the verification
  // policy, where to start without a position (from_beginning or the head).
  client::FollowOptions follow;
};

class SinkRunner {
 public:
  SinkRunner(SinkOptions options, std::unique_ptr<Destination> destination,
             prometheus::Registry& registry);

  // Follows and delivers until Stop() (OK) or a break in the log (DATA_LOSS,
  // naming it) or an end a retry cannot fix; then the sink stays stopped.
  absl::Status Run();
  void Stop();

 private:
  absl::StatusOr<bool> Take(const admin::v1::WatchedAuditLog& row);
  void Passed(const std::string& token);
  void Progress(const admin::v1::WatchProgress& progress);
  // Delivers the batch (retrying while it can help); false when stopped.
  bool Flush();
  // Delivers `rows` whole, retrying; INVALID_ARGUMENT when refused for good.
  absl::Status DeliverRetrying(absl::Span<const Row> rows);
  void Poison(const Row& row, const absl::Status& why);
  void Save(const std::string& token);

  const SinkOptions options_;
  const std::unique_ptr<Destination> destination_;
  std::unique_ptr<client::Follower> follower_;
  std::vector<Row> batch_;
  size_t batch_bytes_ = 0;
  absl::Time batch_started_;
  std::atomic<bool> stopping_{false};
  uint64_t log_size_ = 0;
  std::optional<uint64_t> delivered_;  // the last log index delivered
  std::string last_saved_;

  prometheus::Counter& rows_delivered_;
  prometheus::Counter& batches_delivered_;
  prometheus::Counter& failures_;
  prometheus::Counter& poisoned_;
  prometheus::Gauge& position_;
  prometheus::Gauge& lag_;
  prometheus::Gauge& up_;
  prometheus::Histogram& delivery_seconds_;
};

}  // namespace ulticode::forward
