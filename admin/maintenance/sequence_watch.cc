#include "admin/maintenance/sequence_watch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"

namespace ulticode::admin::maintenance {
namespace {

constexpr char kComponent[] = "admin.sequence_watch";

constexpr pg::Statement kLock{
    "sequence.lock",
    "SELECT pg_try_advisory_xact_lock(hashtextextended('ulticode.sequence_watch.' || $1, 0))"};

constexpr pg::Statement kState{
    "sequence.state",
    "SELECT through, horizon, horizon_at <= now() - $2::float8 * interval '1 second'"
    " FROM owner_sequence_checked WHERE owner = $1"};

// Both ends come from the partial index on (owner, owner_sequence).
constexpr pg::Statement kBounds{"sequence.bounds",
                                "SELECT min(owner_sequence), max(owner_sequence) FROM audit_logs"
                                " WHERE owner = $1 AND owner_sequence IS NOT NULL"};

// The first check of an owner starts at its lowest number: history from
// before the owners numbered their events is not reported.
constexpr pg::Statement kStart{
    "sequence.start",
    "INSERT INTO owner_sequence_checked (owner, through, horizon, horizon_at)"
    " VALUES ($1, $2, $3, now()) ON CONFLICT (owner) DO NOTHING"};

constexpr pg::Statement kPresent{
    "sequence.present",
    "SELECT count(DISTINCT owner_sequence) FROM audit_logs"
    " WHERE owner = $1 AND owner_sequence > $2 AND owner_sequence <= $3"};

constexpr pg::Statement kNumbers{
    "sequence.numbers",
    "SELECT DISTINCT owner_sequence FROM audit_logs"
    " WHERE owner = $1 AND owner_sequence > $2 AND owner_sequence <= $3 ORDER BY 1"};

// The runs the owner attested as taken and never committed (its
// <owner>.outbox.numbers_voided events, number_attestor.h).
constexpr pg::Statement kVoids{
    "sequence.voids",
    "SELECT (r->>0)::bigint, (r->>1)::bigint"
    " FROM audit_logs, jsonb_array_elements(new_value->'runs') r"
    " WHERE entity_type = 'audit_outbox' AND entity_id = $1 AND owner = $1"
    "   AND event_type = $1 || '.outbox.numbers_voided'"};

constexpr pg::Statement kAdvance{"sequence.advance",
                                 "UPDATE owner_sequence_checked SET through = $2::bigint,"
                                 "   horizon = greatest($2::bigint, $3::bigint), horizon_at = now()"
                                 " WHERE owner = $1"};

constexpr pg::Statement kRecordGap{
    "sequence.record_gap",
    "INSERT INTO owner_sequence_gaps (owner, first_missing, last_missing) VALUES ($1, $2, $3)"
    " ON CONFLICT (owner, first_missing) DO NOTHING"};

constexpr pg::Statement kOpenGaps{
    "sequence.open_gaps",
    "SELECT first_missing, last_missing FROM owner_sequence_gaps"
    " WHERE owner = $1 AND resolved_at IS NULL ORDER BY first_missing"};

constexpr pg::Statement kResolve{
    "sequence.resolve",
    "UPDATE owner_sequence_gaps SET resolved_at = now()"
    " WHERE owner = $1 AND first_missing = $2 AND resolved_at IS NULL"};

using Run = std::pair<int64_t, int64_t>;  // first, last (inclusive)

// The runs sorted and merged: an attestation repeated (its mark moved back)
// must not count a number twice.
std::vector<Run> Merged(std::vector<Run> runs) {
  std::sort(runs.begin(), runs.end());
  std::vector<Run> out;
  for (const auto& [a, b] : runs) {
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

// How many numbers of [first, last] the (merged) runs cover.
int64_t Covered(const std::vector<Run>& runs, int64_t first, int64_t last) {
  int64_t n = 0;
  for (const auto& [a, b] : runs)
    n += std::max<int64_t>(0, std::min(b, last) - std::max(a, first) + 1);
  return n;
}

// The runs of (through, horizon] that are neither in `present` (ascending)
// nor attested void.
std::vector<Run> Missing(int64_t through, int64_t horizon, const pg::Result& present,
                         const std::vector<Run>& voids) {
  std::vector<Run> missing;
  auto add = [&](int64_t first, int64_t last) {
    for (const auto& [a, b] : voids) {
      if (b < first || a > last) continue;
      if (a > first) missing.emplace_back(first, a - 1);
      first = b + 1;
      if (first > last) return;
    }
    if (first <= last) missing.emplace_back(first, last);
  };
  int64_t next = through + 1;
  for (int i = 0; i <= present.rows(); ++i) {
    const int64_t n = i < present.rows() ? present.GetInt64(i, 0) : horizon + 1;
    if (n > next) add(next, n - 1);
    next = n + 1;
  }
  return missing;
}

}  // namespace

SequenceWatch::SequenceWatch(std::vector<std::string> owners, absl::Duration grace,
                             prometheus::Registry& registry)
    : owners_(std::move(owners)),
      grace_(grace),
      missing_(&prometheus::BuildGauge()
                    .Name("ulticode_owner_sequence_missing")
                    .Help("Event numbers of an owner that had not reached audit_logs a grace "
                          "period after higher ones had, and still have not")
                    .Register(registry)),
      gaps_(&prometheus::BuildCounter()
                 .Name("ulticode_owner_sequence_gaps_total")
                 .Help("Runs of missing event numbers found, per owner")
                 .Register(registry)) {
  for (const std::string& owner : owners_) {
    missing_->Add({{"owner", owner}});
    gaps_->Add({{"owner", owner}});
  }
}

absl::Status SequenceWatch::Check(pg::Connection& conn) {
  absl::Status first_error;
  for (const std::string& owner : owners_) {
    absl::Status s = CheckOwner(conn, owner);
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

absl::Status SequenceWatch::CheckOwner(pg::Connection& conn, const std::string& owner) {
  // One replica at a time per owner: the state is read, then advanced.
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(pg::Result locked, tx.Execute(kLock, {pg::Text(owner)}));
  if (!locked.GetBool(0, 0)) return tx.Commit();
  ASSIGN_OR_RETURN(pg::Result bounds, tx.Execute(kBounds, {pg::Text(owner)}));
  if (bounds.IsNull(0, 1)) return tx.Commit();  // no numbered event yet
  const int64_t lowest = bounds.GetInt64(0, 0), highest = bounds.GetInt64(0, 1);
  ASSIGN_OR_RETURN(pg::Result state, tx.Execute(kState, {pg::Text(owner), pg::Seconds(grace_)}));
  if (state.empty()) {
    RETURN_IF_ERROR(
        tx.Execute(kStart, {pg::Text(owner), pg::Int(lowest - 1), pg::Int(highest)}).status());
    return tx.Commit();
  }
  ASSIGN_OR_RETURN(pg::Result void_rows, tx.Execute(kVoids, {pg::Text(owner)}));
  std::vector<Run> attested;
  for (int i = 0; i < void_rows.rows(); ++i) {
    attested.emplace_back(void_rows.GetInt64(i, 0), void_rows.GetInt64(i, 1));
  }
  const std::vector<Run> voids = Merged(std::move(attested));
  const int64_t through = state.GetInt64(0, 0), horizon = state.GetInt64(0, 1);
  if (state.GetBool(0, 2)) {  // the horizon is `grace` old: examine up to it
    if (horizon > through) RETURN_IF_ERROR(RecordGaps(tx, owner, through, horizon, voids));
    RETURN_IF_ERROR(tx.Execute(kAdvance, {pg::Text(owner), pg::Int(std::max(through, horizon)),
                                          pg::Int(highest)})
                        .status());
  }
  // Open gaps: resolved once every number arrived or was attested void.
  ASSIGN_OR_RETURN(pg::Result open, tx.Execute(kOpenGaps, {pg::Text(owner)}));
  int64_t missing = 0;
  for (int i = 0; i < open.rows(); ++i) {
    const int64_t first = open.GetInt64(i, 0), last = open.GetInt64(i, 1);
    ASSIGN_OR_RETURN(pg::Result present,
                     tx.Execute(kPresent, {pg::Text(owner), pg::Int(first - 1), pg::Int(last)}));
    const int64_t still = last - first + 1 - present.GetInt64(0, 0) - Covered(voids, first, last);
    if (still > 0) {
      missing += still;
      continue;
    }
    RETURN_IF_ERROR(tx.Execute(kResolve, {pg::Text(owner), pg::Int(first)}).status());
    log::Info(kComponent, "missing event numbers arrived or were attested void",
              {{"owner", owner}, {"first", absl::StrCat(first)}, {"last", absl::StrCat(last)}});
  }
  RETURN_IF_ERROR(tx.Commit());
  missing_->Add({{"owner", owner}}).Set(static_cast<double>(missing));
  return absl::OkStatus();
}

absl::Status SequenceWatch::RecordGaps(pg::Transaction& tx, const std::string& owner,
                                       int64_t through, int64_t horizon,
                                       const std::vector<Run>& voids) {
  ASSIGN_OR_RETURN(pg::Result present,
                   tx.Execute(kPresent, {pg::Text(owner), pg::Int(through), pg::Int(horizon)}));
  if (present.GetInt64(0, 0) + Covered(voids, through + 1, horizon) >= horizon - through) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(pg::Result numbers,
                   tx.Execute(kNumbers, {pg::Text(owner), pg::Int(through), pg::Int(horizon)}));
  for (const auto& [first, last] : Missing(through, horizon, numbers, voids)) {
    ASSIGN_OR_RETURN(pg::Result added,
                     tx.Execute(kRecordGap, {pg::Text(owner), pg::Int(first), pg::Int(last)}));
    if (added.affected_rows() == 0) continue;
    gaps_->Add({{"owner", owner}}).Increment();
    log::Error(kComponent, "event numbers missing: committed events that never arrived",
               {{"owner", owner}, {"first", absl::StrCat(first)}, {"last", absl::StrCat(last)}});
  }
  return absl::OkStatus();
}

}  // namespace ulticode::admin::maintenance
