#include "app/app_store.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::app::store {
namespace {

constexpr pg::Statement kFindProblemSlug{"app.problem.find_slug",
                                         "SELECT 1 FROM problems WHERE slug = $1"};
constexpr pg::Statement kInsertProblem{
    "app.problem.insert",
    "INSERT INTO problems (problem_id, slug, title, statement, time_limit_ms, memory_limit_mb, "
    "difficulty) VALUES ($1::uuid, $2, $3, $4, $5::integer, $6::integer, $7::integer) "
    "ON CONFLICT DO NOTHING RETURNING problem_id::text AS problem_id, slug, title, statement, "
    "time_limit_ms, memory_limit_mb, difficulty, version, created_at, updated_at"};
constexpr pg::Statement kLockProblem{
    "app.problem.lock",
    "SELECT problem_id::text AS problem_id, slug, title, statement, time_limit_ms, "
    "memory_limit_mb, difficulty, version, created_at, updated_at FROM problems "
    "WHERE problem_id = $1::uuid FOR UPDATE"};
constexpr pg::Statement kGetProblem{
    "app.problem.get",
    "SELECT problem_id::text AS problem_id, slug, title, statement, time_limit_ms, "
    "memory_limit_mb, difficulty, version, created_at, updated_at FROM problems "
    "WHERE problem_id = $1::uuid"};
// NULL leaves a column as it is: only the changed masked fields are sent.
constexpr pg::Statement kUpdateProblem{
    "app.problem.update",
    "UPDATE problems SET title = COALESCE($2, title), statement = COALESCE($3, statement), "
    "time_limit_ms = COALESCE($4::integer, time_limit_ms), "
    "memory_limit_mb = COALESCE($5::integer, memory_limit_mb), "
    "difficulty = COALESCE($6::integer, difficulty), version = version + 1, updated_at = now() "
    "WHERE problem_id = $1::uuid "
    "RETURNING problem_id::text AS problem_id, slug, title, statement, time_limit_ms, "
    "memory_limit_mb, difficulty, version, created_at, updated_at"};
constexpr pg::Statement kProblemExists{"app.problem.exists",
                                       "SELECT 1 FROM problems WHERE problem_id = $1::uuid"};

constexpr pg::Statement kFindContestSlug{"app.contest.find_slug",
                                         "SELECT 1 FROM contests WHERE slug = $1"};
constexpr pg::Statement kInsertContest{
    "app.contest.insert",
    "INSERT INTO contests (contest_id, slug, title, starts_at, ends_at) "
    "VALUES ($1::uuid, $2, $3, $4::timestamptz, $5::timestamptz) "
    "RETURNING contest_id::text AS contest_id, slug, title, starts_at, ends_at, status, version, "
    "created_at, updated_at"};
constexpr pg::Statement kLockContest{
    "app.contest.lock",
    "SELECT contest_id::text AS contest_id, slug, title, starts_at, ends_at, status, version, "
    "created_at, updated_at FROM contests WHERE contest_id = $1::uuid FOR UPDATE"};
// One statement, so the contest and its problems come from one snapshot.
// Labels sort as in a spreadsheet: A..Z, then AA..ZZ.
constexpr pg::Statement kGetContest{
    "app.contest.get",
    "SELECT c.contest_id::text AS contest_id, c.slug, c.title, c.starts_at, c.ends_at, c.status, "
    "c.version, c.created_at, c.updated_at, cp.problem_id::text AS problem_id, cp.label "
    "FROM contests c LEFT JOIN contest_problems cp ON cp.contest_id = c.contest_id "
    "WHERE c.contest_id = $1::uuid ORDER BY char_length(cp.label), cp.label COLLATE \"C\""};
constexpr pg::Statement kBumpContest{
    "app.contest.bump",
    "UPDATE contests SET version = version + 1, updated_at = now() WHERE contest_id = $1::uuid"};
constexpr pg::Statement kPublishContest{
    "app.contest.publish",
    "UPDATE contests SET status = 'PUBLISHED', published_at = now(), version = version + 1, "
    "updated_at = now() WHERE contest_id = $1::uuid"};

constexpr pg::Statement kLabelOfProblem{
    "app.contest_problems.label_of",
    "SELECT label FROM contest_problems WHERE contest_id = $1::uuid AND problem_id = $2::uuid"};
constexpr pg::Statement kProblemOfLabel{
    "app.contest_problems.problem_of",
    "SELECT problem_id::text AS problem_id FROM contest_problems"
    " WHERE contest_id = $1::uuid AND label = $2"};
constexpr pg::Statement kAddContestProblem{
    "app.contest_problems.add",
    "INSERT INTO contest_problems (contest_id, problem_id, label) VALUES ($1::uuid, $2::uuid, $3)"};
constexpr pg::Statement kRemoveContestProblem{
    "app.contest_problems.remove",
    "DELETE FROM contest_problems WHERE contest_id = $1::uuid AND problem_id = $2::uuid "
    "RETURNING label"};
constexpr pg::Statement kCountContestProblems{
    "app.contest_problems.count",
    "SELECT count(*) AS problems FROM contest_problems WHERE contest_id = $1::uuid"};

ProblemRow ProblemAt(const pg::Result& r, int row) {
  ProblemRow p;
  p.problem_id = r.GetString(row, r.Column("problem_id"));
  p.slug = r.GetString(row, r.Column("slug"));
  p.title = r.GetString(row, r.Column("title"));
  p.statement = r.GetString(row, r.Column("statement"));
  p.time_limit_ms = static_cast<int32_t>(r.GetInt64(row, r.Column("time_limit_ms")));
  p.memory_limit_mb = static_cast<int32_t>(r.GetInt64(row, r.Column("memory_limit_mb")));
  p.difficulty = static_cast<int32_t>(r.GetInt64(row, r.Column("difficulty")));
  p.version = r.GetInt64(row, r.Column("version"));
  p.created_at = r.GetTime(row, r.Column("created_at"));
  p.updated_at = r.GetTime(row, r.Column("updated_at"));
  return p;
}

// The contest columns (not its problems).
ContestRow ContestAt(const pg::Result& r, int row) {
  ContestRow c;
  c.contest_id = r.GetString(row, r.Column("contest_id"));
  c.slug = r.GetString(row, r.Column("slug"));
  c.title = r.GetString(row, r.Column("title"));
  c.starts_at = r.GetTime(row, r.Column("starts_at"));
  c.ends_at = r.GetTime(row, r.Column("ends_at"));
  c.status = r.GetString(row, r.Column("status"));
  c.version = r.GetInt64(row, r.Column("version"));
  c.created_at = r.GetTime(row, r.Column("created_at"));
  c.updated_at = r.GetTime(row, r.Column("updated_at"));
  return c;
}

// The first row's value of `column`, nullopt when there is no row.
std::optional<std::string> FirstString(const pg::Result& r, absl::string_view column) {
  if (r.empty()) return std::nullopt;
  return r.GetString(0, r.Column(column));
}

// For statements that always return a row of a row already locked.
absl::Status ExpectRow(const pg::Result& r, const pg::Statement& statement) {
  if (r.empty()) return absl::InternalError(absl::StrCat(statement.name, " returned no row"));
  return absl::OkStatus();
}

pg::Param TextOrKeep(const std::optional<std::string>& v) {
  return v.has_value() ? pg::Text(*v) : pg::Null();
}
pg::Param IntOrKeep(const std::optional<int32_t>& v) {
  return v.has_value() ? pg::Int(*v) : pg::Null();
}

}  // namespace

