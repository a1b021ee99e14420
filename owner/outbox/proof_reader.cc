#include "owner/outbox/proof_reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/redis/stream_id.h"
#include "common/worker/loop.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.proofs";

}  // namespace

ProofReader::ProofReader(ProofReaderOptions options, prometheus::Registry& registry)
    : options_(std::move(options)) {
  const prometheus::Labels labels{{"owner", audit::OwnerName(options_.owner)}};
  entries_ =
      &metrics::Counter(registry, "ulticode_outbox_proof_entries_total",
                        "Proof stream entries (checkpoints with proofs) read from Admin", labels);
  errors_ = &metrics::Counter(
      registry, "ulticode_outbox_proof_errors_total",
      "Proof reader cycles that failed (Redis or PostgreSQL unavailable); retried", labels);
}

ProofReader::~ProofReader() { Stop(); }

void ProofReader::Start() {
  waker_.Reset();
  thread_ = std::thread([this] { Loop(); });
  log::Info(kComponent, "started", {{"stream", options_.stream}});
}

void ProofReader::Stop() {
  waker_.Stop();
  if (thread_.joinable()) {
    thread_.join();
    log::Info(kComponent, "stopped", {{"stream", options_.stream}});
  }
}

std::string ProofReader::StartCursor() const {
  if (options_.start_lookback <= absl::ZeroDuration()) return "0-0";
  return absl::StrCat(
      std::max<int64_t>(0, absl::ToUnixMillis(absl::Now() - options_.start_lookback)), "-0");
}

absl::StatusOr<int> ProofReader::RunOnce(pg::Connection& pg, redis::Client& redis,
                                         std::string* cursor) {
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> entries,
                   redis.XRead(options_.stream, options_.batch_size, options_.block, *cursor));
  if (entries.empty()) {
    // Idle: is the stream behind our cursor (re-created by a Redis whose
    // clock is behind the one that wrote the cursor)? Then start over.
    auto info = redis.XInfoStream(options_.stream);
    if (info.ok() && redis::StreamIdLess(info->last_generated_id, *cursor)) {
      log::Warn(kComponent, "proof stream restarted below the cursor; reading it from the start",
                {{"stream", options_.stream},
                 {"cursor", *cursor},
                 {"last_generated_id", info->last_generated_id}});
      *cursor = "0-0";
    }
    return 0;
  }
  for (const redis::StreamEntry& e : entries) {
    RETURN_IF_ERROR(options_.witness->Observe(pg, redis, e));
    *cursor = e.id;
  }
  entries_->Increment(static_cast<double>(entries.size()));
  return static_cast<int>(entries.size());
}

void ProofReader::Loop() {
  redis::Client client(options_.redis);
  worker::Loop loop(waker_, options_.pg, options_.backoff, kComponent);
  std::string cursor = StartCursor();
  while (!waker_.stopping()) {
    pg::Connection* conn = loop.Database();
    if (conn == nullptr) continue;
    auto read = RunOnce(*conn, client, &cursor);
    if (!read.ok()) {
      errors_->Increment();
      loop.Failed("cycle failed; will retry from the same entry", read.status(),
                  {{"stream", options_.stream}});
      continue;
    }
    loop.Succeeded();
  }
}

}  // namespace ulticode::outbox
