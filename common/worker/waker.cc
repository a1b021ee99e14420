#include "common/worker/waker.h"

namespace ulticode::worker {

void Waker::Reset() {
  absl::MutexLock lock(&mu_);
  stopping_ = false;
}

void Waker::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

bool Waker::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void Waker::Wake() {
  absl::MutexLock lock(&mu_);
  ++seq_;
}

uint64_t Waker::Seq() {
  absl::MutexLock lock(&mu_);
  return seq_;
}

void Waker::WaitForWork(absl::Duration timeout, std::optional<uint64_t> seen) {
  absl::MutexLock lock(&mu_);
  auto woken = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (seen.has_value() && seq_ != *seen && seq_ != taken_);
  };
  if (mu_.AwaitWithTimeout(absl::Condition(&woken), timeout) && !stopping_) taken_ = seq_;
}

void Waker::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopped), d);
}

}  // namespace ulticode::worker
