#include "common/backoff/backoff.h"

#include <algorithm>

#include "absl/random/random.h"

namespace ulticode::backoff {

absl::Duration Delay(const Policy& policy, int64_t failures, absl::BitGenRef gen) {
  if (failures < 1) failures = 1;
  absl::Duration ceiling = policy.base;
  for (int64_t i = 1; i < failures && ceiling < policy.max; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, policy.max);
  const int64_t hi = absl::ToInt64Microseconds(ceiling);
  const int64_t lo = hi / 2;
  if (hi <= lo) return ceiling;
  return absl::Microseconds(absl::Uniform<int64_t>(absl::IntervalClosed, gen, lo, hi));
}

absl::Duration Delay(const Policy& policy, int64_t failures) {
  thread_local absl::BitGen gen;
  return Delay(policy, failures, gen);
}

}  // namespace ulticode::backoff
