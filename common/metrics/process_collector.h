// The standard process metrics, read from /proc/self at each scrape (a few
// small files: cheap): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_threads and
// process_start_time_seconds, under the names every Prometheus client uses.
// Text that does not parse gives no sample, never an exception: a
// /proc/self/stat that does not parse, no metrics; no boot time in
// /proc/stat, no start time.
#pragma once

#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace ulticode::metrics {

// The fields of /proc/[pid]/stat the collector reports, in the file's units.
struct ProcStat {
  double cpu_ticks = 0;    // utime + stime, in clock ticks
  double threads = 0;      // num_threads
  double start_ticks = 0;  // starttime: clock ticks after boot
  double vsize_bytes = 0;  // vsize
  double rss_pages = 0;    // rss
};

// Parses the text of /proc/[pid]/stat. nullopt when it is not such a line:
// no "(comm) ", too few fields, or a field it needs that is not a finite
// number. Never throws: it runs on the scrape thread.
std::optional<ProcStat> ParseProcStat(absl::string_view text);

// The "btime" of /proc/stat text (seconds since the epoch when the machine
// booted); nullopt when it is absent or not a finite number.
std::optional<double> ParseBootTime(absl::string_view text);

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace ulticode::metrics
