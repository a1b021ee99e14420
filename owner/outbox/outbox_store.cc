#include "owner/outbox/outbox_store.h"

#include <algorithm>
#include <atomic>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"

namespace ulticode::outbox {
namespace {

constexpr pg::Statement kNextSequence{"outbox.next_sequence",
                                      "SELECT nextval('audit_outbox_sequence')"};

constexpr pg::Statement kAppend{
    "outbox.append",
    "INSERT INTO audit_outbox (event_id, event_type, payload, mac, key_id, owner_sequence)"
    " VALUES ($1::uuid, $2, $3, $4, $5, $6)"};

// The values the row's envelope commits to, unless their subject was
// erased through the event's time or later (an erasure that committed
// while this transaction ran: migrations/10001_outbox.sql).
constexpr pg::Statement kAppendPersonal{
    "outbox.append_personal",
    "INSERT INTO audit_outbox_personal (event_id, path, subject, value, salt, occurred_at)"
    " SELECT $1::uuid, t.path, t.subject, t.value, decode(t.salt, 'hex'), $2::timestamptz"
    " FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS t(path, subject, value, salt)"
    " WHERE NOT EXISTS (SELECT 1 FROM personal_erasures e"
    "                   WHERE e.subject = t.subject AND e.erased_through >= $2::timestamptz)"};

// Read under the cycle's locks on their rows, which an erasure takes too
// (migrations/10001_outbox.sql): it waits for the cycle.
constexpr pg::Statement kPersonalOf{
    "outbox.personal_of",
    "SELECT event_id::text, path, value, salt FROM audit_outbox_personal"
    " WHERE event_id = ANY($1::uuid[]) ORDER BY event_id, path"};

constexpr pg::Statement kErasePersonal{"outbox.erase_personal",
                                       "SELECT e::text FROM erase_personal_data($1, $2, $3) e"};

// Unconfirmed rows whose values were erased are published again without
// them (their entries are deleted: personal_erasure.h).
constexpr pg::Statement kRepublish{
    "outbox.republish",
    "UPDATE audit_outbox SET state = 'PENDING', next_attempt_at = now(), resends = resends + 1"
    " WHERE event_id IN (SELECT event_id FROM audit_outbox WHERE event_id = ANY($1::uuid[])"
    "   AND state = 'PUBLISHED' ORDER BY event_id FOR UPDATE)"};

// Due rows, locked for the cycle's transaction; rows another dispatcher
// holds are skipped, never waited for.
constexpr pg::Statement kLockDue{
    "outbox.lock_due",
    "SELECT event_id::text AS event_id, event_type, payload, attempts + 1 AS attempts, failures,"
    "   created_at, mac, key_id, coalesce(seal, ''::bytea) AS seal,"
    "   coalesce(sealed_by, '') AS sealed_by"
    " FROM audit_outbox"
    " WHERE state = 'PENDING' AND next_attempt_at <= now()"
    " ORDER BY next_attempt_at LIMIT $1"
    " FOR UPDATE SKIP LOCKED"};

constexpr pg::Statement kMarkPublished{
    "outbox.mark_published",
    "UPDATE audit_outbox o SET state = 'PUBLISHED', published_at = now(),"
    "   attempts = o.attempts + 1, publication = o.publication + 1, last_error = NULL,"
    "   failures = 0, stream_entry_id = t.entry,"
    "   seal = coalesce(decode(NULLIF(t.seal, ''), 'hex'), o.seal),"
    "   sealed_by = coalesce(NULLIF(t.key, ''), o.sealed_by)"
    " FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS t(id, entry, seal, key)"
    " WHERE o.event_id = t.id AND o.state = 'PENDING'"};

constexpr pg::Statement kReschedule{
    "outbox.reschedule",
    "UPDATE audit_outbox o SET next_attempt_at = now() + t.delay * interval '1 second',"
    "   attempts = o.attempts + 1, publication = o.publication + 1, failures = o.failures + 1,"
    "   last_error = $3"
    " FROM unnest($1::uuid[], $2::float8[]) AS t(id, delay)"
    " WHERE o.event_id = t.id AND o.state = 'PENDING'"};

constexpr pg::Statement kMarkDead{
    "outbox.mark_dead",
    "UPDATE audit_outbox SET state = 'DEAD', attempts = attempts + 1, last_error = $2"
    " WHERE event_id = $1::uuid AND state = 'PENDING'"};

// Waits for a dispatcher cycle that holds any of these rows to commit, so the
// UPDATE below (a new statement, a new snapshot) sees what it committed.
constexpr pg::Statement kLockForConfirm{
    "outbox.lock_for_confirm",
    "SELECT 1 FROM audit_outbox WHERE event_id = ANY($1::uuid[]) ORDER BY event_id FOR UPDATE",
    absl::Seconds(30)};

constexpr pg::Statement kPayloadsOf{
    "outbox.payloads_of",
    "SELECT event_id::text, payload FROM audit_outbox WHERE event_id = ANY($1::uuid[])",
    absl::Seconds(30)};

constexpr pg::Statement kConfirmLogged{
    "outbox.confirm_logged",
    "UPDATE audit_outbox o SET state = 'CONFIRMED', confirmed_at = now(), last_error = NULL,"
    "   seal = coalesce(decode(NULLIF(t.seal, ''), 'hex'), o.seal),"
    "   sealed_by = coalesce(NULLIF(t.key, ''), o.sealed_by)"
    " FROM unnest($1::uuid[], $2::text[], $3::text[]) AS t(id, key, seal)"
    " WHERE o.event_id = t.id AND o.publication > o.publication_floor"
    "   AND o.state IN ('PUBLISHED', 'PENDING')",
    absl::Seconds(30)};

constexpr pg::Statement kClock{"outbox.clock", "SELECT clock_timestamp()"};

// A row's stream entry was acknowledged by Admin's group when it is at or
// below $1 (the group's last-delivered-id; NULL: no group) and below $2 (its
// smallest pending id; NULL: none pending).
// Entries lost: published before the stream lost its data (at or below $3),
// or removed (at or below $4) before the group acknowledged them; only rows
// published before $6, when the sweep began to look (a row published since
// may be in a stream the look did not see).
constexpr pg::Statement kRequeueLost{
    "outbox.requeue_lost",
    "UPDATE audit_outbox o SET state = 'PENDING', next_attempt_at = now(), resends = o.resends + 1"
    " FROM (SELECT event_id FROM audit_outbox"
    "       WHERE state = 'PUBLISHED' AND published_at < $6 AND ("
    "         log_stream_id(stream_entry_id) <= log_stream_id($3::text)"
    "         OR (log_stream_id(stream_entry_id) <= log_stream_id($4::text)"
    "             AND NOT coalesce("
    "($1::text IS NOT NULL AND log_stream_id(stream_entry_id) <= log_stream_id($1)"
    "   AND ($2::text IS NULL OR log_stream_id(stream_entry_id) < log_stream_id($2)))"
    "               , false)))"
    "       ORDER BY published_at LIMIT $5 FOR UPDATE SKIP LOCKED) d"
    " WHERE o.event_id = d.event_id"};

// Entries acknowledged (as above) as of at least $3 seconds ago, or above
// the stream's last generated id $5 (written to another incarnation of the
// stream), and still unproved; the wait doubles with each re-send (at most
// x64 and one hour unless $3 is longer). A row without a stream id (a
// previous release's) goes by its age alone.
constexpr pg::Statement kRequeueUnproved{
    "outbox.requeue_unproved",
    "UPDATE audit_outbox o SET state = 'PENDING', next_attempt_at = now(), resends = o.resends + 1"
    " FROM (SELECT event_id FROM audit_outbox"
    "       WHERE state = 'PUBLISHED' AND published_at <= now() -"
    "         least($3::float8 * power(2, least(resends, 6)), greatest($3::float8, 3600))"
    "           * interval '1 second'"
    "         AND (log_stream_id(stream_entry_id) IS NULL"
    "   OR log_stream_id(stream_entry_id) > log_stream_id($5::text) OR"
    "   ($1::text IS NOT NULL AND log_stream_id(stream_entry_id) <= log_stream_id($1)"
    "   AND ($2::text IS NULL OR log_stream_id(stream_entry_id) < log_stream_id($2))))"
    "       ORDER BY published_at LIMIT $4 FOR UPDATE SKIP LOCKED) d"
    " WHERE o.event_id = d.event_id"};

// publication_floor = publication + 1: past the number a cycle that published
// and then rolled back may have used, so no proof arriving before the row is
// published again confirms it (kConfirmLogged).
constexpr pg::Statement kReplayConfirmed{
    "outbox.replay_confirmed",
    "UPDATE audit_outbox SET state = 'PENDING', next_attempt_at = now(), attempts = 0,"
    "   resends = resends + 1, publication = publication + 1, publication_floor = publication + 1"
    " WHERE event_id IN (SELECT event_id FROM audit_outbox WHERE state = 'CONFIRMED'"
    "   AND created_at >= $1 AND created_at < $2 ORDER BY event_id FOR UPDATE)",
    absl::Minutes(5)};

std::string Truncated(const std::string& s) { return s.size() <= 1000 ? s : s.substr(0, 1000); }

constexpr char kRowMacLabel[] = "ulticode/outbox-mac/v1";

}  // namespace

absl::StatusOr<std::string> RowMac(const crypto::SigningKey& key, absl::string_view payload) {
  ASSIGN_OR_RETURN(const std::string secret, key.DeriveSecret(kRowMacLabel));
  return crypto::HmacSha256(secret, payload);
}

namespace {

std::atomic<bool> g_commit_personal_data{true};

void DeferPersonal(pg::Transaction& tx, const audit::AuditEvent& event,
                   const audit::PersonalValues& personal) {
  std::vector<std::string> paths, subjects, values, salts;
  for (const audit::PersonalValue& v : personal.values()) {
    paths.push_back(v.path());
    subjects.push_back(audit::FindCommitment(event, v.path())->subject());
    values.push_back(v.value());
    salts.push_back(absl::BytesToHexString(v.salt()));
  }
  const auto& ts = event.occurred_at();
  tx.Defer(
      kAppendPersonal,
      {pg::Text(event.event_id()),
       pg::Time(absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos())),
       pg::TextArray(paths), pg::TextArray(subjects), pg::TextArray(values), pg::TextArray(salts)});
}

}  // namespace

