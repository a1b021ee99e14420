#include "common/metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

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

// Seconds since the epoch when the machine booted (/proc/stat btime).
double BootTime() {
  for (absl::string_view line : absl::StrSplit(ReadFile("/proc/stat"), '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) return std::stod(std::string(line));
  }
  return 0;
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

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  // /proc/self/stat: fields after "(comm) " start at field 3 (state).
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t close = stat.rfind(") ");
  if (close == std::string::npos) return {};
  std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
  if (f.size() < 22) return {};
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // Indexes into `f` are field numbers (proc(5)) minus 3.
  const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;  // utime + stime
  const double threads = std::stod(f[17]);
  const double start = BootTime() + std::stod(f[19]) / ticks;
  const double vsize = std::stod(f[20]);
  const double rss = std::stod(f[21]) * page;
  rlimit fds{};
  getrlimit(RLIMIT_NOFILE, &fds);
  return {
      Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
             MetricType::Counter, cpu),
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
             rss),
      Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
             vsize),
      Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, OpenFds()),
      Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
             static_cast<double>(fds.rlim_cur)),
      Family("process_threads", "Number of OS threads in the process.", MetricType::Gauge, threads),
      Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
             MetricType::Gauge, start),
  };
}

}  // namespace ulticode::metrics
