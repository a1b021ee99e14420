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
// A committed row is never voided, whatever its state: the mark
// (outbox_numbers_attested) only moves forward and never past the numbers
// handed out, and retention deletes no row above it (owner/outbox/migrations/10001_outbox.sql), so
// a number the attestor finds without a row never had a committed one, whatever the owner's runtime
// login did (an event kept from Admin by marking it CONFIRMED still shows as missing there). So an
// attestor that was away (or held off) attests everything since the mark when it is back.
//
// One replica at a time (an advisory lock); thread-compatible. A replica
// that finds the lock taken run after run reports how long in
// ulticode_outbox_numbers_lock_missed_seconds (alert
// UlticodeOutboxNumbersLockHeld): an honest run holds it for one short
// transaction.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct AttestorOptions {
  absl::Duration settle = absl::Minutes(2);
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
  std::optional<absl::Time> missed_since_;  // first run of the current streak without the lock
  prometheus::Counter* voided_;
  prometheus::Gauge* lock_missed_;
};

}  // namespace ulticode::outbox
