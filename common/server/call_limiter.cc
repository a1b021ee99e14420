#include "common/server/call_limiter.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ulticode::server {

CallLimiter::Slot::Slot(Slot&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)), key_(std::move(other.key_)) {}

CallLimiter::Slot& CallLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    if (limiter_ != nullptr) limiter_->Leave(key_);
    limiter_ = std::exchange(other.limiter_, nullptr);
    key_ = std::move(other.key_);
  }
  return *this;
}

CallLimiter::Slot::~Slot() {
  if (limiter_ != nullptr) limiter_->Leave(key_);
}

CallLimiter::CallLimiter(CallLimits limits, prometheus::Registry& registry)
    : limits_(limits),
      limited_(&prometheus::BuildCounter()
                    .Name("ulticode_grpc_reads_limited_total")
                    .Help("Reads refused because their principal already had "
                          "--max-reads-per-principal reads in flight")
                    .Register(registry)
                    .Add({})) {}

absl::StatusOr<CallLimiter::Slot> CallLimiter::Enter(absl::string_view principal) {
  {
    absl::MutexLock lock(&mu_);
    int& n = in_flight_[principal];
    if (n < limits_.reads_per_principal) {
      ++n;
      return Slot(this, std::string(principal));
    }
  }
  limited_->Increment();
  return absl::ResourceExhaustedError(
      absl::StrCat("principal ", principal, " already has ", limits_.reads_per_principal,
                   " reads in flight (--max-reads-per-principal); retry when one ends"));
}

void CallLimiter::Leave(const std::string& principal) {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(principal);
  if (it == in_flight_.end()) return;
  if (--it->second <= 0) in_flight_.erase(it);
}

}  // namespace ulticode::server
