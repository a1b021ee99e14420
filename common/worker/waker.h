// Waker: how a group of worker threads sleeps between cycles and is woken
// early, either by new work (a NOTIFY, a local event) or by Stop().
//
// Workers read Seq() BEFORE a cycle and pass it to WaitForWork() after it, so a
// wake-up that lands during the cycle is never lost. A wake-up is taken by ONE
// waiting worker: wake-ups that arrive together (a burst of NOTIFYs) make one
// cycle, not one per thread racing for the same rows. A worker that finds more
// work than one cycle takes calls Wake() to recruit another. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ulticode::worker {

class Waker {
 public:
  // Clears a previous Stop() (a worker group being started again).
  void Reset();
  // Makes every current and future wait return at once; stopping() turns true.
  void Stop();
  bool stopping();

  // Signals new work.
  void Wake();
  uint64_t Seq();

  // Blocks until `timeout` passes, Stop(), or (when `seen` is given) a Wake()
  // after the Seq() that returned `seen` that no other waiter has taken yet.
  void WaitForWork(absl::Duration timeout, std::optional<uint64_t> seen);
  // Sleeps `d` unless Stop() comes first.
  void Sleep(absl::Duration d);

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;  // the last Seq() a waiter returned for
};

}  // namespace ulticode::worker
