// Dispatcher threads: move committed outbox rows to the owner's Redis Stream.
//
// Each thread owns one PostgreSQL connection and one Redis client. A cycle
// claims a batch of due rows under a lease, publishes it with one pipelined
// XADD batch, and marks the published rows in one fenced statement. It runs
// again at once while batches come back full (waking another thread to help),
// otherwise it waits for a NOTIFY from a committing writer (one listener
// thread; one thread takes each wake-up) or the poll interval, whichever
// comes first. After a cycle that found rows it first lingers briefly, so a
// busy owner publishes many commits per cycle.
//
// Failures never hide in a log line, they are written to the row:
//  - transient (Redis down or slow, PostgreSQL hiccup): the row is
//    rescheduled with capped exponential back-off and jitter, forever;
//  - permanent (an event that can never be published, e.g. too large or not
//    parseable): DEAD at once, with the reason.
// A crash anywhere leaves claimed rows to come back when their lease ends;
// the stream may then see an event twice, which the Admin inbox absorbs.
//
// Stop(): no new claims; the batch in hand is finished or released; threads
// are joined. Thread-safe: Start/Stop from one controlling thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/backoff/backoff.h"
#include "common/outbox/outbox_store.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/worker/waker.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct DispatcherOptions {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  // Stream to publish to; empty means audit::StreamFor(owner).
  std::string stream;
  // Claim owner prefix; unique per process (host-pid by default).
  std::string instance_id;
  int threads = 2;
  int batch_size = 256;
  absl::Duration poll_interval = absl::Seconds(1);
  bool use_notify = true;
  // After a cycle that found rows, wait this long before the next claim, so
  // that under load one cycle takes many commits (a NOTIFY per commit would
  // otherwise mean a cycle per commit). Idle, the first commit is claimed at
  // once.
  absl::Duration linger = absl::Milliseconds(2);
  absl::Duration claim_lease = absl::Seconds(30);
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(30)};
  size_t max_event_bytes = audit::kMaxEventBytes;
  // A row PUBLISHED this long without Admin's receipt is published again
  // (Redis may have lost it), then after twice as long, and so on (see
  // RequeueUnconfirmed). Zero turns re-sending off.
  absl::Duration resend_timeout = absl::Seconds(60);
  pg::ConnectOptions pg;
  redis::Options redis;
};

// Test seams at the exact crash windows. Returning an error abandons the
// batch there, as a crash would (no settle statement runs).
struct FaultHooks {
  std::function<absl::Status(const std::vector<ClaimedRow>&)> after_claim;
  std::function<absl::Status(const std::vector<ClaimedRow>&)> after_publish;
};

struct CycleResult {
  int claimed = 0;
  int published = 0;  // marked PUBLISHED
  int fenced = 0;     // published but the claim had been taken over
  int rescheduled = 0;
  int dead = 0;
};

class Dispatcher {
 public:
  Dispatcher(DispatcherOptions options, prometheus::Registry& registry, FaultHooks hooks = {});
  ~Dispatcher();

  void Start();
  void Stop();

  // One claim-publish-settle cycle on the caller's connections. Used by the
  // threads and by tests. `claim_owner` labels the claim.
  absl::StatusOr<CycleResult> RunOnce(pg::Connection& pg, redis::Client& redis,
                                      const std::string& claim_owner);

  // Puts rows PUBLISHED longer than resend_timeout without a receipt back to
  // PENDING (thread 0 runs it periodically). Returns how many.
  absl::StatusOr<int64_t> SweepUnconfirmed(pg::Connection& pg);

  // Stream entry fields for a row (event_id, owner, event_type,
  // schema_version, envelope), or the reason it can never be published.
  absl::StatusOr<redis::StreamFields> EntryFor(const ClaimedRow& row) const;

 private:
  void WorkerLoop(int index);

  const DispatcherOptions options_;
  const std::string stream_;
  const FaultHooks hooks_;

  worker::Waker waker_;
  std::vector<std::thread> threads_;

  prometheus::Counter* claimed_;
  prometheus::Counter* published_;
  prometheus::Counter* fenced_;
  prometheus::Counter* transient_failures_;
  prometheus::Counter* dead_;
  prometheus::Counter* notifications_;
  prometheus::Counter* resends_;
  prometheus::Histogram* lag_;
};

}  // namespace ulticode::outbox
