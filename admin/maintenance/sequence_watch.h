// Notices an owner's events going missing. Every owner numbers its events in
// the business transaction (AuditEvent.owner_sequence, sealed): a number
// that has not reached audit_logs a grace period after a higher one had is
// an event that committed and was kept from Admin (marked CONFIRMED or DEAD
// by someone holding the owner's database login, say). Numbers an owner took
// and never committed (rollbacks, crashes, the numbers a sequence skips after
// a failover) are attested void by the owner itself
// (owner/outbox/number_attestor.h) and do not count as missing.
//
// Each Check, per owner: the highest number seen becomes the horizon; once
// the horizon is `grace` old, the numbers up to it are examined (one index
// range count, and a gap search only when some are missing) and every run of
// missing numbers is recorded in owner_sequence_gaps. Open gaps are checked
// again, and resolved when their numbers arrive late (a re-send after a
// Redis loss). ulticode_owner_sequence_missing{owner} counts what is still
// missing; alert UlticodeEventsMissing.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::admin::maintenance {

class SequenceWatch {
 public:
  SequenceWatch(std::vector<std::string> owners, absl::Duration grace,
                prometheus::Registry& registry);
  absl::Status Check(pg::Connection& conn);

 private:
  absl::Status CheckOwner(pg::Connection& conn, const std::string& owner);
  // Records the runs of (through, horizon] neither present nor attested void.
  absl::Status RecordGaps(pg::Transaction& tx, const std::string& owner, int64_t through,
                          int64_t horizon, const std::vector<std::pair<int64_t, int64_t>>& voids);

  const std::vector<std::string> owners_;
  const absl::Duration grace_;
  prometheus::Family<prometheus::Gauge>* missing_;
  prometheus::Family<prometheus::Counter>* gaps_;
};

}  // namespace ulticode::admin::maintenance
