#include "app/app_service.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/outbox/actor.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::app {
namespace {

using google::protobuf::util::TimeUtil;
using outbox::Values;

constexpr pg::Statement kFindProblemSlug{"app.problem.find_slug",
                                         "SELECT 1 FROM problems WHERE slug = $1"};
constexpr pg::Statement kInsertProblem{
    "app.problem.insert",
    "INSERT INTO problems (problem_id, slug, title, statement, time_limit_ms, memory_limit_mb, "
    "difficulty) VALUES ($1::uuid, $2, $3, $4, $5::integer, $6::integer, $7::integer) "
    "RETURNING problem_id::text, slug, title, statement, time_limit_ms, memory_limit_mb, "
    "difficulty, version, created_at, updated_at"};
constexpr pg::Statement kLockProblem{
    "app.problem.lock",
    "SELECT problem_id::text, slug, title, statement, time_limit_ms, memory_limit_mb, difficulty,"
    " version, created_at, updated_at FROM problems WHERE problem_id = $1::uuid FOR UPDATE"};
constexpr pg::Statement kGetProblem{
    "app.problem.get",
    "SELECT problem_id::text, slug, title, statement, time_limit_ms, memory_limit_mb, difficulty,"
    " version, created_at, updated_at FROM problems WHERE problem_id = $1::uuid"};
// NULL leaves a column as it is: only the changed masked fields are sent.
constexpr pg::Statement kUpdateProblem{
    "app.problem.update",
    "UPDATE problems SET title = COALESCE($2, title), statement = COALESCE($3, statement), "
    "time_limit_ms = COALESCE($4::integer, time_limit_ms), "
    "memory_limit_mb = COALESCE($5::integer, memory_limit_mb), "
    "difficulty = COALESCE($6::integer, difficulty), version = version + 1, updated_at = now() "
    "WHERE problem_id = $1::uuid "
    "RETURNING problem_id::text, slug, title, statement, time_limit_ms, memory_limit_mb, "
    "difficulty, version, created_at, updated_at"};
constexpr pg::Statement kProblemExists{"app.problem.exists",
                                       "SELECT 1 FROM problems WHERE problem_id = $1::uuid"};

constexpr pg::Statement kFindContestSlug{"app.contest.find_slug",
                                         "SELECT 1 FROM contests WHERE slug = $1"};
constexpr pg::Statement kInsertContest{
    "app.contest.insert",
    "INSERT INTO contests (contest_id, slug, title, starts_at, ends_at) "
    "VALUES ($1::uuid, $2, $3, $4::timestamptz, $5::timestamptz) "
    "RETURNING contest_id::text, slug, title, starts_at, ends_at, status, version, created_at, "
    "updated_at"};
constexpr pg::Statement kLockContest{
    "app.contest.lock",
    "SELECT contest_id::text, slug, title, starts_at, ends_at, status, version, created_at, "
    "updated_at FROM contests WHERE contest_id = $1::uuid FOR UPDATE"};
// One statement, so the contest and its problems come from one snapshot.
// Labels sort as in a spreadsheet: A..Z, then AA..ZZ.
constexpr pg::Statement kGetContest{
    "app.contest.get",
    "SELECT c.contest_id::text, c.slug, c.title, c.starts_at, c.ends_at, c.status, c.version, "
    "c.created_at, c.updated_at, cp.problem_id::text, cp.label "
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
    "SELECT problem_id::text FROM contest_problems WHERE contest_id = $1::uuid AND label = $2"};
constexpr pg::Statement kAddContestProblem{
    "app.contest_problems.add",
    "INSERT INTO contest_problems (contest_id, problem_id, label) VALUES ($1::uuid, $2::uuid, $3)"};
constexpr pg::Statement kRemoveContestProblem{
    "app.contest_problems.remove",
    "DELETE FROM contest_problems WHERE contest_id = $1::uuid AND problem_id = $2::uuid "
    "RETURNING label"};
constexpr pg::Statement kCountContestProblems{
    "app.contest_problems.count",
    "SELECT count(*) FROM contest_problems WHERE contest_id = $1::uuid"};

// Update mask paths of UpdateProblemRequest.
constexpr char kPathTitle[] = "title";
constexpr char kPathStatement[] = "statement";
constexpr char kPathTimeLimit[] = "time_limit_ms";
constexpr char kPathMemoryLimit[] = "memory_limit_mb";
constexpr char kPathDifficulty[] = "difficulty";

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

// Microsecond precision: what timestamptz keeps.
absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(ts));
}

