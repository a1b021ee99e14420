// The owner's proof reader: hands every entry of Admin's proof stream
// (`<audit stream>:proofs`, tlog::ProofStreamFor) to the owner's Witness,
// which confirms outbox rows on the inclusion proofs that verify and
// cosigns the checkpoints it accepts. It is the only way a row turns
// CONFIRMED (docs/life-of-an-event.md).
//
// One thread reads the stream with plain XREAD BLOCK from a cursor it keeps
// in memory, starting `start_lookback` in the past. Every replica of the
// owner reads every entry: confirming is an idempotent UPDATE, so there is
// no consumer group, no pending list and nothing to take over when a
// replica dies. The cursor only moves past an entry once the witness has
// handled it, so a failed UPDATE is retried; an entry lost with Redis's data
// only delays confirmation until the next checkpoint carries the proofs
// again (Admin proves every unconfirmed event again on a re-send).
// When Redis restarts without data on a host whose clock is behind the
// cursor, new entries would get smaller ids than the cursor: an idle reader
// notices (XINFO last-generated-id below the cursor) and starts over.
#pragma once

#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/backoff/backoff.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/worker/waker.h"
#include "owner/outbox/witness.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct ProofReaderOptions {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  // The owner's proof stream, tlog::ProofStreamFor(audit stream).
  std::string stream;
  int batch_size = 64;  // entries per XREAD
  // Where to start reading: entries written since now - start_lookback
  // (zero: the whole stream).
  absl::Duration start_lookback = absl::Minutes(2);
  absl::Duration block = absl::Seconds(1);
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(10)};
  pg::ConnectOptions pg;
  redis::Options redis;
  // Judges each entry and confirms the rows it proves; required.
  Witness* witness = nullptr;
};

class ProofReader {
 public:
  ProofReader(ProofReaderOptions options, prometheus::Registry& registry);
  ~ProofReader();

  void Start();
  void Stop();

  // The cursor a fresh reader starts from.
  std::string StartCursor() const;

  // One read-and-witness cycle from `*cursor` (advanced on success);
  // returns the entries read.
  absl::StatusOr<int> RunOnce(pg::Connection& pg, redis::Client& redis, std::string* cursor);

 private:
  void Loop();

  const ProofReaderOptions options_;
  worker::Waker waker_;
  std::thread thread_;

  prometheus::Counter* entries_;
  prometheus::Counter* errors_;
};

}  // namespace ulticode::outbox
