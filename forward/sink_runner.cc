#include "forward/sink_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/backoff/backoff.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "tools/client/position_file.h"

namespace ulticode::forward {
namespace {

constexpr char kComponent[] = "forward";

prometheus::Gauge& GaugeOf(prometheus::Registry& r, const std::string& name,
                           const std::string& help, const std::string& sink) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({{"sink", sink}});
}

}  // namespace

SinkRunner::SinkRunner(SinkOptions options, std::unique_ptr<Destination> destination,
                       prometheus::Registry& registry)
    : options_(std::move(options)),
      destination_(std::move(destination)),
      rows_delivered_(metrics::Counter(registry, "ulticode_forward_rows_delivered_total",
                                       "Rows a sink's destination took",
                                       {{"sink", options_.name}})),
      batches_delivered_(metrics::Counter(registry, "ulticode_forward_batches_delivered_total",
                                          "Batches a sink's destination took",
                                          {{"sink", options_.name}})),
      failures_(metrics::Counter(registry, "ulticode_forward_delivery_failures_total",
                                 "Deliveries that failed and will be tried again",
                                 {{"sink", options_.name}})),
      poisoned_(metrics::Counter(registry, "ulticode_forward_rows_poisoned_total",
                                 "Rows the destination refused for good (HTTP 4xx): in the "
                                 "sink's poison file",
                                 {{"sink", options_.name}})),
      position_(GaugeOf(registry, "ulticode_forward_position",
                        "The log index of the last row the sink delivered", options_.name)),
      lag_(GaugeOf(registry, "ulticode_forward_lag_rows",
                   "Leaves of the log past the sink's saved position: rows not delivered yet",
                   options_.name)),
      up_(GaugeOf(registry, "ulticode_forward_sink_up",
                  "1 while the sink follows the log; 0 once it stopped (a break in the log, "
                  "or an error a retry cannot fix)",
                  options_.name)),
      delivery_seconds_(prometheus::BuildHistogram()
                            .Name("ulticode_forward_delivery_seconds")
                            .Help("Time to deliver one batch, retries included")
                            .Register(registry)
                            .Add({{"sink", options_.name}}, metrics::LatencyBuckets())) {
  client::FollowHandlers h;
  h.row = [this](const admin::v1::WatchedAuditLog& row, const client::Position& after) {
    return Take(row, after);
  };
  h.passed = [this](const client::Position& position) { Passed(position); };
  h.progress = [this](const admin::v1::WatchProgress& p) {
    log_size_ = p.log_size();
    SetLag();
  };
  h.say = [this](const std::string& line) {
    log::Info(kComponent, line, {{"sink", options_.name}});
  };
  follower_ = std::make_unique<client::Follower>(options_.follow, std::move(h));
  if (options_.follow.start) covered_ = options_.follow.start->next_index.value_or(0);
}

SinkRunner::~SinkRunner() = default;

absl::Status SinkRunner::Run() {
  // A sink stopped as a configuration error stays stopped, restart or not,
  // until an operator fixed it and removed the mark: each start would
  // otherwise poison its allowance of rows again.
  if (std::ifstream mark(StopMark()); mark) {
    std::string why((std::istreambuf_iterator<char>(mark)), std::istreambuf_iterator<char>());
    up_.Set(0);
    const absl::Status s = absl::FailedPreconditionError(
        absl::StrCat(absl::StripAsciiWhitespace(why), " (remove ", StopMark(),
                     " once the destination takes the sink's rows)"));
    log::Error(kComponent, "the sink stays stopped",
               {{"sink", options_.name}, {"error", s.ToString()}});
    return s;
  }
  up_.Set(1);
  std::thread delivery([this] { Deliver(); });
  absl::Status s = follower_->Run();
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Rows taken before a break were proved: they still go out.
    draining_ = true;
    changed_.notify_all();
  }
  delivery.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fatal_.ok()) s = fatal_;
  }
  if (!s.ok()) {
    up_.Set(0);
    log::Error(kComponent, "the sink stopped; nothing more is forwarded to it",
               {{"sink", options_.name}, {"error", s.ToString()}});
  }
  return s;
}

void SinkRunner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    changed_.notify_all();
  }
  follower_->Stop();
}

