#include "admin/consumer/lease_store.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::admin::consumer {
namespace {

constexpr pg::Statement kClaim{
    "inbox.claim",
    "WITH pending AS ("
    "  SELECT id FROM consumer_inbox"
    "  WHERE consumer = $1 AND status = 'PENDING' AND next_retry_at <= now()"
    "    AND id <> ALL($6::int8[])"
    "  ORDER BY next_retry_at LIMIT $4 FOR UPDATE SKIP LOCKED),"
    " expired AS ("
    "  SELECT id FROM consumer_inbox"
    "  WHERE consumer = $1 AND status = 'PROCESSING' AND lease_expires_at <= now()"
    "    AND attempts < $5 AND id <> ALL($6::int8[])"
    "  ORDER BY lease_expires_at LIMIT $4 FOR UPDATE SKIP LOCKED)"
    " UPDATE consumer_inbox c SET status = 'PROCESSING', lease_owner = $2,"
    "   lease_expires_at = now() + $3::float8 * interval '1 second', leased_at = now(),"
    "   fencing_token = nextval('consumer_inbox_fencing_token'), attempts = c.attempts + 1"
    " FROM (SELECT id FROM pending UNION SELECT id FROM expired) d WHERE c.id = d.id"
    " RETURNING c.id, c.event_id::text AS event_id, c.payload, c.fencing_token, c.attempts,"
    "   c.seal, c.key_id"};

constexpr pg::Statement kExpireAtLimit{
    "inbox.expire_at_limit",
    "UPDATE consumer_inbox SET status = 'DEAD',"
    "   last_error = 'lease expired ' || attempts || ' times (worker crashed or stalled each "
    "time)',"
    "   first_failed_at = coalesce(first_failed_at, now()),"
    "   lease_owner = NULL, lease_expires_at = NULL, leased_at = NULL"
    " WHERE id IN (SELECT id FROM consumer_inbox"
    "   WHERE consumer = $1 AND status = 'PROCESSING' AND lease_expires_at <= now()"
    "     AND attempts >= $2 FOR UPDATE SKIP LOCKED)"};

constexpr pg::Statement kRenew{
    "inbox.renew_lease",
    "UPDATE consumer_inbox c SET lease_expires_at = now() + $3::float8 * interval '1 second'"
    " FROM (SELECT i.id FROM consumer_inbox i"
    "       JOIN unnest($1::bigint[], $2::bigint[]) AS t(id, token)"
    "         ON i.id = t.id AND i.fencing_token = t.token"
    "       WHERE i.status = 'PROCESSING' FOR UPDATE OF i SKIP LOCKED) h"
    " WHERE c.id = h.id",
    absl::Seconds(2)};

constexpr pg::Statement kComplete{
    "inbox.complete",
    "UPDATE consumer_inbox c SET status = 'PROCESSED', processed_at = now(), lease_owner = NULL,"
    "   lease_expires_at = NULL, leased_at = NULL, last_error = NULL"
    " FROM unnest($1::bigint[], $2::bigint[]) AS t(id, token)"
    " WHERE c.id = t.id AND c.fencing_token = t.token AND c.status = 'PROCESSING'"
    " RETURNING c.id"};

constexpr pg::Statement kFail{
    "inbox.fail",
    "UPDATE consumer_inbox c SET"
    "   status = CASE WHEN c.attempts >= $5 THEN 'DEAD' ELSE 'PENDING' END,"
    "   next_retry_at = now() + t.delay * interval '1 second', last_error = t.err,"
    "   first_failed_at = coalesce(c.first_failed_at, now()),"
    "   lease_owner = NULL, lease_expires_at = NULL, leased_at = NULL"
    " FROM unnest($1::bigint[], $2::bigint[], $3::float8[], $4::text[]) AS t(id, token, delay, err)"
    " WHERE c.id = t.id AND c.fencing_token = t.token AND c.status = 'PROCESSING'"
    " RETURNING c.status"};

constexpr pg::Statement kMarkDead{
    "inbox.mark_dead",
    "UPDATE consumer_inbox SET status = 'DEAD', last_error = $3,"
    "   first_failed_at = coalesce(first_failed_at, now()),"
    "   lease_owner = NULL, lease_expires_at = NULL, leased_at = NULL"
    " WHERE id = $1 AND fencing_token = $2 AND status = 'PROCESSING'"};

constexpr pg::Statement kPostpone{
    "inbox.postpone",
    "UPDATE consumer_inbox SET status = 'PENDING', attempts = greatest(attempts - 1, 0),"
    "   next_retry_at = now() + $3::float8 * interval '1 second', last_error = $4,"
    "   lease_owner = NULL, lease_expires_at = NULL, leased_at = NULL"
    " WHERE id = $1 AND fencing_token = $2 AND status = 'PROCESSING'"};

void Split(const std::vector<HeldRow>& rows, std::vector<std::string>* ids,
           std::vector<std::string>* tokens) {
  for (const HeldRow& r : rows) {
    ids->push_back(absl::StrCat(r.id));
    tokens->push_back(absl::StrCat(r.fencing_token));
  }
}

std::string Truncated(const std::string& s) { return s.size() <= 1000 ? s : s.substr(0, 1000); }

}  // namespace

