// The lease consumer: worker threads that turn PENDING inbox rows into
// audit_logs rows.
//
// A cycle claims a batch (PENDING and due, or PROCESSING with an expired
// lease) under a lease with fresh fencing tokens, parses and validates each
// event, then in ONE transaction marks PROCESSED the rows it still holds and
// inserts their audit rows (ON CONFLICT (event_id) DO NOTHING). A worker that
// stalled past its lease and was taken over holds no row at that point, so
// it writes nothing: no late commit.
//
// While a batch is in hand a heartbeat thread renews its leases. A failed
// row goes back to PENDING with capped exponential back-off and jitter, or
// DEAD at `max_attempts`; an event that fails validation goes DEAD at once.
// If a batch transaction fails, its rows are retried one by one so one bad
// row cannot hold the others back. Wake-up: NOTIFY from the bridge's insert,
// polling as the fallback.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "admin/audit_logs/writer.h"
#include "admin/consumer/lease_store.h"
#include "common/audit/event.h"
#include "common/backoff/backoff.h"
#include "common/pg/connection.h"
#include "common/worker/waker.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::admin::consumer {

struct ConsumerOptions {
  // consumer_inbox.consumer this worker group serves.
  std::string consumer = "audit_logs";
  // Rows of other types were written by a newer release: postponed, not DEAD.
  audit::KnownEventTypes known_event_types = audit::IsKnownEventType;
  // Lease owner prefix; unique per process. Empty: host-pid.
  std::string instance_id;
  int threads = 2;
  int batch_size = 256;
  absl::Duration poll_interval = absl::Seconds(1);
  bool use_notify = true;
  absl::Duration lease = absl::Seconds(30);
  // Lease renewal period while a batch is in hand; zero turns it off.
  absl::Duration heartbeat_interval = absl::Seconds(10);
  int max_attempts = 10;
  // Delay before a failed row is tried again.
  backoff::Policy retry_backoff{absl::Seconds(1), absl::Minutes(5)};
  // Delay between cycles while the database is unavailable.
  backoff::Policy loop_backoff{absl::Milliseconds(200), absl::Seconds(10)};
  pg::ConnectOptions pg;
};

// Test seams.
struct ConsumerHooks {
  // After the claim, before any work (may block: a stalled worker).
  std::function<void(const std::vector<LeasedRow>&)> after_claim;
  // The handler failing for one event: an error is a (retryable) failure.
  std::function<absl::Status(const audit::AuditEvent&)> handle;
};

struct ConsumerCycle {
  int claimed = 0;
  int processed = 0;  // marked PROCESSED by this worker
  int written = 0;    // audit_logs rows that were new
  int fenced = 0;     // lost to a newer lease before completing
  int retried = 0;
  int dead = 0;
  int postponed = 0;  // newer than this binary knows: left for a newer consumer
};

// How long an event newer than this binary waits before a consumer claims it
// again. The consumer that postponed it never claims it again (it remembers
// up to kMaxLeftForNewer such rows), so the next claim is a newer replica's.
inline constexpr absl::Duration kNewerEventDelay = absl::Seconds(2);
inline constexpr size_t kMaxLeftForNewer = 10000;

class LeaseConsumer {
 public:
  LeaseConsumer(ConsumerOptions options, prometheus::Registry& registry, ConsumerHooks hooks = {});
  ~LeaseConsumer();

  void Start();
  void Stop();

  // One claim-handle-settle cycle on the caller's connection.
  absl::StatusOr<ConsumerCycle> RunOnce(pg::Connection& conn, const std::string& lease_owner);

 private:
  struct Work {
    const LeasedRow* row;
    audit::AuditEvent event;
  };
  struct Committed {
    int processed;
    int written;
    int fenced;
  };
  // One transaction: complete the held rows, insert their audit rows.
  absl::StatusOr<Committed> Commit(pg::Connection& conn, const std::vector<Work*>& batch);
  // Sorts claimed rows: bytes that fail validation go DEAD at once, a failed
  // `handle` hook is a failure to retry, the rest is work.
  absl::Status Triage(pg::Connection& conn, const std::vector<LeasedRow>& rows,
                      ConsumerCycle& cycle, std::vector<Work>& work,
                      std::vector<Failure>& failures);
  // Commits the work as one batch; when the batch fails (and the connection
  // works), row by row, so one bad row does not hold back the others.
  absl::Status CommitWork(pg::Connection& conn, std::vector<Work>& work, ConsumerCycle& cycle,
                          std::vector<Failure>& failures);
  // Reschedules the failures with back-off, or DEAD past max_attempts.
  absl::Status Settle(pg::Connection& conn, const std::vector<Failure>& failures,
                      ConsumerCycle& cycle);
  void WorkerLoop(int index);
  void HeartbeatLoop();
  void Track(const std::vector<LeasedRow>& rows);
  void Untrack(const std::vector<LeasedRow>& rows);

  const ConsumerOptions options_;
  const std::string instance_id_;
  const ConsumerHooks hooks_;
  worker::Waker waker_;
  std::vector<std::thread> threads_;

  absl::Mutex held_mu_;
  absl::flat_hash_map<int64_t, int64_t> held_ ABSL_GUARDED_BY(held_mu_);  // id -> token
  // Rows this process postponed as newer than it knows: never claimed again.
  std::vector<int64_t> left_for_newer_ ABSL_GUARDED_BY(held_mu_);

  prometheus::Counter* claimed_;
  prometheus::Counter* processed_;
  prometheus::Counter* fenced_;
  prometheus::Counter* retried_;
  prometheus::Counter* dead_;
  prometheus::Counter* renewed_;
  prometheus::Counter* notifications_;
  audit_logs::WriterMetrics writer_metrics_;
};

}  // namespace ulticode::admin::consumer
