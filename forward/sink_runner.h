// One sink of ulticode-forward (docs/forwarding.md): its own follower of
// the log (verified: a row the log does not prove is never forwarded) on
// one thread, and on another its batches (full by rows or bytes, or sent
// once their first row waited `linger`), its position and its poison
// file. The position (the place in the log after the last row the
// destination took: Admin's resume token, the next log index and the
// checkpoint that proved the rows before it) is saved durably after each
// delivered batch and before the next is sent, so a restart resumes with no gap and repeats at most
// the batch that was in flight. A destination that is down makes this sink wait (retries with
// back-off), not the other sinks and not Admin.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
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
  // Rows refused for good one after another beyond this are no longer bad
  // rows but a destination that refuses the sink (its format, a proxy): the
  // sink stops before the next one, as a configuration error.
  int max_poisoned_in_a_row = 10;
  // The follower: where Admin is, the sink's filter, the verification
  // policy, where to start without a position (from_beginning or the head).
  client::FollowOptions follow;
};

class SinkRunner {
 public:
  SinkRunner(SinkOptions options, std::unique_ptr<Destination> destination,
             prometheus::Registry& registry);
  ~SinkRunner();

  // Follows and delivers until Stop() (OK) or a break in the log (DATA_LOSS,
  // naming it; the proved rows before it are delivered first) or an end a
  // retry cannot fix; then the sink stays stopped.
  absl::Status Run();
  // From any thread.
  void Stop();

 private:
  // What the follower hands the delivery thread, in log order: a row, or
  // a position past leaves the filter did not match.
  struct Item {
    std::optional<Row> row;
    client::Position position;  // without a row: the position to save
  };

  // The follower's side (its thread).
  absl::StatusOr<bool> Take(const admin::v1::WatchedAuditLog& row, const client::Position& after);
  void Passed(const client::Position& position);
  void Push(Item item);

  // The delivery thread: batches by rows, bytes and linger; delivers; saves
  // the position.
  void Deliver();
  // Waits for the next batch to send (or a position to save); false at the end.
  bool NextBatch();
  // Delivers the batch (retrying while it can help); false when stopped.
  bool Flush();
  // Delivers `rows` whole, retrying; INVALID_ARGUMENT when refused for good.
  absl::Status DeliverRetrying(absl::Span<const Row> rows);
  // A row the destination refused for good: into the poison file; false
  // when the sink stops before it instead (more than max_poisoned_in_a_row
  // in a row, or a poison file that cannot be written).
  bool Refused(const Row& row, const absl::Status& why);
  // Appends `row` to the poison file, durably: its log index, event id and
  // type and the refusal, not its body (which may hold personal values no
  // erasure reaches there): the row stays in the log, read by its index.
  absl::Status Poison(const Row& row, const absl::Status& why);
  // <state_dir>/<name>.stopped: why the sink stopped as a configuration
  // error; while it exists the sink does not start.
  std::string StopMark() const;
  // Saves the position durably, retrying; false when stopped first.
  bool Save(const client::Position& position);
  void SetLag();

  const SinkOptions options_;
  const std::unique_ptr<Destination> destination_;
  std::unique_ptr<client::Follower> follower_;

  // Between the two threads. The queue holds at most 2 batches of rows:
  // a destination that is slow makes the follower wait, which makes
  // Admin's stream wait (its own bound), and nothing else.
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  size_t queued_rows_ = 0;
  std::string last_pushed_;  // the resume token of the newest item queued
  bool stopping_ = false;    // Stop(): end now, deliver nothing more
  bool draining_ = false;    // the follower ended: deliver what is queued, then end
  absl::Status fatal_;       // why the delivery thread stopped the sink, if it did
  std::atomic<uint64_t> log_size_{0};
  std::atomic<uint64_t> covered_{0};  // leaves before the saved position

  // The delivery thread's own.
  std::vector<Row> batch_;
  size_t batch_bytes_ = 0;
  int poisoned_in_a_row_ = 0;
  std::optional<client::Position> batch_then_;  // to save once the batch is delivered

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
