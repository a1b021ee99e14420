#include "common/outbox/receipt_reader.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/audit/receipt.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/outbox/outbox_store.h"
#include "common/redis/stream_id.h"
#include "common/worker/loop.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.receipts";

}  // namespace

ReceiptReader::ReceiptReader(ReceiptReaderOptions options, prometheus::Registry& registry)
    : options_(std::move(options)) {
  const prometheus::Labels labels{{"owner", audit::OwnerName(options_.owner)}};
  receipts_ = &metrics::Counter(registry, "ulticode_outbox_receipts_total",
                                "Receipt entries read from Admin", labels);
  confirmed_ = &metrics::Counter(registry, "ulticode_outbox_confirmed_total",
                                 "Outbox rows marked CONFIRMED by a receipt", labels);
  rejected_ = &metrics::Counter(
      registry, "ulticode_outbox_receipt_rejected_total",
      "Receipt entries refused (unsigned, unknown key, bad signature, malformed); none "
      "of their events is confirmed",
      labels);
  errors_ = &metrics::Counter(
      registry, "ulticode_outbox_receipt_errors_total",
      "Receipt cycles that failed (Redis or PostgreSQL unavailable); retried", labels);
}

ReceiptReader::~ReceiptReader() { Stop(); }

void ReceiptReader::Start() {
  waker_.Reset();
  thread_ = std::thread([this] { Loop(); });
  log::Info(kComponent, "started", {{"stream", options_.stream}});
}

void ReceiptReader::Stop() {
  waker_.Stop();
  if (thread_.joinable()) {
    thread_.join();
    log::Info(kComponent, "stopped", {{"stream", options_.stream}});
  }
}

std::string ReceiptReader::StartCursor() const {
  if (options_.start_lookback <= absl::ZeroDuration()) return "0-0";
  return absl::StrCat(
      std::max<int64_t>(0, absl::ToUnixMillis(absl::Now() - options_.start_lookback)), "-0");
}

absl::StatusOr<ReceiptCycle> ReceiptReader::RunOnce(pg::Connection& pg, redis::Client& redis,
                                                    std::string* cursor) {
  ReceiptCycle cycle;
  ASSIGN_OR_RETURN(std::vector<redis::StreamEntry> entries,
                   redis.XRead(options_.stream, options_.batch_size, options_.block, *cursor));
  if (entries.empty()) {
    // Idle: is the stream behind our cursor (re-created by a Redis whose
    // clock is behind the one that wrote the cursor)? Then start over.
    auto info = redis.XInfoStream(options_.stream);
    if (info.ok() && redis::StreamIdLess(info->last_generated_id, *cursor)) {
      log::Warn(kComponent, "receipt stream restarted below the cursor; reading it from the start",
                {{"stream", options_.stream},
                 {"cursor", *cursor},
                 {"last_generated_id", info->last_generated_id}});
      *cursor = "0-0";
    }
    return cycle;
  }
  const std::shared_ptr<const crypto::KeyDirectory> keys = options_.keys->Current();
  std::vector<audit::ReceiptItem> items;
  for (const redis::StreamEntry& e : entries) {
    if (Witness::IsCheckpoint(e.fields)) {
      if (options_.witness != nullptr) {
        RETURN_IF_ERROR(options_.witness->Observe(pg, redis, e));
      }
      continue;
    }
    auto decoded = audit::DecodeReceipt(options_.audit_stream, e.fields, *keys);
    if (!decoded.ok()) {
      ++cycle.rejected;
      log::Error(kComponent, "receipt refused; nothing of it is confirmed",
                 {{"stream", options_.stream},
                  {"entry_id", e.id},
                  {"error", std::string(decoded.status().message())}});
      continue;
    }
    for (audit::ReceiptItem& item : *decoded) items.push_back(std::move(item));
  }
  cycle.receipts = static_cast<int>(entries.size());
  cycle.event_ids = static_cast<int>(items.size());
  // A witnessing owner confirms on proof that the event is in the log
  // (Witness), not on the receipt that it is in Admin's inbox.
  if (options_.witness == nullptr) {
    ASSIGN_OR_RETURN(int64_t confirmed, Confirm(pg, items));
    cycle.confirmed = static_cast<int>(confirmed);
  }
  *cursor = entries.back().id;
  receipts_->Increment(cycle.receipts);
  confirmed_->Increment(cycle.confirmed);
  rejected_->Increment(cycle.rejected);
  return cycle;
}

void ReceiptReader::Loop() {
  redis::Client client(options_.redis);
  worker::Loop loop(waker_, options_.pg, options_.backoff, kComponent);
  std::string cursor = StartCursor();
  while (!waker_.stopping()) {
    pg::Connection* conn = loop.Database();
    if (conn == nullptr) continue;
    auto cycle = RunOnce(*conn, client, &cursor);
    if (!cycle.ok()) {
      errors_->Increment();
      loop.Failed("cycle failed; will retry from the same receipt", cycle.status(),
                  {{"stream", options_.stream}});
      continue;
    }
    loop.Succeeded();
  }
}

}  // namespace ulticode::outbox
