// Termination signals (SIGTERM, SIGINT) handled synchronously.
// BlockTerminationSignals() must run in main() before any thread starts
// (threads inherit the mask); a TerminationWatch then notices the first
// signal on a thread of its own, so start-up can stop waiting at once and
// the service can wait for it once serving.
#pragma once

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ulticode::server {

void BlockTerminationSignals();

// Watches for SIGTERM or SIGINT from construction on. Thread-safe.
class TerminationWatch {
 public:
  TerminationWatch();
  ~TerminationWatch();
  TerminationWatch(const TerminationWatch&) = delete;
  TerminationWatch& operator=(const TerminationWatch&) = delete;

  // Waits up to `timeout`; true once a signal has arrived.
  bool WaitFor(absl::Duration timeout) const;
  // Waits for a signal and returns its number.
  int Wait() const;

 private:
  void Run();

  absl::Notification arrived_;
  std::atomic<int> signal_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace ulticode::server
