// A PostgreSQL 15 primary with one streaming standby on loopback (initdb,
// then pg_basebackup), for tests of database failover. Node roles move: after
// Promote() the standby is the primary, and RebuildStandby() makes the dead
// node a standby of it again. Connections should use endpoint(), which lists
// both nodes and finds the primary (target_session_attrs=read-write).
#pragma once

#include <string>
#include <vector>

#include "tests/support/test_env.h"

namespace ulticode::testing {

class PgCluster {
 public:
  enum class Replication {
    kSynchronous,   // synchronous_standby_names = '*': a commit waits for the standby
    kAsynchronous,  // the primary never waits
  };
  explicit PgCluster(Replication replication);
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // initdb and start the primary, then clone and start the standby.
  bool Start(std::string* error);
  PgEndpoint endpoint() const;

  // SIGSTOP / SIGCONT both ends of the replication connection, the standby's
  // WAL receiver and the primary's WAL sender (what the receiver's socket
  // already holds would otherwise still arrive): the standby certainly falls
  // behind (with synchronous replication, commits on the primary wait).
  bool FreezeReplication(std::string* error);
  void ThawReplication();
  // SIGKILL the primary and all its processes. It never comes back as a
  // primary.
  void KillPrimary();
  // Promote the standby; it is the primary from now on.
  bool Promote(std::string* error);
  // Make the dead node a fresh standby of the current primary.
  bool RebuildStandby(std::string* error);

 private:
  std::string DataDir(int node) const;
  std::string Psql(int node, const std::string& sql) const;

  const Replication replication_;
  std::string dir_;
  int ports_[2];
  int primary_ = 0;
  std::vector<int> frozen_;  // pids stopped by FreezeReplication
};

}  // namespace ulticode::testing
