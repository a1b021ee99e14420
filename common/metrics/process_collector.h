// The standard process metrics, read from /proc/self at each scrape (a few
// small files: cheap): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_threads and
// process_start_time_seconds, under the names every Prometheus client uses.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ulticode::metrics {

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace ulticode::metrics