void SetPersonalDataCommitments(bool on) { g_commit_personal_data.store(on); }

absl::StatusOr<int64_t> Append(pg::Transaction& tx, const audit::AuditEvent& event,
                               const crypto::SigningKey& signer) {
  RETURN_IF_ERROR(audit::Validate(event));
  ASSIGN_OR_RETURN(pg::Result next, tx.Execute(kNextSequence));
  const int64_t sequence = next.GetInt64(0, 0);
  audit::AuditEvent numbered = event;
  numbered.set_owner_sequence(static_cast<uint64_t>(sequence));
  audit::PersonalValues personal;
  if (g_commit_personal_data.load(std::memory_order_relaxed)) {
    ASSIGN_OR_RETURN(personal, audit::CommitPersonalData(numbered));
  }
  const std::string payload = audit::Serialize(numbered);
  // A row without its MAC could never be sealed: roll the change back.
  ASSIGN_OR_RETURN(const std::string mac, RowMac(signer, payload));
  // Sent with the transaction's next statement or its COMMIT, which report
  // its failure.
  tx.Defer(kAppend, {pg::Text(event.event_id()), pg::Text(event.event_type()), pg::Bytes(payload),
                     pg::Bytes(mac), pg::Text(signer.key_id()), pg::Int(sequence)});
  if (personal.values_size() > 0) DeferPersonal(tx, numbered, personal);
  return sequence;
}