absl::StatusOr<std::vector<LeasedRow>> Claim(pg::Connection& conn, const std::string& consumer,
                                             const std::string& lease_owner, absl::Duration lease,
                                             int limit, int max_attempts,
                                             const std::vector<int64_t>& skip) {
  std::vector<std::string> skipped;
  skipped.reserve(skip.size());
  for (int64_t id : skip) skipped.push_back(absl::StrCat(id));
  RETURN_IF_ERROR(
      conn.Execute(kExpireAtLimit, {pg::Text(consumer), pg::Int(max_attempts)}).status());
  ASSIGN_OR_RETURN(
      pg::Result r,
      conn.Execute(kClaim, {pg::Text(consumer), pg::Text(lease_owner), pg::Seconds(lease),
                            pg::Int(limit), pg::Int(max_attempts), pg::TextArray(skipped)}));
  std::vector<LeasedRow> rows;
  rows.reserve(r.rows());
  const int id = r.Column("id"), event_id = r.Column("event_id"), payload = r.Column("payload"),
            token = r.Column("fencing_token"), attempts = r.Column("attempts"),
            seal = r.Column("seal"), key_id = r.Column("key_id");
  for (int i = 0; i < r.rows(); ++i) {
    rows.push_back(LeasedRow{r.GetInt64(i, id), r.GetString(i, event_id), r.GetBytes(i, payload),
                             r.GetInt64(i, token), static_cast<int>(r.GetInt64(i, attempts)),
                             r.GetBytes(i, seal), r.GetString(i, key_id)});
  }
  return rows;
}

absl::StatusOr<int64_t> Renew(pg::Connection& conn, const std::vector<HeldRow>& rows,
                              absl::Duration lease) {
  if (rows.empty()) return 0;
  std::vector<std::string> ids, tokens;
  Split(rows, &ids, &tokens);
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kRenew, {pg::TextArray(ids), pg::TextArray(tokens),
                                                       pg::Seconds(lease)}));
  return r.affected_rows();
}

absl::StatusOr<std::vector<int64_t>> CompleteHeld(pg::Transaction& tx,
                                                  const std::vector<HeldRow>& rows) {
  std::vector<int64_t> held;
  if (rows.empty()) return held;
  std::vector<std::string> ids, tokens;
  Split(rows, &ids, &tokens);
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kComplete, {pg::TextArray(ids), pg::TextArray(tokens)}));
  for (int i = 0; i < r.rows(); ++i) held.push_back(r.GetInt64(i, 0));
  return held;
}

absl::StatusOr<std::pair<int64_t, int64_t>> Fail(pg::Connection& conn,
                                                 const std::vector<Failure>& failures,
                                                 int max_attempts) {
  if (failures.empty()) return std::make_pair(int64_t{0}, int64_t{0});
  std::vector<std::string> ids, tokens, delays, errors;
  for (const Failure& f : failures) {
    ids.push_back(absl::StrCat(f.row.id));
    tokens.push_back(absl::StrCat(f.row.fencing_token));
    delays.push_back(absl::StrCat(absl::ToDoubleSeconds(f.retry_delay)));
    errors.push_back(Truncated(f.error));
  }
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(kFail, {pg::TextArray(ids), pg::TextArray(tokens),
                                                      pg::TextArray(delays), pg::TextArray(errors),
                                                      pg::Int(max_attempts)}));
  int64_t dead = 0;
  for (int i = 0; i < r.rows(); ++i) dead += r.Get(i, 0) == "DEAD" ? 1 : 0;
  return std::make_pair(r.rows() - dead, dead);
}

absl::StatusOr<int64_t> MarkDead(pg::Connection& conn, const HeldRow& row,
                                 const std::string& reason) {
  ASSIGN_OR_RETURN(pg::Result r,
                   conn.Execute(kMarkDead, {pg::Int(row.id), pg::Int(row.fencing_token),
                                            pg::Text(Truncated(reason))}));
  return r.affected_rows();
}

absl::StatusOr<int64_t> Postpone(pg::Connection& conn, const HeldRow& row, absl::Duration delay,
                                 const std::string& reason) {
  ASSIGN_OR_RETURN(pg::Result r,
                   conn.Execute(kPostpone, {pg::Int(row.id), pg::Int(row.fencing_token),
                                            pg::Text(absl::StrCat(absl::ToDoubleSeconds(delay))),
                                            pg::Text(Truncated(reason))}));
  return r.affected_rows();
}

}  // namespace ulticode::admin::consumer
