#include "forward/sink_runner.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
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
                   "Leaves of the log past the sink's last delivered row", options_.name)),
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
  h.row = [this](const admin::v1::WatchedAuditLog& row) { return Take(row); };
  h.passed = [this](const std::string& token) { Passed(token); };
  h.progress = [this](const admin::v1::WatchProgress& p) { Progress(p); };
  h.say = [this](const std::string& line) {
    log::Info(kComponent, line, {{"sink", options_.name}});
  };
  follower_ = std::make_unique<client::Follower>(options_.follow, std::move(h));
}

absl::Status SinkRunner::Run() {
  up_.Set(1);
  const absl::Status s = follower_->Run();
  // Rows taken before a break were proved: they still go out.
  if (!s.ok() && !stopping_) (void)Flush();
  if (!s.ok()) {
    up_.Set(0);
    log::Error(kComponent, "the sink stopped; nothing more is forwarded to it",
               {{"sink", options_.name}, {"error", s.ToString()}});
  }
  return s;
}

void SinkRunner::Stop() {
  stopping_ = true;
  follower_->Stop();
}

absl::StatusOr<bool> SinkRunner::Take(const admin::v1::WatchedAuditLog& watched) {
  Row row;
  row.log = watched.audit_log();
  row.resume_token = watched.resume_token();
  auto text = exports::RenderRow(options_.schema, row.log.log_index(), watched.leaf());
  if (!text.ok()) return absl::DataLossError(std::string(text.status().message()));
  row.json = std::string(absl::StripSuffix(*text, "\n"));
  if (batch_.empty()) batch_started_ = absl::Now();
  batch_bytes_ += row.json.size() + 1;
  batch_.push_back(std::move(row));
  const bool full = batch_.size() >= options_.max_batch_rows ||
                    batch_bytes_ >= options_.max_batch_bytes ||
                    absl::Now() - batch_started_ >= options_.linger;
  if (full && !Flush()) return false;
  return !stopping_;
}

// After each row (its own token) and each progress frame with nothing held:
// a progress frame sends a partial batch, or saves a position that moved
// past leaves the filter did not match.
void SinkRunner::Passed(const std::string& token) {
  if (!batch_.empty()) {
    if (token != batch_.back().resume_token) (void)Flush();
    return;
  }
  if (!delivered_ || token != last_saved_) Save(token);
}

void SinkRunner::Progress(const admin::v1::WatchProgress& progress) {
  log_size_ = progress.log_size();
  const uint64_t next = delivered_ ? *delivered_ + 1 : 0;
  lag_.Set(static_cast<double>(log_size_ > next ? log_size_ - next : 0));
}

bool SinkRunner::Flush() {
  if (batch_.empty()) return true;
  const absl::Time start = absl::Now();
  absl::Status s = DeliverRetrying(batch_);
  if (absl::IsInvalidArgument(s)) {
    // One row of them is refused: each alone, the refused ones to poison.
    for (const Row& row : batch_) {
      const absl::Status one = DeliverRetrying(absl::MakeConstSpan(&row, 1));
      if (absl::IsCancelled(one)) return false;
      if (!one.ok()) Poison(row, one);
    }
    s = absl::OkStatus();
  }
  if (!s.ok()) return false;  // stopping: the batch is sent again after a restart
  delivery_seconds_.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  rows_delivered_.Increment(static_cast<double>(batch_.size()));
  batches_delivered_.Increment();
  delivered_ = batch_.back().log.log_index();
  position_.Set(static_cast<double>(*delivered_));
  Progress([this] {
    admin::v1::WatchProgress p;
    p.set_log_size(log_size_);
    return p;
  }());
  Save(batch_.back().resume_token);
  batch_.clear();
  batch_bytes_ = 0;
  return true;
}

absl::Status SinkRunner::DeliverRetrying(absl::Span<const Row> rows) {
  for (int attempt = 1;; ++attempt) {
    if (stopping_) return absl::CancelledError("stopping");
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
    for (const absl::Time end = absl::Now() + wait; absl::Now() < end && !stopping_;) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
}

void SinkRunner::Poison(const Row& row, const absl::Status& why) {
  const std::string path = absl::StrCat(options_.state_dir, "/", options_.name, ".poison.jsonl");
  std::ofstream out(path, std::ios::app);
  out << "{\"log_index\":" << row.log.log_index() << ",\"event_id\":"
      << exports::JsonString(row.log.event_id()) << ",\"error\":"
      << exports::JsonString(why.message()) << ",\"row\":" << row.json << "}\n";
  out.flush();
  poisoned_.Increment();
  log::Error(kComponent, "the destination refused a row for good; it is in the poison file",
             {{"sink", options_.name},
              {"log_index", absl::StrCat(row.log.log_index())},
              {"error", std::string(why.message())},
              {"poison_file", path}});
}

void SinkRunner::Save(const std::string& token) {
  const std::string path = absl::StrCat(options_.state_dir, "/", options_.name, ".position");
  if (absl::Status s = client::SavePosition(path, token); !s.ok()) {
    log::Error(kComponent, "cannot save the position", {{"sink", options_.name},
                                                        {"error", s.ToString()}});
    return;
  }
  last_saved_ = token;
}

}  // namespace ulticode::forward