absl::StatusOr<std::vector<ClaimedRow>> LockDue(pg::Transaction& tx, int limit) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kLockDue, {pg::Int(limit)}));
  std::vector<ClaimedRow> rows;
  rows.reserve(r.rows());
  const int id = r.Column("event_id"), type = r.Column("event_type"), payload = r.Column("payload"),
            attempts = r.Column("attempts"), failures = r.Column("failures"),
            created = r.Column("created_at"), mac = r.Column("mac"), key = r.Column("key_id"),
            seal = r.Column("seal"), sealed_by = r.Column("sealed_by");
  std::vector<std::string> ids;
  for (int i = 0; i < r.rows(); ++i) {
    rows.push_back(ClaimedRow{r.GetString(i, id), r.GetString(i, type), r.GetBytes(i, payload),
                              static_cast<int>(r.GetInt64(i, attempts)),
                              static_cast<int>(r.GetInt64(i, failures)), r.GetTime(i, created),
                              r.GetBytes(i, mac), r.GetString(i, key), r.GetBytes(i, seal),
                              r.GetString(i, sealed_by), /*personal=*/{}});
    ids.push_back(rows.back().event_id);
  }
  if (rows.empty()) return rows;
  ASSIGN_OR_RETURN(pg::Result p, tx.Execute(kPersonalOf, {pg::TextArray(ids)}));
  absl::flat_hash_map<std::string, audit::PersonalValues> personal;
  for (int i = 0; i < p.rows(); ++i) {
    audit::PersonalValue* v = personal[p.GetString(i, 0)].add_values();
    v->set_path(p.GetString(i, 1));
    v->set_value(p.GetString(i, 2));
    v->set_salt(p.GetBytes(i, 3));
  }
  for (ClaimedRow& row : rows) {
    if (auto it = personal.find(row.event_id); it != personal.end()) {
      row.personal = it->second.SerializeAsString();
    }
  }
  return rows;
}