absl::StatusOr<bool> SinkRunner::Take(const admin::v1::WatchedAuditLog& watched,
                                      const client::Position& after) {
  Item item;
  item.row.emplace();
  item.row->log = watched.audit_log();
  item.position = item.row->position = after;
  auto text = exports::RenderRow(options_.schema, item.row->log.log_index(), watched.leaf(),
                                 watched.audit_log().personal_values());
  if (!text.ok()) return absl::DataLossError(std::string(text.status().message()));
  item.row->json = std::string(absl::StripSuffix(*text, "\n"));
  Push(std::move(item));
  std::lock_guard<std::mutex> lock(mu_);
  return !stopping_ && fatal_.ok();
}

// After each row (its own position) and each progress frame: a position
// past leaves the filter did not match, saved once the rows before it are.
void SinkRunner::Passed(const client::Position& position) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (position.token == last_pushed_) return;
  }
  Push(Item{std::nullopt, position});
}

void SinkRunner::Push(Item item) {
  std::unique_lock<std::mutex> lock(mu_);
  if (item.row) {
    changed_.wait(lock, [&] {
      return queued_rows_ < 2 * options_.max_batch_rows || stopping_ || !fatal_.ok();
    });
    ++queued_rows_;
  }
  last_pushed_ = item.position.token;
  if (!item.row && !queue_.empty() && !queue_.back().row) {
    queue_.back() = std::move(item);  // a newer position replaces one not saved yet
  } else {
    queue_.push_back(std::move(item));
  }
  changed_.notify_all();
}

void SinkRunner::Deliver() {
  while (NextBatch()) {
    if (!batch_.empty() && !Flush()) return;
    if (batch_then_) {
      if (!Save(*batch_then_)) return;  // stopping
      covered_ = std::max<uint64_t>(covered_, batch_then_->next_index.value_or(0));
      SetLag();
      batch_then_.reset();
    }
  }
}

bool SinkRunner::NextBatch() {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<absl::Time> due;  // when a partial batch goes out
  for (;;) {
    if (stopping_ || !fatal_.ok()) return false;
    while (!queue_.empty()) {
      Item& item = queue_.front();
      if (!item.row) {
        batch_then_ = std::move(item.position);
        queue_.pop_front();
        if (batch_.empty()) return true;  // only a position to save
        continue;
      }
      if (batch_.size() >= options_.max_batch_rows || batch_bytes_ >= options_.max_batch_bytes) {
        return true;
      }
      if (batch_.empty()) due = absl::Now() + options_.linger;
      batch_bytes_ += item.row->json.size() + 1;
      batch_.push_back(std::move(*item.row));
      batch_then_.reset();
      queue_.pop_front();
      --queued_rows_;
      changed_.notify_all();
    }
    const bool full =
        batch_.size() >= options_.max_batch_rows || batch_bytes_ >= options_.max_batch_bytes;
    if (full || (!batch_.empty() && (draining_ || absl::Now() >= *due))) return true;
    if (draining_) return batch_then_.has_value();
    if (due) {
      changed_.wait_for(lock, absl::ToChronoNanoseconds(*due - absl::Now()));
    } else {
      changed_.wait(lock);
    }
  }
}

bool SinkRunner::Flush() {
  const absl::Time start = absl::Now();
  absl::Status s = DeliverRetrying(batch_);
  size_t refused = 0;
  if (absl::IsInvalidArgument(s)) {
    // One row of them is refused: each alone, the refused ones to poison.
    const Row* done = nullptr;  // the last row of the batch delivered or poisoned
    for (const Row& row : batch_) {
      const absl::Status one = DeliverRetrying(absl::MakeConstSpan(&row, 1));
      if (absl::IsCancelled(one)) return false;
      if (one.ok()) {
        poisoned_in_a_row_ = 0;
      } else if (!Refused(row, one)) {
        // A restart resumes at the row it stopped before.
        if (done != nullptr) (void)Save(done->position);
        return false;
      } else {
        ++refused;
      }
      done = &row;
    }
    s = absl::OkStatus();
  }
  if (!s.ok()) return false;  // stopping: the batch is sent again after a restart
  if (refused == 0) poisoned_in_a_row_ = 0;
  delivery_seconds_.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  rows_delivered_.Increment(static_cast<double>(batch_.size() - refused));
  batches_delivered_.Increment();
  position_.Set(static_cast<double>(batch_.back().log.log_index()));
  if (!batch_then_) batch_then_ = batch_.back().position;
  batch_.clear();
  batch_bytes_ = 0;
  return true;
}

