#include "tests/support/pg_server.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/support/process.h"

namespace ulticode::testing {

PgServer::PgServer() : port_(FreePort()) {
  char tmpl[] = "/tmp/ulticode-pgserver-XXXXXX";
  dir_ = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  ::chmod(dir_.c_str(), 0755);  // user postgres must reach the data directory
}

PgServer::~PgServer() {
  if (dir_.empty()) return;
  RunServersSh(absl::StrCat("ulticode_pg_crash ", dir_, "/pg"));
  RunCommand("rm -rf " + dir_);
}

bool PgServer::Start(std::string* error) {
  // Durable against a crash of PostgreSQL itself (what Crash() does), not of
  // the machine: synchronous_commit on, fsync off.
  auto r = RunServersSh(absl::StrCat("ulticode_pg_start ", dir_, "/pg ", port_, " process"));
  if (r.exit_code != 0) {
    *error = r.output;
    return false;
  }
  return true;
}

bool PgServer::Crash(std::string* error) {
  auto r = RunServersSh(absl::StrCat("ulticode_pg_crash ", dir_, "/pg"));
  if (r.exit_code != 0) {
    *error = r.output;
    return false;
  }
  return Start(error);
}

int PgServer::TerminateBackends() {
  auto r = RunCommand(absl::StrCat(
      "psql -h 127.0.0.1 -p ", port_, " -U postgres -d postgres -tAc \"SELECT count(*) FROM ",
      "(SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = ",
      "'client backend' AND pid <> pg_backend_pid()) t\""));
  int n = 0;
  std::string out = r.output;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return absl::SimpleAtoi(out, &n) ? n : -1;
}

}  // namespace ulticode::testing