absl::StatusOr<Erased> ErasePersonalData(pg::Transaction& tx, const std::string& subject,
                                         absl::Time through, const std::string& requested_by) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kErasePersonal, {pg::Text(subject), pg::Time(through),
                                                             pg::Text(requested_by)}));
  Erased out;
  out.values = r.rows();
  std::vector<std::string> ids;
  for (int i = 0; i < r.rows(); ++i) ids.push_back(r.GetString(i, 0));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) return out;
  ASSIGN_OR_RETURN(pg::Result republished, tx.Execute(kRepublish, {pg::TextArray(ids)}));
  out.republished = republished.affected_rows();
  return out;
}

absl::StatusOr<int64_t> MarkPublished(pg::Transaction& tx, const std::vector<Published>& rows) {
  if (rows.empty()) return 0;
  std::vector<std::string> ids, entries, seals, keys;
  for (const auto& p : rows) {
    ids.push_back(p.event_id);
    entries.push_back(p.stream_entry_id);
    seals.push_back(absl::BytesToHexString(p.seal));
    keys.push_back(p.sealed_by);
  }
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kMarkPublished, {pg::TextArray(ids), pg::TextArray(entries),
                                               pg::TextArray(seals), pg::TextArray(keys)}));
  return r.affected_rows();
}

absl::StatusOr<int64_t> Reschedule(pg::Transaction& tx, const std::vector<Retry>& rows,
                                   const std::string& error) {
  if (rows.empty()) return 0;
  std::vector<std::string> ids, delays;
  for (const auto& p : rows) {
    ids.push_back(p.event_id);
    delays.push_back(absl::StrCat(absl::ToDoubleSeconds(p.delay)));
  }
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kReschedule, {pg::TextArray(ids), pg::TextArray(delays),
                                                          pg::Text(Truncated(error))}));
  return r.affected_rows();
}

absl::StatusOr<int64_t> MarkDead(pg::Transaction& tx, const std::string& event_id,
                                 const std::string& reason) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kMarkDead, {pg::Text(event_id), pg::Text(Truncated(reason))}));
  return r.affected_rows();
}

absl::StatusOr<std::vector<OutboxPayload>> PayloadsOf(pg::Connection& conn,
                                                      const std::vector<std::string>& event_ids) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kPayloadsOf, {pg::TextArray(event_ids)}));
  std::vector<OutboxPayload> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back({r.GetString(i, 0), r.GetBytes(i, 1)});
  return out;
}