absl::StatusOr<bool> ProblemSlugTaken(pg::Transaction& tx, const std::string& slug) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kFindProblemSlug, {pg::Text(slug)}));
  return !r.empty();
}

absl::StatusOr<std::optional<ProblemRow>> InsertProblem(pg::Transaction& tx,
                                                        const NewProblem& problem) {
  ASSIGN_OR_RETURN(
      pg::Result r,
      tx.Execute(kInsertProblem,
                 {pg::Text(problem.problem_id), pg::Text(problem.slug), pg::Text(problem.title),
                  pg::Text(problem.statement), pg::Int(problem.time_limit_ms),
                  pg::Int(problem.memory_limit_mb), pg::Int(problem.difficulty)}));
  if (r.empty()) return std::nullopt;
  return ProblemAt(r, 0);
}

absl::StatusOr<std::optional<ProblemRow>> LockProblem(pg::Transaction& tx,
                                                      const std::string& problem_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kLockProblem, {pg::Text(problem_id)}));
  if (r.empty()) return std::nullopt;
  return ProblemAt(r, 0);
}

template <typename Executor>
absl::StatusOr<std::optional<ProblemRow>> GetProblem(Executor& ex, const std::string& problem_id) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kGetProblem, {pg::Text(problem_id)}));
  if (r.empty()) return std::nullopt;
  return ProblemAt(r, 0);
}

