#include "tests/support/pg_cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/support/process.h"

namespace ulticode::testing {

PgCluster::PgCluster(Replication replication)
    : replication_(replication), ports_{FreePort(), FreePort()} {
  char tmpl[] = "/tmp/ulticode-pgcluster-XXXXXX";
  dir_ = ::mkdtemp(tmpl) != nullptr ? tmpl : "";
  ::chmod(dir_.c_str(), 0755);  // user postgres must reach the data directories
}

PgCluster::~PgCluster() {
  if (dir_.empty()) return;
  ThawReplication();
  for (int node : {0, 1}) RunServersSh("ulticode_pg_kill9 " + DataDir(node));
  RunCommand("rm -rf " + dir_);
}

std::string PgCluster::DataDir(int node) const { return absl::StrCat(dir_, "/node", node, "/pg"); }

std::string PgCluster::Psql(int node, const std::string& sql) const {
  auto r = RunCommand(absl::StrCat("psql -h 127.0.0.1 -p ", ports_[node],
                                   " -U postgres -d postgres -tAc \"", sql, "\" 2>&1"));
  return std::string(absl::StripAsciiWhitespace(r.output));
}

PgEndpoint PgCluster::endpoint() const {
  PgEndpoint e{"127.0.0.1", ports_[0], "postgres"};
  e.standby_port = ports_[1];
  return e;
}

bool PgCluster::Start(std::string* error) {
  auto r = RunServersSh(absl::StrCat("ulticode_pg_start ", DataDir(0), " ", ports_[0], " process"));
  if (r.exit_code != 0) {
    *error = r.output;
    return false;
  }
  // Set before the clone, so the standby (a future primary) inherits it.
  if (replication_ == Replication::kSynchronous) {
    Psql(0, "ALTER SYSTEM SET synchronous_standby_names = '*'");
    Psql(0, "SELECT pg_reload_conf()");
  }
  primary_ = 0;
  return RebuildStandby(error);
}

bool PgCluster::RebuildStandby(std::string* error) {
  const int standby = 1 - primary_;
  auto r = RunServersSh(absl::StrCat("mkdir -p ", dir_, "/node", standby, " && chmod 755 ", dir_,
                                     "/node", standby, " && ulticode_pg_standby ",
                                     DataDir(primary_), " ", ports_[primary_], " ",
                                     DataDir(standby), " ", ports_[standby]));
  if (r.exit_code != 0) {
    *error = r.output;
    return false;
  }
  return true;
}

bool PgCluster::FreezeReplication(std::string* error) {
  int receiver = 0, sender = 0;
  const std::string r = Psql(1 - primary_, "SELECT pid FROM pg_stat_wal_receiver");
  const std::string s = Psql(primary_, "SELECT pid FROM pg_stat_replication");
  if (!absl::SimpleAtoi(r, &receiver) || !absl::SimpleAtoi(s, &sender) || receiver <= 0 ||
      sender <= 0) {
    *error = absl::StrCat("no replication connection: receiver \"", r, "\", sender \"", s, "\"");
    return false;
  }
  for (int pid : {sender, receiver}) {
    if (::kill(pid, SIGSTOP) == 0) frozen_.push_back(pid);
  }
  return frozen_.size() == 2;
}

void PgCluster::ThawReplication() {
  for (int pid : frozen_) ::kill(pid, SIGCONT);
  frozen_.clear();
}

void PgCluster::KillPrimary() { RunServersSh("ulticode_pg_kill9 " + DataDir(primary_)); }

bool PgCluster::Promote(std::string* error) {
  const int standby = 1 - primary_;
  auto r = RunServersSh("ulticode_pg_promote " + DataDir(standby));
  if (r.exit_code != 0) {
    *error = r.output;
    return false;
  }
  primary_ = standby;
  return true;
}

}  // namespace ulticode::testing