absl::StatusOr<int64_t> ConfirmLogged(pg::Connection& conn, const std::vector<Proved>& proved) {
  if (proved.empty()) return 0;
  std::vector<std::string> ids, keys, seals;
  for (const Proved& p : proved) {
    ids.push_back(p.event_id);
    keys.push_back(p.key_id);
    seals.push_back(absl::BytesToHexString(p.seal));
  }
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  RETURN_IF_ERROR(tx.Execute(kLockForConfirm, {pg::TextArray(ids)}).status());
  ASSIGN_OR_RETURN(
      pg::Result r,
      tx.Execute(kConfirmLogged, {pg::TextArray(ids), pg::TextArray(keys), pg::TextArray(seals)}));
  RETURN_IF_ERROR(tx.Commit());
  return r.affected_rows();
}

namespace {

pg::Param OrNull(const std::optional<std::string>& v) { return v ? pg::Text(*v) : pg::Null(); }

}  // namespace

absl::StatusOr<absl::Time> DatabaseClock(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kClock));
  return r.GetTime(0, 0);
}

absl::StatusOr<int64_t> RequeueLost(pg::Connection& conn, const LossEvidence& evidence,
                                    absl::Time published_before, int limit) {
  ASSIGN_OR_RETURN(
      pg::Result r,
      conn.Execute(kRequeueLost,
                   {OrNull(evidence.acked.last_delivered), OrNull(evidence.acked.smallest_pending),
                    OrNull(evidence.lost_through), OrNull(evidence.removed_through), pg::Int(limit),
                    pg::Time(published_before)}));
  return r.affected_rows();
}

absl::StatusOr<int64_t> RequeueUnproved(pg::Connection& conn, const Acked& acked,
                                        const std::optional<std::string>& newest,
                                        absl::Duration resend_after, int limit) {
  ASSIGN_OR_RETURN(
      pg::Result r,
      conn.Execute(kRequeueUnproved, {OrNull(acked.last_delivered), OrNull(acked.smallest_pending),
                                      pg::Seconds(resend_after), pg::Int(limit), OrNull(newest)}));
  return r.affected_rows();
}

absl::StatusOr<int64_t> ReplayConfirmed(pg::Transaction& tx, absl::Time from, absl::Time to) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kReplayConfirmed, {pg::Time(from), pg::Time(to)}));
  return r.affected_rows();
}

const std::vector<std::string>& RuntimeGrants() {
  static const auto* grants = new std::vector<std::string>{
      // The delivery columns only: the event (event_id, event_type, payload,
      // mac, key_id, created_at) is never rewritten, and the
      // audit_outbox_state_machine trigger (migrations/10001_outbox.sql)
      // keeps the transitions and their timestamps honest.
      "GRANT SELECT, INSERT ON audit_outbox TO {role}",
      "GRANT UPDATE (state, attempts, failures, next_attempt_at, last_error, stream_entry_id,"
      " published_at, confirmed_at, resends, seal, sealed_by,"
      " publication, publication_floor) ON audit_outbox TO {role}",
      "GRANT SELECT, INSERT ON idempotency_keys TO {role}",
      // Personal values go only through erase_personal_data (10001_outbox.sql), which
      // records every erasure.
      "GRANT SELECT, INSERT ON audit_outbox_personal TO {role}",
      "GRANT SELECT ON personal_erasures TO {role}",
      "GRANT EXECUTE ON FUNCTION erase_personal_data(text, timestamptz, text) TO {role}",
      // nextval and reading its position: numbers are taken, never set
      // (setval needs UPDATE).
      "GRANT USAGE, SELECT ON SEQUENCE audit_outbox_sequence TO {role}",
      "GRANT SELECT, INSERT, UPDATE ON outbox_numbers_attested TO {role}",
      "GRANT SELECT, INSERT, UPDATE ON log_witnessed TO {role}",
      // Retention, only through these (no DELETE on the tables): housekeeping.h.
      "GRANT EXECUTE ON FUNCTION outbox_retention(float8, integer),"
      " idempotency_retention(float8, integer) TO {role}",
  };
  return *grants;
}

}  // namespace ulticode::outbox
