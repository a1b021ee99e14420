// Latency percentiles of the benchmark's tools (readbench, watchbench).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ulticode::bench {

struct Latency {
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// Of microsecond samples (reordered in place); zeros when there are none.
inline Latency Summarize(std::vector<int64_t>& us) {
  if (us.empty()) return {};
  auto at = [&us](double p) {
    const size_t k = std::min(us.size() - 1, static_cast<size_t>(p * us.size()));
    std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(k), us.end());
    return static_cast<double>(us[k]) / 1000.0;
  };
  Latency l;
  l.p50_ms = at(0.50);
  l.p99_ms = at(0.99);
  l.max_ms = static_cast<double>(*std::max_element(us.begin(), us.end())) / 1000.0;
  return l;
}

}  // namespace ulticode::bench
