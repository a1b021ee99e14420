#include "bench/cpu_meter.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ulticode::bench {

double ProcessCpuUs(pid_t pid, std::string* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return 0;
  if (name != nullptr) *name = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 0; i < 13 && rest >> field; ++i) {
    if (i == 11 || i == 12) ticks += std::strtod(field.c_str(), nullptr);  // utime, stime
  }
  return ticks * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

CpuReading CpuMeter::Read() const {
  CpuReading r;
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  r.self_us = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e6 +
              static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec);
  if (child_ > 0) r.child_us = ProcessCpuUs(child_);
  for (const std::string& n : names_) r.by_name[n] = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return r;
  while (dirent* e = readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    std::string name;
    const double us = ProcessCpuUs(std::stoi(pid), &name);
    if (auto it = r.by_name.find(name); it != r.by_name.end()) it->second += us;
  }
  closedir(proc);
  return r;
}

CpuSpent operator-(const CpuReading& after, const CpuReading& before) {
  CpuSpent s{after.self_us - before.self_us, after.child_us - before.child_us, {}};
  for (const auto& [name, us] : after.by_name) {
    const auto it = before.by_name.find(name);
    s.by_name[name] = us - (it == before.by_name.end() ? 0 : it->second);
  }
  return s;
}

}  // namespace ulticode::bench
