// CPU time spent by this process, by one other process, and by every
// process of a given name (all PostgreSQL processes, Redis), between two
// readings: what the cost model charges a stage with.
//
//   CpuMeter meter({"postgres", "redis-server"});
//   const CpuReading before = meter.Read();
//   ... the stage ...
//   const CpuSpent spent = meter.Read() - before;   // microseconds
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ulticode::bench {

struct CpuReading {
  double self_us = 0;
  double child_us = 0;                    // the process given to CpuMeter, if any
  std::map<std::string, double> by_name;  // utime + stime of every process so named
};

struct CpuSpent {
  double self_us = 0;
  double child_us = 0;
  std::map<std::string, double> by_name;
};

CpuSpent operator-(const CpuReading& after, const CpuReading& before);

class CpuMeter {
 public:
  explicit CpuMeter(std::vector<std::string> names, pid_t child = 0)
      : names_(std::move(names)), child_(child) {}
  CpuReading Read() const;

 private:
  std::vector<std::string> names_;
  pid_t child_;
};

// utime + stime of `pid` in microseconds (0 when it is gone), and its name.
double ProcessCpuUs(pid_t pid, std::string* name = nullptr);

}  // namespace ulticode::bench
