// How many reads (unary calls that query the database) one principal may
// have in flight at once, so that one reader (one token) cannot take every
// pooled connection and starve the others. A read over its principal's
// limit is refused at once with RESOURCE_EXHAUSTED naming the limit, and
// counted in ulticode_grpc_reads_limited_total (alert UlticodeReadsLimited).
// Watches have their own limits (admin/watch/watch_hub.h). Thread-safe.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ulticode::server {

struct CallLimits {
  int reads_per_principal = 4;  // --max-reads-per-principal
};

class CallLimiter {
 public:
  // Holds one of a principal's calls; frees it when destroyed. Empty (holds
  // nothing) when default-constructed.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class CallLimiter;
    Slot(CallLimiter* limiter, std::string key) : limiter_(limiter), key_(std::move(key)) {}
    CallLimiter* limiter_ = nullptr;
    std::string key_;
  };

  CallLimiter(CallLimits limits, prometheus::Registry& registry);

  // A slot for one more read of `principal`; RESOURCE_EXHAUSTED when it
  // already has its limit in flight.
  absl::StatusOr<Slot> Enter(absl::string_view principal);

 private:
  void Leave(const std::string& key);

  const CallLimits limits_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> in_flight_ ABSL_GUARDED_BY(mu_);
  prometheus::Counter* limited_;
};

}  // namespace ulticode::server