absl::StatusOr<ProblemRow> UpdateProblem(pg::Transaction& tx, const std::string& problem_id,
                                         const ProblemChanges& changes) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kUpdateProblem,
                              {pg::Text(problem_id), TextOrKeep(changes.title),
                               TextOrKeep(changes.statement), IntOrKeep(changes.time_limit_ms),
                               IntOrKeep(changes.memory_limit_mb), IntOrKeep(changes.difficulty)}));
  RETURN_IF_ERROR(ExpectRow(r, kUpdateProblem));
  return ProblemAt(r, 0);
}

absl::StatusOr<bool> ProblemExists(pg::Transaction& tx, const std::string& problem_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kProblemExists, {pg::Text(problem_id)}));
  return !r.empty();
}

absl::StatusOr<bool> ContestSlugTaken(pg::Transaction& tx, const std::string& slug) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kFindContestSlug, {pg::Text(slug)}));
  return !r.empty();
}

absl::StatusOr<ContestRow> InsertContest(pg::Transaction& tx, const NewContest& contest) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kInsertContest, {pg::Text(contest.contest_id), pg::Text(contest.slug),
                                               pg::Text(contest.title), pg::Time(contest.starts_at),
                                               pg::Time(contest.ends_at)}));
  RETURN_IF_ERROR(ExpectRow(r, kInsertContest));
  return ContestAt(r, 0);
}

absl::StatusOr<std::optional<ContestRow>> LockContest(pg::Transaction& tx,
                                                      const std::string& contest_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kLockContest, {pg::Text(contest_id)}));
  if (r.empty()) return std::nullopt;
  return ContestAt(r, 0);
}

template <typename Executor>
absl::StatusOr<std::optional<ContestRow>> GetContest(Executor& ex, const std::string& contest_id) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kGetContest, {pg::Text(contest_id)}));
  if (r.empty()) return std::nullopt;
  ContestRow c = ContestAt(r, 0);
  const int problem_id = r.Column("problem_id"), label = r.Column("label");
  for (int i = 0; i < r.rows(); ++i) {
    if (r.IsNull(i, problem_id)) continue;  // LEFT JOIN of a contest without problems
    c.problems.push_back({r.GetString(i, problem_id), r.GetString(i, label)});
  }
  return c;
}

absl::Status BumpContest(pg::Transaction& tx, const std::string& contest_id) {
  return tx.Execute(kBumpContest, {pg::Text(contest_id)}).status();
}

absl::Status PublishContest(pg::Transaction& tx, const std::string& contest_id) {
  return tx.Execute(kPublishContest, {pg::Text(contest_id)}).status();
}

absl::StatusOr<std::optional<std::string>> LabelOfProblem(pg::Transaction& tx,
                                                          const std::string& contest_id,
                                                          const std::string& problem_id) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kLabelOfProblem, {pg::Text(contest_id), pg::Text(problem_id)}));
  return FirstString(r, "label");
}

absl::StatusOr<std::optional<std::string>> ProblemOfLabel(pg::Transaction& tx,
                                                          const std::string& contest_id,
                                                          const std::string& label) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kProblemOfLabel, {pg::Text(contest_id), pg::Text(label)}));
  return FirstString(r, "problem_id");
}

absl::Status AddContestProblem(pg::Transaction& tx, const std::string& contest_id,
                               const std::string& problem_id, const std::string& label) {
  return tx
      .Execute(kAddContestProblem, {pg::Text(contest_id), pg::Text(problem_id), pg::Text(label)})
      .status();
}

absl::StatusOr<std::optional<std::string>> RemoveContestProblem(pg::Transaction& tx,
                                                                const std::string& contest_id,
                                                                const std::string& problem_id) {
  ASSIGN_OR_RETURN(pg::Result r,
                   tx.Execute(kRemoveContestProblem, {pg::Text(contest_id), pg::Text(problem_id)}));
  return FirstString(r, "label");
}

absl::StatusOr<int64_t> CountContestProblems(pg::Transaction& tx, const std::string& contest_id) {
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kCountContestProblems, {pg::Text(contest_id)}));
  RETURN_IF_ERROR(ExpectRow(r, kCountContestProblems));
  return r.GetInt64(0, r.Column("problems"));
}

// The reads, for both executors.
template absl::StatusOr<std::optional<ProblemRow>> GetProblem(pg::Connection&, const std::string&);
template absl::StatusOr<std::optional<ProblemRow>> GetProblem(pg::Transaction&, const std::string&);
template absl::StatusOr<std::optional<ContestRow>> GetContest(pg::Connection&, const std::string&);
template absl::StatusOr<std::optional<ContestRow>> GetContest(pg::Transaction&, const std::string&);

}  // namespace ulticode::app::store
