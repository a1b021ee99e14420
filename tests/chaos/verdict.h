// The chaos tests' verdict: once the faults are over, wait for quiescence
// (every outbox row CONFIRMED, the inbox drained), then check the three
// databases directly: every committed change has exactly one audit row with
// the right content, no audit row without its outbox row, no duplicates, no
// DEAD inbox rows, every OK call's change and audit row present.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/pg/connection.h"
#include "tests/chaos/load_driver.h"
#include "tests/support/mesh.h"

namespace ulticode::chaos {

// A connection as the test's superuser; null when the database is down.
std::unique_ptr<pg::Connection> Connect(const std::string& dsn);

struct OutboxRow {
  audit::Owner owner;
  std::string state;
  std::string payload;
};

struct Verdict {
  bool quiet = false;                       // quiescence reached within 180 s
  double converge_s = 0;                    // from the end of the load to quiescence
  std::map<std::string, OutboxRow> outbox;  // event id -> the owners' outbox rows
  std::set<std::string> logged;             // event ids in audit_logs
  int64_t lost = 0, duplicated = 0, orphaned = 0, wrong = 0, unconfirmed = 0, dead = 0, poison = 0;
  int64_t ok_with_event = 0;  // OK calls that changed something
  int64_t ok_missing = 0;     // ... whose audit row is missing
  int64_t ok_vanished = 0;    // ... whose business change (outbox row) is gone
  int64_t resends = 0;
  // Event numbers Admin reports missing once every number has been examined:
  // numbers lost to kills, crashes and failovers must all be attested void.
  int64_t missing_numbers = 0;
  // Admin's transparency log, exported through its RPCs, verified by
  // `ulticode-verify check` with public keys only (the leaves, the roots,
  // the checkpoints and the owners' cosignatures).
  bool log_verified = false;
  std::string log_report;  // the verifier's output

  // "events=... audit_rows=... lost=... ..." for the summary line.
  std::string Summary() const;
  // The invariants: every count above zero fails the test.
  void ExpectClean() const;
};

// Waits for quiescence after `load_end` and checks the databases of `mesh`
// against the OK calls; failures are reported as test failures.
void Settle(testing::Mesh& mesh, const std::vector<OkCall>& ok_calls, absl::Time load_end,
            Verdict& v);

}  // namespace ulticode::chaos
