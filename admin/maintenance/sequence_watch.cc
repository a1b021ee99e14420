#include "admin/maintenance/sequence_watch.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"

namespace ulticode::admin::maintenance {
namespace {

constexpr char kComponent[] = "admin.sequence_watch";

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

// Runs of numbers in (through, horizon] with no row, between sentinels at
// both ends.
constexpr pg::Statement kRecordGaps{
    "sequence.record_gaps",
    "INSERT INTO owner_sequence_gaps (owner, first_missing, last_missing)"
    " SELECT $1, n + 1, next - 1 FROM ("
    "   SELECT n, lead(n) OVER (ORDER BY n) AS next FROM ("
    "     SELECT $2::bigint AS n"
    "     UNION ALL SELECT owner_sequence FROM audit_logs"
    "       WHERE owner = $1 AND owner_sequence > $2 AND owner_sequence <= $3"
    "     UNION ALL SELECT $3::bigint + 1) s) g"
    " WHERE next > n + 1"
    " ON CONFLICT (owner, first_missing) DO NOTHING"
    " RETURNING first_missing, last_missing"};

constexpr pg::Statement kAdvance{"sequence.advance",
                                 "UPDATE owner_sequence_checked SET through = $2::bigint,"
                                 "   horizon = greatest($2::bigint, $3::bigint), horizon_at = now()"
                                 " WHERE owner = $1"};

#define ULTI_GAP_PRESENT                                                             \
  "(SELECT count(DISTINCT owner_sequence) FROM audit_logs a WHERE a.owner = g.owner" \
  "   AND a.owner_sequence BETWEEN g.first_missing AND g.last_missing)"

constexpr pg::Statement kResolve{"sequence.resolve",
                                 "UPDATE owner_sequence_gaps g SET resolved_at = now()"
                                 " WHERE owner = $1 AND resolved_at IS NULL"
                                 "   AND " ULTI_GAP_PRESENT
                                 " = g.last_missing - g.first_missing + 1"
                                 " RETURNING first_missing, last_missing"};

constexpr pg::Statement kMissing{
    "sequence.missing",
    "SELECT coalesce(sum(g.last_missing - g.first_missing + 1 - " ULTI_GAP_PRESENT
    "), 0)"
    " FROM owner_sequence_gaps g WHERE owner = $1 AND resolved_at IS NULL"};

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
  ASSIGN_OR_RETURN(pg::Result bounds, conn.Execute(kBounds, {pg::Text(owner)}));
  if (bounds.IsNull(0, 1)) return absl::OkStatus();  // no numbered event yet
  const int64_t lowest = bounds.GetInt64(0, 0), highest = bounds.GetInt64(0, 1);
  ASSIGN_OR_RETURN(pg::Result state, conn.Execute(kState, {pg::Text(owner), pg::Seconds(grace_)}));
  if (state.empty()) {
    return conn.Execute(kStart, {pg::Text(owner), pg::Int(lowest - 1), pg::Int(highest)}).status();
  }
  const int64_t through = state.GetInt64(0, 0), horizon = state.GetInt64(0, 1);
  if (state.GetBool(0, 2)) {  // the horizon is `grace` old: examine up to it
    if (horizon > through) {
      ASSIGN_OR_RETURN(
          pg::Result present,
          conn.Execute(kPresent, {pg::Text(owner), pg::Int(through), pg::Int(horizon)}));
      if (present.GetInt64(0, 0) < horizon - through) {
        ASSIGN_OR_RETURN(
            pg::Result found,
            conn.Execute(kRecordGaps, {pg::Text(owner), pg::Int(through), pg::Int(horizon)}));
        for (int i = 0; i < found.rows(); ++i) {
          gaps_->Add({{"owner", owner}}).Increment();
          log::Error(kComponent, "event numbers missing: committed events that never arrived",
                     {{"owner", owner},
                      {"first", absl::StrCat(found.GetInt64(i, 0))},
                      {"last", absl::StrCat(found.GetInt64(i, 1))}});
        }
      }
    }
    RETURN_IF_ERROR(conn.Execute(kAdvance, {pg::Text(owner), pg::Int(std::max(through, horizon)),
                                            pg::Int(highest)})
                        .status());
  }
  ASSIGN_OR_RETURN(pg::Result resolved, conn.Execute(kResolve, {pg::Text(owner)}));
  for (int i = 0; i < resolved.rows(); ++i) {
    log::Info(kComponent, "missing event numbers arrived after all",
              {{"owner", owner},
               {"first", absl::StrCat(resolved.GetInt64(i, 0))},
               {"last", absl::StrCat(resolved.GetInt64(i, 1))}});
  }
  ASSIGN_OR_RETURN(pg::Result missing, conn.Execute(kMissing, {pg::Text(owner)}));
  missing_->Add({{"owner", owner}}).Set(static_cast<double>(missing.GetInt64(0, 0)));
  return absl::OkStatus();
}

}  // namespace ulticode::admin::maintenance
