// App's own tables (schema: app/migrations/0001_judge.sql): the only code
// that reads or writes problems, contests and contest_problems.
//
// Writes take the open transaction of the mutation; reads are templates on
// the executor (pg::Connection or pg::Transaction, both instantiated in the
// .cc). Rows come back typed; every column is read by name. A lookup that
// finds nothing returns std::nullopt (or false): the caller words the error.
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
#include "common/pg/connection.h"

namespace ulticode::app::store {

struct ProblemRow {
  std::string problem_id;
  std::string slug;
  std::string title;
  std::string statement;
  int32_t time_limit_ms = 0;
  int32_t memory_limit_mb = 0;
  int32_t difficulty = 0;
  int64_t version = 0;
  absl::Time created_at;
  absl::Time updated_at;
};

struct NewProblem {
  std::string problem_id;
  std::string slug;
  std::string title;
  std::string statement;
  int32_t time_limit_ms = 0;
  int32_t memory_limit_mb = 0;
  int32_t difficulty = 0;
};

// The columns an update sets; the others stay as they are.
struct ProblemChanges {
  std::optional<std::string> title = std::nullopt;
  std::optional<std::string> statement = std::nullopt;
  std::optional<int32_t> time_limit_ms = std::nullopt;
  std::optional<int32_t> memory_limit_mb = std::nullopt;
  std::optional<int32_t> difficulty = std::nullopt;

  bool empty() const {
    return !title && !statement && !time_limit_ms && !memory_limit_mb && !difficulty;
  }
};

struct ContestProblemRow {
  std::string problem_id;
  std::string label;
};

struct ContestRow {
  std::string contest_id;
  std::string slug;
  std::string title;
  absl::Time starts_at;
  absl::Time ends_at;
  std::string status;  // "DRAFT" or "PUBLISHED" (the table's CHECK)
  int64_t version = 0;
  absl::Time created_at;
  absl::Time updated_at;
  // Ordered by label (A..Z, then AA..ZZ); filled by GetContest only.
  std::vector<ContestProblemRow> problems;

  bool published() const { return status == "PUBLISHED"; }
};

struct NewContest {
  std::string contest_id;
  std::string slug;
  std::string title;
  absl::Time starts_at;
  absl::Time ends_at;
};

// --- problems

absl::StatusOr<bool> ProblemSlugTaken(pg::Transaction& tx, const std::string& slug);
// nullopt when the slug is taken (a concurrent insert of it is waited for).
absl::StatusOr<std::optional<ProblemRow>> InsertProblem(pg::Transaction& tx,
                                                        const NewProblem& problem);
// The problem, locked FOR UPDATE until the transaction ends.
absl::StatusOr<std::optional<ProblemRow>> LockProblem(pg::Transaction& tx,
                                                      const std::string& problem_id);
template <typename Executor>
absl::StatusOr<std::optional<ProblemRow>> GetProblem(Executor& ex, const std::string& problem_id);
// Sets the columns in `changes`, version + 1; returns the row.
absl::StatusOr<ProblemRow> UpdateProblem(pg::Transaction& tx, const std::string& problem_id,
                                         const ProblemChanges& changes);
absl::StatusOr<bool> ProblemExists(pg::Transaction& tx, const std::string& problem_id);

// --- contests

absl::StatusOr<bool> ContestSlugTaken(pg::Transaction& tx, const std::string& slug);
// A new DRAFT contest.
absl::StatusOr<ContestRow> InsertContest(pg::Transaction& tx, const NewContest& contest);
// The contest (without its problems), locked FOR UPDATE until the
// transaction ends: the lock serializes every change to its problem set.
absl::StatusOr<std::optional<ContestRow>> LockContest(pg::Transaction& tx,
                                                      const std::string& contest_id);
// The contest with its problems, from one snapshot.
template <typename Executor>
absl::StatusOr<std::optional<ContestRow>> GetContest(Executor& ex, const std::string& contest_id);
// version + 1.
absl::Status BumpContest(pg::Transaction& tx, const std::string& contest_id);
// PUBLISHED now, version + 1.
absl::Status PublishContest(pg::Transaction& tx, const std::string& contest_id);

// --- contest_problems

// The label `problem_id` has in the contest, if it is there.
absl::StatusOr<std::optional<std::string>> LabelOfProblem(pg::Transaction& tx,
                                                          const std::string& contest_id,
                                                          const std::string& problem_id);
// The problem holding `label` in the contest, if any.
absl::StatusOr<std::optional<std::string>> ProblemOfLabel(pg::Transaction& tx,
                                                          const std::string& contest_id,
                                                          const std::string& label);
absl::Status AddContestProblem(pg::Transaction& tx, const std::string& contest_id,
                               const std::string& problem_id, const std::string& label);
// Removes the problem from the contest; returns the label it had, nullopt
// when it was not there.
absl::StatusOr<std::optional<std::string>> RemoveContestProblem(pg::Transaction& tx,
                                                                const std::string& contest_id,
                                                                const std::string& problem_id);
absl::StatusOr<int64_t> CountContestProblems(pg::Transaction& tx, const std::string& contest_id);

}  // namespace ulticode::app::store