std::string TimeString(absl::Time t) { return TimeUtil::ToString(ToProto(t)); }

v1::Problem ProblemFromRow(const pg::Result& r, int row) {
  v1::Problem p;
  p.set_problem_id(r.GetString(row, 0));
  p.set_slug(r.GetString(row, 1));
  p.set_title(r.GetString(row, 2));
  p.set_statement(r.GetString(row, 3));
  p.set_time_limit_ms(static_cast<int32_t>(r.GetInt64(row, 4)));
  p.set_memory_limit_mb(static_cast<int32_t>(r.GetInt64(row, 5)));
  p.set_difficulty(static_cast<int32_t>(r.GetInt64(row, 6)));
  p.set_version(r.GetInt64(row, 7));
  *p.mutable_created_at() = ToProto(r.GetTime(row, 8));
  *p.mutable_updated_at() = ToProto(r.GetTime(row, 9));
  return p;
}

const char* StatusName(v1::ContestStatus s) {
  return s == v1::CONTEST_STATUS_PUBLISHED ? "PUBLISHED" : "DRAFT";
}

// The contest columns of kInsertContest / kLockContest / kGetContest (0..8).
v1::Contest ContestFromRow(const pg::Result& r, int row) {
  v1::Contest c;
  c.set_contest_id(r.GetString(row, 0));
  c.set_slug(r.GetString(row, 1));
  c.set_title(r.GetString(row, 2));
  *c.mutable_starts_at() = ToProto(r.GetTime(row, 3));
  *c.mutable_ends_at() = ToProto(r.GetTime(row, 4));
  c.set_status(r.Get(row, 5) == "PUBLISHED" ? v1::CONTEST_STATUS_PUBLISHED
                                            : v1::CONTEST_STATUS_DRAFT);
  c.set_version(r.GetInt64(row, 6));
  *c.mutable_created_at() = ToProto(r.GetTime(row, 7));
  *c.mutable_updated_at() = ToProto(r.GetTime(row, 8));
  return c;
}

absl::Status ContestNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("contest ", id, " does not exist"));
}
absl::Status ProblemNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("problem ", id, " does not exist"));
}

// The contest with its problems ordered by label; NOT_FOUND when absent.
// `Executor` is a pg::Transaction or a pg::Connection.
template <typename Executor>
absl::StatusOr<v1::Contest> LoadContest(Executor& ex, const std::string& contest_id) {
  ASSIGN_OR_RETURN(pg::Result r, ex.Execute(kGetContest, {pg::Text(contest_id)}));
  if (r.empty()) return ContestNotFound(contest_id);
  v1::Contest c = ContestFromRow(r, 0);
  for (int i = 0; i < r.rows(); ++i) {
    if (r.IsNull(i, 9)) continue;  // LEFT JOIN of a contest without problems
    auto* p = c.add_problems();
    p->set_problem_id(r.GetString(i, 9));
    p->set_label(r.GetString(i, 10));
  }
  return c;
}

constexpr text::Rule kTitleRule{.min_chars = 1, .max_chars = 200};
// The statement is documented multi-line text (Markdown): it keeps \n and \t.
constexpr text::Rule kStatementRule{.max_chars = 65536, .max_bytes = 65536, .multiline = true};

absl::Status ValidateTitle(const std::string& title) {
  return text::Check("title", title, kTitleRule);
}

absl::Status ValidateStatement(const std::string& statement) {
  return text::Check("statement", statement, kStatementRule);
}

