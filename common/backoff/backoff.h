// Exponential back-off with "equal jitter", capped.
//
//   delay(n) = uniform(base * 2^(n-1) / 2, base * 2^(n-1)), at most `max`
//
// for the n-th consecutive failure (n >= 1). Jitter keeps many workers that
// failed together (Redis restarted) from retrying in lock-step. Pure and
// thread-compatible; pass the random source for deterministic tests.
#pragma once

#include <cstdint>

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"

namespace ulticode::backoff {

struct Policy {
  absl::Duration base = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(30);
};

absl::Duration Delay(const Policy& policy, int64_t failures, absl::BitGenRef gen);

// Delay() with a process-wide random source. Thread-safe.
absl::Duration Delay(const Policy& policy, int64_t failures);

}  // namespace ulticode::backoff
