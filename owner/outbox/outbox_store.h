// The audit outbox table (see migrations/10001_outbox.sql): the only
// code that reads or writes it.
//
// Append() is the write side of a business transaction: it takes the open
// transaction, so no code path can write an outbox row outside one. The rest
// is the dispatcher's side, inside its cycle's transaction: lock due rows
// (LockDue), then settle them (published, rescheduled, dead) while the locks
// are held; and the confirmation on proof (ConfirmLogged) and the re-send
// sweep.
//
// Functions are stateless; the connection decides the thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"
#include "owner/outbox/resend.h"

namespace ulticode::outbox {

// The outbox's schema (versions 10001+, applied after the service's own) is
// outbox::Migrations() in the generated "owner/outbox/migrations.h".
// The DML a service's runtime role needs on the outbox tables
// (migrations::GrantRuntime).
const std::vector<std::string>& RuntimeGrants();

// The MAC of an outbox row's payload: HMAC-SHA256 under a secret derived
// from `key` (SigningKey::DeriveSecret): only a holder of that private key
// (this owner's code) can make or check it.
absl::StatusOr<std::string> RowMac(const crypto::SigningKey& key, absl::string_view payload);

// Whether Append commits to personal data (schema_version 2, the default:
// docs/personal-data.md) or embeds it (schema_version 1: for owners
// upgraded before Admin reads version 2, and the benchmark's reference).
// Set once at start-up (--personal-data-commitments), before any Append.
void SetPersonalDataCommitments(bool on);

// Numbers (the owner's next owner_sequence), validates, MACs (RowMac over
// the exact serialized bytes) and appends `event` inside `tx`; returns the
// number, which is lost if `tx` rolls back. INVALID_ARGUMENT when the event
// breaks the contract (a bug in the caller, never the client's fault). With
// commitments on, an event built with its personal values (schema_version
// 1) is committed first (audit::CommitPersonalData): the row holds the
// schema_version 2 envelope, audit_outbox_personal its values. The
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
  std::string mac;     // RowMac of payload
  std::string key_id;  // the key the MAC was made with
  // The seal of its first publication and the key that made it; empty
  // until it was published.
  std::string seal;
  std::string sealed_by;
  // Its personal values (a serialized PersonalValues, the stream entry's
  // `personal` field); empty when it has none.
  std::string personal;
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
  // The seal it was sealed with in this cycle and its key; empty when it
  // went with the seal it kept.
  std::string seal;
  std::string sealed_by;
};
// Marks locked rows PUBLISHED (attempts and publication + 1), with the
// seals made in this cycle; returns how many changed.
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

// What an outbox row contributes to its leaf in Admin's log
// (common/tlog/leaf.h): the event's exact bytes.
struct OutboxPayload {
  std::string event_id;
  std::string payload;
};
// The rows of `event_ids` that exist (canonical lowercase UUIDs).
absl::StatusOr<std::vector<OutboxPayload>> PayloadsOf(pg::Connection& conn,
                                                      const std::vector<std::string>& event_ids);

// An event proved to be in Admin's log, with the key id and seal of its
// leaf (empty: the row's own are kept).
struct Proved {
  std::string event_id;
  std::string key_id;
  std::string seal;
};
// Marks CONFIRMED the rows of `proved` (outbox/witness.h), the only way a
// row turns CONFIRMED, and keeps the seal the log holds as the row's. Only
// rows handed to the publisher (PUBLISHED, or PENDING again after a
// committed attempt) since their last replay or redrive
// (migrations/10001_outbox.sql: a proof that arrives before the row is
// published again confirms nothing). A proof that arrives while the
// publishing cycle still holds the row waits for its commit. Rows are
// locked in event_id order. Returns how many turned CONFIRMED.
absl::StatusOr<int64_t> ConfirmLogged(pg::Connection& conn, const std::vector<Proved>& proved);

// OutboxOperations/ErasePersonalData: erases `subject`'s values of events
// up to `through` (waiting for a cycle that is publishing one of them),
// records the erasure (migrations/10001_outbox.sql), and has the
// PUBLISHED rows among them published again (their entries are deleted:
// personal_erasure.h).
struct Erased {
  int64_t values = 0;
  int64_t republished = 0;
};
absl::StatusOr<Erased> ErasePersonalData(pg::Transaction& tx, const std::string& subject,
                                         absl::Time through, const std::string& requested_by);

// The database's clock now (clock_timestamp()).
absl::StatusOr<absl::Time> DatabaseClock(pg::Connection& conn);

// The resend sweep (resend.h): up to `limit` PUBLISHED rows whose entries
// `evidence` shows lost go back to PENDING, due now, resends + 1; only rows
// published before `published_before` (taken before the look: a row
// published since may be in a stream the look did not see).
absl::StatusOr<int64_t> RequeueLost(pg::Connection& conn, const LossEvidence& evidence,
                                    absl::Time published_before, int limit);

// Up to `limit` PUBLISHED rows whose entries `acked` (what Admin had
// acknowledged at least `resend_after` ago) covers, or whose entries are
// above the stream's `newest` id (written to another incarnation of the
// stream, whose clock was ahead), published at least
// resend_after x 2^resends ago (at most x64 and one hour unless resend_after
// is longer), go back to PENDING, due now, resends + 1: delivered and still
// unproved, so Admin refused the event or its proof was lost; an event Admin
// refuses (poison: never proved) is re-sent ever more rarely.
absl::StatusOr<int64_t> RequeueUnproved(pg::Connection& conn, const Acked& acked,
                                        const std::optional<std::string>& newest,
                                        absl::Duration resend_after, int limit);

// OutboxOperations/Replay: every CONFIRMED row created in [from, to) goes
// back to PENDING, due now, to be published again (Admin lost them); no
// proof arriving before they are published again confirms them. Rows are
// locked in event_id order, the order ConfirmLogged locks in. Returns how
// many.
absl::StatusOr<int64_t> ReplayConfirmed(pg::Transaction& tx, absl::Time from, absl::Time to);

}  // namespace ulticode::outbox