absl::Status ValidateTimeLimit(int32_t v) {
  if (v < 100 || v > 60000) return absl::InvalidArgumentError("time_limit_ms: must be 100..60000");
  return absl::OkStatus();
}
absl::Status ValidateMemoryLimit(int32_t v) {
  if (v < 16 || v > 4096) return absl::InvalidArgumentError("memory_limit_mb: must be 16..4096");
  return absl::OkStatus();
}
absl::Status ValidateDifficulty(int32_t v) {
  if (v < 1 || v > 10) return absl::InvalidArgumentError("difficulty: must be 1..10");
  return absl::OkStatus();
}

absl::Status ValidateTimestamp(const char* field, bool present,
                               const google::protobuf::Timestamp& ts) {
  if (!present) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  // From the Unix epoch: no contest predates it, and pg::Time writes years
  // below 1000 without padding, which PostgreSQL misreads ("1-01-01" is 2001).
  if (ts.seconds() < 0 || ts.seconds() > TimeUtil::kTimestampMaxSeconds || ts.nanos() < 0 ||
      ts.nanos() > 999999999) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be a valid timestamp in 1970-01-01..9999-12-31 UTC"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSlug(const std::string& slug) {
  bool ok = slug.size() >= 3 && slug.size() <= 64 && absl::ascii_islower(slug[0]);
  for (char c : slug) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        "slug: must be 3..64 characters of [a-z0-9-] starting with a letter");
  }
  return absl::OkStatus();
}

absl::Status ValidateLabel(const std::string& label) {
  bool ok = !label.empty() && label.size() <= 2;
  for (char c : label) {
    if (!absl::ascii_isupper(c)) ok = false;
  }
  if (!ok) return absl::InvalidArgumentError("label: must be one or two uppercase letters");
  return absl::OkStatus();
}

