#include "common/metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ulticode::metrics {
namespace {

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A finite number (surrounding whitespace allowed); false for anything else.
bool Number(absl::string_view text, double* out) {
  return absl::SimpleAtod(text, out) && std::isfinite(*out);
}

int OpenFds() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(dir);
    --n;  // the directory stream's own descriptor
  }
  return n;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(absl::string_view text) {
  // The fields after "(comm) " start at field 3 (state); comm may itself
  // hold ") ", so the last one ends it.
  const size_t close = text.rfind(") ");
  if (close == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> f = absl::StrSplit(text.substr(close + 2), ' ');
  if (f.size() < 22) return std::nullopt;
  // Indexes into `f` are field numbers (proc(5)) minus 3.
  double utime = 0, stime = 0;
  ProcStat stat;
  if (!Number(f[11], &utime) || !Number(f[12], &stime) || !Number(f[17], &stat.threads) ||
      !Number(f[19], &stat.start_ticks) || !Number(f[20], &stat.vsize_bytes) ||
      !Number(f[21], &stat.rss_pages)) {
    return std::nullopt;
  }
  stat.cpu_ticks = utime + stime;
  return stat;
}

std::optional<double> ParseBootTime(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    double btime = 0;
    if (absl::ConsumePrefix(&line, "btime ")) {
      return Number(line, &btime) ? std::optional<double>(btime) : std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  const std::optional<ProcStat> stat = ParseProcStat(ReadFile("/proc/self/stat"));
  if (!stat) return {};
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  rlimit fds{};
  getrlimit(RLIMIT_NOFILE, &fds);
  std::vector<prometheus::MetricFamily> families = {
      Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
             MetricType::Counter, stat->cpu_ticks / ticks),
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             stat->rss_pages * page),
      Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             stat->vsize_bytes),
      Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, OpenFds()),
      Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
             static_cast<double>(fds.rlim_cur)),
      Family("process_threads", "Number of OS threads in the process.", MetricType::Gauge,
             stat->threads),
  };
  // Without the boot time the start time is unknown: no sample rather than a
  // wrong one.
  if (const std::optional<double> boot = ParseBootTime(ReadFile("/proc/stat"))) {
    families.push_back(Family("process_start_time_seconds",
                              "Start time of the process since unix epoch in seconds.",
                              MetricType::Gauge, *boot + stat->start_ticks / ticks));
  }
  return families;
}

}  // namespace ulticode::metrics
