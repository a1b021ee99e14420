// The owner's receipt reader: applies Admin's receipts to the outbox, and
// hands the checkpoints of Admin's log on the same stream to the owner's
// Witness.
//
// One thread reads the owner's receipt stream (`<audit stream>:receipts`)
// with plain XREAD BLOCK from a cursor it keeps in memory, starting
// `start_lookback` in the past (older receipts concern rows that are either
// confirmed or will be re-sent and receipted again anyway). Every replica of the owner reads every
// receipt: confirming is an idempotent UPDATE, so there is no consumer group, no pending list and
// nothing to take over when a replica dies. The cursor only moves past a receipt once its rows are
// confirmed, so a failed UPDATE is retried; a receipt lost with Redis's data only delays
// confirmation until the resend sweep publishes the event again (see Dispatcher, resend_timeout).
// When Redis restarts without data on a host whose clock is behind the
// cursor, new receipts would get smaller ids than the cursor: an idle reader
// notices (XINFO last-generated-id below the cursor) and starts over.
#pragma once

#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/backoff/backoff.h"
#include "common/crypto/key_directory.h"
#include "common/outbox/witness.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/worker/waker.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct ReceiptReaderOptions {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  // The owner's audit stream (receipts are signed for it) and its receipt
  // stream, usually audit::ReceiptStreamFor(audit_stream).
  std::string audit_stream;
  std::string stream;
  // Admin's public keys ("admin" entries); required.
  const crypto::KeyDirectoryFile* keys = nullptr;
  int batch_size = 64;  // receipt entries per XREAD
  // Where to start reading: receipts written since now - start_lookback
  // (zero: the whole stream).
  absl::Duration start_lookback = absl::Minutes(2);
  absl::Duration block = absl::Seconds(1);
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(10)};
  pg::ConnectOptions pg;
  redis::Options redis;
  // Handles the entries that carry a checkpoint of Admin's log, and then
  // confirms rows only on the proofs that come with them (receipts are
  // checked and counted, and confirm nothing). Null: the owner does not
  // witness, checkpoints are skipped and receipts confirm.
  Witness* witness = nullptr;
};

struct ReceiptCycle {
  int receipts = 0;   // entries read
  int event_ids = 0;  // ids they carried
  int confirmed = 0;  // rows that turned CONFIRMED
  int rejected = 0;   // receipt entries refused (signature, format)
};

class ReceiptReader {
 public:
  ReceiptReader(ReceiptReaderOptions options, prometheus::Registry& registry);
  ~ReceiptReader();

  void Start();
  void Stop();

  // The cursor a fresh reader starts from.
  std::string StartCursor() const;

  // One read-confirm cycle from `*cursor` (advanced on success).
  absl::StatusOr<ReceiptCycle> RunOnce(pg::Connection& pg, redis::Client& redis,
                                       std::string* cursor);

 private:
  void Loop();

  const ReceiptReaderOptions options_;
  worker::Waker waker_;
  std::thread thread_;

  prometheus::Counter* receipts_;
  prometheus::Counter* confirmed_;
  prometheus::Counter* rejected_;
  prometheus::Counter* errors_;
};

}  // namespace ulticode::outbox