void SinkRunner::SetLag() {
  const uint64_t size = log_size_, covered = covered_;
  lag_.Set(static_cast<double>(size > covered ? size - covered : 0));
}

absl::Status SinkRunner::DeliverRetrying(absl::Span<const Row> rows) {
  auto stopping = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  };
  for (int attempt = 1;; ++attempt) {
    if (stopping()) return absl::CancelledError("stopping");
    const absl::Status s = destination_->Deliver(rows);
    if (s.ok() || absl::IsInvalidArgument(s)) return s;
    failures_.Increment();
    const absl::Duration wait =
        backoff::Delay({absl::Milliseconds(100), absl::Seconds(30)}, attempt);
    log::Warn(kComponent, "delivery failed; trying again",
              {{"sink", options_.name},
               {"error", std::string(s.message())},
               {"rows", absl::StrCat(rows.size())},
               {"retry_in", absl::FormatDuration(wait)}});
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, absl::ToChronoNanoseconds(wait), [this] { return stopping_; });
  }
}

bool SinkRunner::Refused(const Row& row, const absl::Status& why) {
  absl::Status kept;
  if (poisoned_in_a_row_ < options_.max_poisoned_in_a_row) {
    kept = Poison(row, why);
  } else {
    kept = absl::FailedPreconditionError(absl::StrCat(
        "sink ", options_.name, ": the destination refused ", poisoned_in_a_row_ + 1,
        " rows in a row for good (", why.message(),
        "): it refuses the sink, not a row; fix its configuration (URL, schema, what stands in "
        "front of it). The sink stopped before log index ",
        row.log.log_index(), "; the rows refused before it are in ", options_.name,
        ".poison.jsonl"));
    if (absl::Status marked = client::SaveFile(StopMark(), kept.message()); !marked.ok()) {
      log::Error(kComponent, "cannot mark the sink stopped", {{"error", marked.ToString()}});
    }
  }
  if (kept.ok()) {
    ++poisoned_in_a_row_;
    return true;
  }
  // Neither delivered nor kept: the sink stops before the row.
  {
    std::lock_guard<std::mutex> lock(mu_);
    fatal_ = kept;
    changed_.notify_all();
  }
  follower_->Stop();
  return false;
}

std::string SinkRunner::StopMark() const {
  return absl::StrCat(options_.state_dir, "/", options_.name, ".stopped");
}

absl::Status SinkRunner::Poison(const Row& row, const absl::Status& why) {
  const std::string path = absl::StrCat(options_.state_dir, "/", options_.name, ".poison.jsonl");
  const std::string line =
      absl::StrCat("{\"log_index\":", row.log.log_index(),
                   ",\"event_id\":", exports::JsonString(row.log.event_id()),
                   ",\"event_type\":", exports::JsonString(row.log.event_type()),
                   ",\"error\":", exports::JsonString(why.message()), "}\n");
  // On disk before the position moves past the row.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  const bool written = fd >= 0 &&
                       ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written) {
    return absl::InternalError(
        absl::StrCat("cannot write the poison file ", path, ": ", std::strerror(error)));
  }
  poisoned_.Increment();
  log::Error(kComponent, "the destination refused a row for good; it is in the poison file",
             {{"sink", options_.name},
              {"log_index", absl::StrCat(row.log.log_index())},
              {"error", std::string(why.message())},
              {"poison_file", path}});
  return absl::OkStatus();
}

bool SinkRunner::Save(const client::Position& position) {
  const std::string path = absl::StrCat(options_.state_dir, "/", options_.name, ".position");
  // Before the next batch goes out, or a restart would repeat more than it.
  for (int attempt = 1;; ++attempt) {
    const absl::Status s = client::SavePosition(path, position);
    if (s.ok()) break;
    failures_.Increment();
    log::Error(kComponent, "cannot save the position; trying again",
               {{"sink", options_.name}, {"error", s.ToString()}});
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock,
                      absl::ToChronoNanoseconds(
                          backoff::Delay({absl::Milliseconds(100), absl::Seconds(30)}, attempt)),
                      [this] { return stopping_; });
    if (stopping_) return false;
  }
  return true;
}

}  // namespace ulticode::forward
