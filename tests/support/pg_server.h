// A private PostgreSQL 15 server (initdb'd in a temp directory, started with
// scripts/lib/servers.sh) for tests that restart or crash the database
// without disturbing the other tests.
#pragma once

#include <string>

#include "tests/support/test_env.h"

namespace ulticode::testing {

class PgServer {
 public:
  PgServer();
  ~PgServer();
  // initdb on first use, then start; true once it accepts connections.
  bool Start(std::string* error);
  // pg_ctl stop -m immediate: a crash (no checkpoint); then Start() again.
  bool Crash(std::string* error);
  // pg_terminate_backend() of every other client backend; returns how many.
  int TerminateBackends();
  PgEndpoint endpoint() const { return {"127.0.0.1", port_, "postgres"}; }
  // The data directory is dir() + "/pg".
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int port_;
};

}  // namespace ulticode::testing
