// A private redis-server child on a free port, for tests that stop, restart
// or wipe Redis without disturbing other tests.
#pragma once

#include <memory>
#include <string>

#include "tests/support/process.h"

namespace ulticode::testing {

class RedisServer {
 public:
  RedisServer();
  ~RedisServer();
  // Starts (or restarts) on the same port; true once it answers PING.
  bool Start();
  // SIGKILL: an abrupt loss, no persistence.
  void Kill();
  // SIGSTOP / SIGCONT: a frozen server (clients time out, nothing refuses).
  void Freeze();
  void Thaw();
  int port() const { return port_; }

 private:
  int port_;
  std::string aclfile_;  // empty outside scripts/test.sh: default user on
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace ulticode::testing
