// The audit outbox table (see migrations/10001_audit_outbox.sql): the only
// code that reads or writes it.
//
// Append() is the write side of a business transaction: it takes the open
// transaction, so no code path can write an outbox row outside one. The rest
// is the dispatcher's side, inside its cycle's transaction: lock due rows
// (LockDue), then settle them (published, rescheduled, dead) while the locks
// are held; and the receipt side (Confirm) and the re-send sweep.
//
// Functions are stateless; the connection decides the thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/audit/receipt.h"
#include "common/crypto/crypto.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"

namespace ulticode::outbox {

// The outbox's schema (versions 10001+, applied after the service's own) is
// outbox::Migrations() in the generated "common/outbox/migrations.h".
// The DML a service's runtime role needs on the outbox tables
// (migrations::GrantRuntime).
const std::vector<std::string>& RuntimeGrants();

// LISTEN channel notified on every commit that appended rows.
inline constexpr char kNotifyChannel[] = "audit_outbox";

// Numbers (the owner's next owner_sequence), validates, signs (Ed25519 over
// the exact serialized bytes) and appends `event` inside `tx`; returns the
// number, which is lost if `tx` rolls back. INVALID_ARGUMENT when the event
// breaks the contract (a bug in the caller, never the client's fault). The
// row's INSERT is deferred (pg::Transaction::Defer): it goes out with the
// transaction's next statement or its COMMIT, and a failure is reported there.
absl::StatusOr<int64_t> Append(pg::Transaction& tx, const audit::AuditEvent& event,
                               const crypto::SigningKey& signer);

// A due row, locked by the dispatcher's cycle transaction.
struct ClaimedRow {
  std::string event_id;
  std::string event_type;
  std::string payload;  // serialized AuditEvent
  int attempts = 0;     // including this cycle's
  int failures = 0;     // consecutive failures before this cycle
  absl::Time created_at;
  std::string signature;  // Ed25519 over payload; empty for rows older than signing
  std::string key_id;
  int64_t publication = 0;  // this cycle's publication number (audit::kPublicationField)
};

// The dispatcher's cycle is ONE transaction: lock up to `limit` due PENDING
// rows (FOR UPDATE SKIP LOCKED: rows another dispatcher holds are skipped),
// publish them while holding the locks, then settle them with one of the
// statements below and commit. A crash or a lost connection rolls the whole
// cycle back: the rows are due again at once (the stream may then hold an
// event twice; Admin's inbox absorbs it). A dispatcher that stalls while
// holding rows is cut off by PostgreSQL (idle_in_transaction_session_timeout).
absl::StatusOr<std::vector<ClaimedRow>> LockDue(pg::Transaction& tx, int limit);

struct Published {
  std::string event_id;
  std::string stream_entry_id;
};
// Marks locked rows PUBLISHED (attempts and publication + 1); returns how
// many changed.
absl::StatusOr<int64_t> MarkPublished(pg::Transaction& tx, const std::vector<Published>& rows);

struct Retry {
  std::string event_id;
  absl::Duration delay;
};
// A transient failure: due again after `delay`, attempts, publication and
// failures + 1 (the XADD may have landed), the error kept.
absl::StatusOr<int64_t> Reschedule(pg::Transaction& tx, const std::vector<Retry>& rows,
                                   const std::string& error);

// A permanent failure: DEAD at once with its reason.
absl::StatusOr<int64_t> MarkDead(pg::Transaction& tx, const std::string& event_id,
                                 const std::string& reason);

// Admin's verified receipts: the events are durably in its inbox. Marks a
// row CONFIRMED only when
//  - it was handed to the publisher: PUBLISHED, or PENDING again after a
//    committed attempt (a row the re-send sweep put back);
//  - the receipt names a publication the row committed an attempt for since
//    it was last replayed or redriven (migrations/10007_publication.sql): a
//    receipt of an earlier publication, or one without a publication number
//    (a previous release's), confirms nothing;
//  - its stored payload hashes to the receipted SHA-256.
// A receipt that arrives while the publishing cycle still holds the row
// waits for its commit; one for an XADD whose cycle rolled back names a
// publication the row has not committed and is ignored (the row is
// published again and receipted again). Never-published, DEAD, already
// CONFIRMED, unknown or mismatching rows are left alone, so receipts are
// idempotent. Returns how many rows changed.
absl::StatusOr<int64_t> Confirm(pg::Connection& conn, const std::vector<audit::ReceiptItem>& items);

// What an outbox row contributes to its leaf in Admin's log
// (common/tlog/leaf.h): the signed bytes, their signature and key id.
struct OutboxLeaf {
  std::string event_id;
  std::string key_id;
  std::string signature;
  std::string payload;
};
// The rows of `event_ids` that exist (canonical lowercase UUIDs).
absl::StatusOr<std::vector<OutboxLeaf>> LeavesOf(pg::Connection& conn,
                                                 const std::vector<std::string>& event_ids);

// Marks CONFIRMED the rows of `event_ids` whose events are proved to be in
// Admin's log (outbox/witness.h): only rows handed to the publisher since
// their last replay, as Confirm; locks in event_id order like Confirm.
// Returns how many turned CONFIRMED.
absl::StatusOr<int64_t> ConfirmLogged(pg::Connection& conn,
                                      const std::vector<std::string>& event_ids);

// The resend sweep: up to `limit` rows PUBLISHED without a receipt go back
// to PENDING, due now, resends + 1. The wait doubles with each re-send
// (resend_after x 2^resends, at most x64 and one hour unless resend_after is
// longer), so an Admin that is down or behind is not buried in re-sends, and
// an event Admin refuses (poison: no receipt ever) is re-sent ever more rarely.
absl::StatusOr<int64_t> RequeueUnconfirmed(pg::Connection& conn, absl::Duration resend_after,
                                           int limit);

// OutboxOperations/Replay: every CONFIRMED row created in [from, to) goes
// back to PENDING, due now, to be published again (Admin lost them); no
// receipt of an earlier publication confirms them again. Rows are locked in
// event_id order, the order Confirm locks in. Returns how many.
absl::StatusOr<int64_t> ReplayConfirmed(pg::Transaction& tx, absl::Time from, absl::Time to);

}  // namespace ulticode::outbox
