#include "common/server/signals.h"

#include <pthread.h>
#include <signal.h>

namespace ulticode::server {
namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// How often the watching thread checks whether it is being destroyed.
constexpr timespec kPoll = {0, 100'000'000};

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer that disappears mid-write must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

TerminationWatch::TerminationWatch() : thread_([this] { Run(); }) {}

TerminationWatch::~TerminationWatch() {
  stop_ = true;
  thread_.join();
}

void TerminationWatch::Run() {
  const sigset_t set = TerminationSet();
  while (!stop_) {
    const int sig = sigtimedwait(&set, nullptr, &kPoll);
    if (sig > 0) {
      signal_ = sig;
      arrived_.Notify();
      return;
    }
  }
}

bool TerminationWatch::WaitFor(absl::Duration timeout) const {
  return arrived_.WaitForNotificationWithTimeout(timeout);
}

int TerminationWatch::Wait() const {
  arrived_.WaitForNotification();
  return signal_;
}

}  // namespace ulticode::server