absl::Status ValidateId(const char* field, const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (!ids::IsValidUuid(id)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be a UUID"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCreateProblem(const v1::CreateProblemRequest& req) {
  RETURN_IF_ERROR(ValidateSlug(req.slug()));
  RETURN_IF_ERROR(ValidateTitle(req.title()));
  RETURN_IF_ERROR(ValidateStatement(req.statement()));
  RETURN_IF_ERROR(ValidateTimeLimit(req.time_limit_ms()));
  RETURN_IF_ERROR(ValidateMemoryLimit(req.memory_limit_mb()));
  return ValidateDifficulty(req.difficulty());
}

absl::Status ValidateUpdateProblem(const v1::UpdateProblemRequest& req) {
  RETURN_IF_ERROR(ValidateId("problem_id", req.problem_id()));
  if (req.update_mask().empty()) {
    return absl::InvalidArgumentError("update_mask: at least one path is required");
  }
  // A repeated path is harmless: the mask is a set.
  for (const std::string& path : req.update_mask()) {
    if (path == kPathTitle) {
      RETURN_IF_ERROR(ValidateTitle(req.title()));
    } else if (path == kPathStatement) {
      RETURN_IF_ERROR(ValidateStatement(req.statement()));
    } else if (path == kPathTimeLimit) {
      RETURN_IF_ERROR(ValidateTimeLimit(req.time_limit_ms()));
    } else if (path == kPathMemoryLimit) {
      RETURN_IF_ERROR(ValidateMemoryLimit(req.memory_limit_mb()));
    } else if (path == kPathDifficulty) {
      RETURN_IF_ERROR(ValidateDifficulty(req.difficulty()));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: unknown path \"", absl::CEscape(path.substr(0, 64)), "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCreateContest(const v1::CreateContestRequest& req) {
  RETURN_IF_ERROR(ValidateSlug(req.slug()));
  RETURN_IF_ERROR(ValidateTitle(req.title()));
  RETURN_IF_ERROR(ValidateTimestamp("starts_at", req.has_starts_at(), req.starts_at()));
  RETURN_IF_ERROR(ValidateTimestamp("ends_at", req.has_ends_at(), req.ends_at()));
  // Compared as stored (microseconds), so the table's CHECK cannot fire.
  if (FromProto(req.ends_at()) <= FromProto(req.starts_at())) {
    return absl::InvalidArgumentError("ends_at: must be after starts_at");
  }
  return absl::OkStatus();
}

absl::Status ValidateAddProblemToContest(const v1::AddProblemToContestRequest& req) {
  RETURN_IF_ERROR(ValidateId("contest_id", req.contest_id()));
  RETURN_IF_ERROR(ValidateId("problem_id", req.problem_id()));
  return ValidateLabel(req.label());
}

absl::Status ValidateRemoveProblemFromContest(const v1::RemoveProblemFromContestRequest& req) {
  RETURN_IF_ERROR(ValidateId("contest_id", req.contest_id()));
  return ValidateId("problem_id", req.problem_id());
}

absl::Status ValidatePublishContest(const v1::PublishContestRequest& req) {
  return ValidateId("contest_id", req.contest_id());
}

grpc::Status AppServiceImpl::CreateProblem(grpc::ServerContext* ctx,
                                           const v1::CreateProblemRequest* req,
                                           v1::ProblemResponse* resp) {
  return mutations_.Handle(
      *ctx, "CreateProblem", *req, [&] { return ValidateCreateProblem(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ProblemResponse>> {
        // A racing insert of the same slug fails with a unique violation,
        // which retries the transaction; this check then reports it.
        ASSIGN_OR_RETURN(pg::Result clash, tx.Execute(kFindProblemSlug, {pg::Text(req->slug())}));
        if (!clash.empty()) {
          return absl::AlreadyExistsError(
              absl::StrCat("problem slug \"", req->slug(), "\" is taken"));
        }
        const std::string problem_id = ids::NewUuidV7();
        ASSIGN_OR_RETURN(
            pg::Result row,
            tx.Execute(kInsertProblem,
                       {pg::Text(problem_id), pg::Text(req->slug()), pg::Text(req->title()),
                        pg::Text(req->statement()), pg::Int(req->time_limit_ms()),
                        pg::Int(req->memory_limit_mb()), pg::Int(req->difficulty())}));
        v1::ProblemResponse out;
        *out.mutable_problem() = ProblemFromRow(row, 0);
        auto event =
            audit::NewEvent(audit::v1::OWNER_APP, "app.problem.created", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("create_problem");
        rec->set_subject(problem_id);
        rec->set_entity_type("problem");
        rec->set_entity_id(problem_id);
        // The statement itself stays out of the event (up to 64 KiB).
        *rec->mutable_new_value() =
            Values()
                .Set("slug", req->slug())
                .Set("title", req->title())
                .Set("statement_bytes", static_cast<int64_t>(req->statement().size()))
                .Set("time_limit_ms", static_cast<int64_t>(req->time_limit_ms()))
                .Set("memory_limit_mb", static_cast<int64_t>(req->memory_limit_mb()))
                .Set("difficulty", static_cast<int64_t>(req->difficulty()))
                .Set("version", out.problem().version())
                .get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::UpdateProblem(grpc::ServerContext* ctx,
                                           const v1::UpdateProblemRequest* req,
                                           v1::ProblemResponse* resp) {
  const std::set<std::string> mask(req->update_mask().begin(), req->update_mask().end());
  return mutations_.Handle(
      *ctx, "UpdateProblem", *req, [&] { return ValidateUpdateProblem(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ProblemResponse>> {
        ASSIGN_OR_RETURN(pg::Result cur, tx.Execute(kLockProblem, {pg::Text(req->problem_id())}));
        if (cur.empty()) return ProblemNotFound(req->problem_id());
        const v1::Problem before = ProblemFromRow(cur, 0);

        // Only masked fields whose value differs: they become the UPDATE's
        // non-NULL parameters and the event's old/new values.
        pg::Param title = pg::Null(), statement = pg::Null(), time_limit = pg::Null(),
                  memory_limit = pg::Null(), difficulty = pg::Null();
        Values old_values, new_values;
        bool changed = false;
        if (mask.count(kPathTitle) && req->title() != before.title()) {
          title = pg::Text(req->title());
          old_values.Set("title", before.title());
          new_values.Set("title", req->title());
          changed = true;
        }
        if (mask.count(kPathStatement) && req->statement() != before.statement()) {
          statement = pg::Text(req->statement());
          // Sizes only, as at creation: two statements could make a 128 KiB event.
          old_values.Set("statement_bytes", static_cast<int64_t>(before.statement().size()));
          new_values.Set("statement_bytes", static_cast<int64_t>(req->statement().size()));
          changed = true;
        }
        if (mask.count(kPathTimeLimit) && req->time_limit_ms() != before.time_limit_ms()) {
          time_limit = pg::Int(req->time_limit_ms());
          old_values.Set("time_limit_ms", static_cast<int64_t>(before.time_limit_ms()));
          new_values.Set("time_limit_ms", static_cast<int64_t>(req->time_limit_ms()));
          changed = true;
        }
        if (mask.count(kPathMemoryLimit) && req->memory_limit_mb() != before.memory_limit_mb()) {
          memory_limit = pg::Int(req->memory_limit_mb());
          old_values.Set("memory_limit_mb", static_cast<int64_t>(before.memory_limit_mb()));
          new_values.Set("memory_limit_mb", static_cast<int64_t>(req->memory_limit_mb()));
          changed = true;
        }
        if (mask.count(kPathDifficulty) && req->difficulty() != before.difficulty()) {
          difficulty = pg::Int(req->difficulty());
          old_values.Set("difficulty", static_cast<int64_t>(before.difficulty()));
          new_values.Set("difficulty", static_cast<int64_t>(req->difficulty()));
          changed = true;
        }
        v1::ProblemResponse out;
        if (!changed) {
          *out.mutable_problem() = before;
          return outbox::Unchanged(std::move(out));
        }
        ASSIGN_OR_RETURN(pg::Result row,
                         tx.Execute(kUpdateProblem, {pg::Text(req->problem_id()), title, statement,
                                                     time_limit, memory_limit, difficulty}));
        *out.mutable_problem() = ProblemFromRow(row, 0);
        auto event =
            audit::NewEvent(audit::v1::OWNER_APP, "app.problem.updated", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("update_problem");
        rec->set_subject(req->problem_id());
        rec->set_entity_type("problem");
        rec->set_entity_id(req->problem_id());
        *rec->mutable_old_value() = old_values.get();
        *rec->mutable_new_value() = new_values.get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::CreateContest(grpc::ServerContext* ctx,
                                           const v1::CreateContestRequest* req,
                                           v1::ContestResponse* resp) {
  return mutations_.Handle(
      *ctx, "CreateContest", *req, [&] { return ValidateCreateContest(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ContestResponse>> {
        ASSIGN_OR_RETURN(pg::Result clash, tx.Execute(kFindContestSlug, {pg::Text(req->slug())}));
        if (!clash.empty()) {
          return absl::AlreadyExistsError(
              absl::StrCat("contest slug \"", req->slug(), "\" is taken"));
        }
        const std::string contest_id = ids::NewUuidV7();
        ASSIGN_OR_RETURN(pg::Result row,
                         tx.Execute(kInsertContest,
                                    {pg::Text(contest_id), pg::Text(req->slug()),
                                     pg::Text(req->title()), pg::Time(FromProto(req->starts_at())),
                                     pg::Time(FromProto(req->ends_at()))}));
        v1::ContestResponse out;
        *out.mutable_contest() = ContestFromRow(row, 0);
        auto event =
            audit::NewEvent(audit::v1::OWNER_APP, "app.contest.created", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("create_contest");
        rec->set_subject(contest_id);
        rec->set_entity_type("contest");
        rec->set_entity_id(contest_id);
        *rec->mutable_new_value() = Values()
                                        .Set("slug", req->slug())
                                        .Set("title", req->title())
                                        .Set("starts_at", TimeString(row.GetTime(0, 3)))
                                        .Set("ends_at", TimeString(row.GetTime(0, 4)))
                                        .Set("status", "DRAFT")
                                        .Set("version", out.contest().version())
                                        .get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::AddProblemToContest(grpc::ServerContext* ctx,
                                                 const v1::AddProblemToContestRequest* req,
                                                 v1::ContestResponse* resp) {
  const std::string& contest_id = req->contest_id();
  const std::string& problem_id = req->problem_id();
  const std::string& label = req->label();
  return mutations_.Handle(
      *ctx, "AddProblemToContest", *req, [&] { return ValidateAddProblemToContest(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ContestResponse>> {
        // The contest's row lock serializes every change to its problem set.
        ASSIGN_OR_RETURN(pg::Result contest, tx.Execute(kLockContest, {pg::Text(contest_id)}));
        if (contest.empty()) return ContestNotFound(contest_id);
        ASSIGN_OR_RETURN(pg::Result problem, tx.Execute(kProblemExists, {pg::Text(problem_id)}));
        if (problem.empty()) return ProblemNotFound(problem_id);
        if (contest.Get(0, 5) == "PUBLISHED") {
          return absl::FailedPreconditionError(
              absl::StrCat("contest ", contest_id, " is published; its problems are fixed"));
        }
        v1::ContestResponse out;
        ASSIGN_OR_RETURN(pg::Result present,
                         tx.Execute(kLabelOfProblem, {pg::Text(contest_id), pg::Text(problem_id)}));
        if (!present.empty()) {
          if (present.Get(0, 0) != label) {
            return absl::AlreadyExistsError(
                absl::StrCat("problem already in contest with label ", present.Get(0, 0)));
          }
          ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
          return outbox::Unchanged(std::move(out));
        }
        ASSIGN_OR_RETURN(pg::Result holder,
                         tx.Execute(kProblemOfLabel, {pg::Text(contest_id), pg::Text(label)}));
        if (!holder.empty()) {
          return absl::AlreadyExistsError(absl::StrCat(
              "label ", label, " is already used in the contest by problem ", holder.Get(0, 0)));
        }
        RETURN_IF_ERROR(tx.Execute(kAddContestProblem,
                                   {pg::Text(contest_id), pg::Text(problem_id), pg::Text(label)})
                            .status());
        RETURN_IF_ERROR(tx.Execute(kBumpContest, {pg::Text(contest_id)}).status());
        ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
        auto event =
            audit::NewEvent(audit::v1::OWNER_APP, "app.contest.problem_added", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("add_contest_problem");
        rec->set_subject(contest_id);
        rec->set_entity_type("contest_problem");
        rec->set_entity_id(absl::StrCat(contest_id, "/", problem_id));
        *rec->mutable_new_value() =
            Values().Set("problem_id", problem_id).Set("label", label).get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::RemoveProblemFromContest(
    grpc::ServerContext* ctx, const v1::RemoveProblemFromContestRequest* req,
    v1::ContestResponse* resp) {
  const std::string& contest_id = req->contest_id();
  const std::string& problem_id = req->problem_id();
  return mutations_.Handle(
      *ctx, "RemoveProblemFromContest", *req,
      [&] { return ValidateRemoveProblemFromContest(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ContestResponse>> {
        ASSIGN_OR_RETURN(pg::Result contest, tx.Execute(kLockContest, {pg::Text(contest_id)}));
        if (contest.empty()) return ContestNotFound(contest_id);
        ASSIGN_OR_RETURN(pg::Result problem, tx.Execute(kProblemExists, {pg::Text(problem_id)}));
        if (problem.empty()) return ProblemNotFound(problem_id);
        if (contest.Get(0, 5) == "PUBLISHED") {
          return absl::FailedPreconditionError(
              absl::StrCat("contest ", contest_id, " is published; its problems are fixed"));
        }
        v1::ContestResponse out;
        ASSIGN_OR_RETURN(
            pg::Result removed,
            tx.Execute(kRemoveContestProblem, {pg::Text(contest_id), pg::Text(problem_id)}));
        if (removed.empty()) {
          ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
          return outbox::Unchanged(std::move(out));
        }
        const std::string label = removed.GetString(0, 0);
        RETURN_IF_ERROR(tx.Execute(kBumpContest, {pg::Text(contest_id)}).status());
        ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
        auto event = audit::NewEvent(audit::v1::OWNER_APP, "app.contest.problem_removed", actor,
                                     absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("remove_contest_problem");
        rec->set_subject(contest_id);
        rec->set_entity_type("contest_problem");
        rec->set_entity_id(absl::StrCat(contest_id, "/", problem_id));
        *rec->mutable_old_value() =
            Values().Set("problem_id", problem_id).Set("label", label).get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::PublishContest(grpc::ServerContext* ctx,
                                            const v1::PublishContestRequest* req,
                                            v1::ContestResponse* resp) {
  const std::string& contest_id = req->contest_id();
  return mutations_.Handle(
      *ctx, "PublishContest", *req, [&] { return ValidatePublishContest(*req); },
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::StatusOr<outbox::Outcome<v1::ContestResponse>> {
        ASSIGN_OR_RETURN(pg::Result contest, tx.Execute(kLockContest, {pg::Text(contest_id)}));
        if (contest.empty()) return ContestNotFound(contest_id);
        v1::ContestResponse out;
        const v1::Contest before = ContestFromRow(contest, 0);
        if (before.status() == v1::CONTEST_STATUS_PUBLISHED) {
          ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
          return outbox::Unchanged(std::move(out));
        }
        ASSIGN_OR_RETURN(pg::Result count,
                         tx.Execute(kCountContestProblems, {pg::Text(contest_id)}));
        if (count.GetInt64(0, 0) == 0) {
          return absl::FailedPreconditionError(
              absl::StrCat("contest ", contest_id, " has no problems to publish"));
        }
        RETURN_IF_ERROR(tx.Execute(kPublishContest, {pg::Text(contest_id)}).status());
        ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
        auto event =
            audit::NewEvent(audit::v1::OWNER_APP, "app.contest.published", actor, absl::Now());
        auto* rec = event.mutable_record();
        rec->set_action("publish_contest");
        rec->set_subject(contest_id);
        rec->set_entity_type("contest");
        rec->set_entity_id(contest_id);
        *rec->mutable_old_value() = Values().Set("status", StatusName(before.status())).get();
        *rec->mutable_new_value() = Values().Set("status", "PUBLISHED").get();
        return outbox::Changed(std::move(event), std::move(out));
      },
      resp);
}

grpc::Status AppServiceImpl::GetProblem(grpc::ServerContext* ctx, const v1::GetProblemRequest* req,
                                        v1::Problem* resp) {
  constexpr char kMethod[] = "GetProblem";
  if (auto s = ValidateId("problem_id", req->problem_id()); !s.ok()) {
    return server::ToGrpcStatus(s, kMethod);
  }
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), kMethod);
  auto r = (*conn)->Execute(kGetProblem, {pg::Text(req->problem_id())});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), kMethod);
  if (r->empty()) return server::ToGrpcStatus(ProblemNotFound(req->problem_id()), kMethod);
  *resp = ProblemFromRow(*r, 0);
  return grpc::Status::OK;
}

grpc::Status AppServiceImpl::GetContest(grpc::ServerContext* ctx, const v1::GetContestRequest* req,
                                        v1::Contest* resp) {
  constexpr char kMethod[] = "GetContest";
  if (auto s = ValidateId("contest_id", req->contest_id()); !s.ok()) {
    return server::ToGrpcStatus(s, kMethod);
  }
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), kMethod);
  auto contest = LoadContest(**conn, req->contest_id());
  if (!contest.ok()) return server::ToGrpcStatus(contest.status(), kMethod);
  *resp = std::move(contest).value();
  return grpc::Status::OK;
}

const std::vector<std::string>& RuntimeGrants() {
  static const auto* grants = new std::vector<std::string>{
      "GRANT SELECT, INSERT, UPDATE ON problems TO {role}",
      "GRANT SELECT, INSERT, UPDATE ON contests TO {role}",
      "GRANT SELECT, INSERT, DELETE ON contest_problems TO {role}",
  };
  return *grants;
}

}  // namespace ulticode::app
