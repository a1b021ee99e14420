// The owner's account of its own event numbers (AuditEvent.owner_sequence).
// Admin reports numbers that never reach it (admin/maintenance/
// sequence_watch.h); most such numbers are harmless: a transaction that
// rolled back after taking one, a process killed mid-transaction, the up to
// 32 numbers a PostgreSQL sequence skips after a crash or a failover. The
// owner, which holds the signing key, tells Admin which ones: every run it
// notes the sequence's position, and once a position is `settle` old (no
// transaction that took a number before it can still commit: statement,
// lock and idle-in-transaction timeouts end them long before) it lists the
// numbers up to there that have no outbox row, in one signed
// `<owner>.outbox.numbers_voided` event, in the same transaction as the
// `through` mark.
//
// A committed row is never voided, whatever its state: an event kept from
// Admin (marked CONFIRMED before publication) keeps its row for at least an
// hour, far longer than `settle`, so it still shows as missing at Admin.
// Numbers older than `max_age` when the attestor comes back (it was down) are
// not attested: retention may have deleted confirmed rows among them.
//
// One replica at a time (an advisory lock); thread-compatible.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct AttestorOptions {
  absl::Duration settle = absl::Minutes(2);
  absl::Duration max_age = absl::Minutes(30);
};

class NumberAttestor {
 public:
  NumberAttestor(audit::Owner owner, const crypto::SigningKey& signer, AttestorOptions options,
                 prometheus::Registry& registry);
  absl::Status RunOnce(pg::Connection& conn);

 private:
  // The newest noted position at least `settle` old, or -1.
  int64_t Settled(absl::Time now);

  const audit::Owner owner_;
  const crypto::SigningKey& signer_;
  const AttestorOptions options_;
  std::deque<std::pair<absl::Time, int64_t>> positions_;
  prometheus::Counter* voided_;
};

}  // namespace ulticode::outbox
