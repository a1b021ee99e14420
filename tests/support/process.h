// Child processes for tests that run real binaries (servers, tools).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ulticode::testing {

// A child process with stdout+stderr captured to a log file. Killed with
// SIGKILL on destruction if still running.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // `env` entries are "NAME=value", added to the inherited environment.
  bool Start(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  // Sends `sig`; waits up to `timeout` for exit. Returns the exit status as
  // from waitpid (or -1 on timeout).
  int Stop(int sig, std::chrono::milliseconds timeout);
  bool Running();
  pid_t pid() const { return pid_; }
  // Everything the child wrote so far.
  std::string Output() const;

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string log_path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};
// Runs a command to completion (sh -c), capturing output.
CommandResult RunCommand(const std::string& command);

// A free TCP port on 127.0.0.1 (bound and released; racy but fine in tests).
int FreePort();

// True once something accepts TCP connections on 127.0.0.1:port.
bool PortOpen(int port);

// A memory figure of a process from /proc/<pid>/status, in bytes ("VmRSS":
// resident now, "VmHWM": its peak); -1 when unknown.
int64_t ProcessMemory(pid_t pid, const std::string& field);

}  // namespace ulticode::testing
