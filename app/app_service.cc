#include "app/app_service.h"

#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "app/app_events.h"
#include "app/app_store.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::app {
namespace {

using google::protobuf::util::TimeUtil;

// Update mask paths of UpdateProblemRequest.
constexpr char kPathTitle[] = "title";
constexpr char kPathStatement[] = "statement";
constexpr char kPathTimeLimit[] = "time_limit";
constexpr char kPathMemoryLimit[] = "memory_limit_mb";
constexpr char kPathDifficulty[] = "difficulty";

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

// Microsecond precision: what timestamptz keeps.
absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(ts));
}

v1::Problem ProblemProto(const store::ProblemRow& row) {
  v1::Problem p;
  p.set_problem_id(row.problem_id);
  p.set_slug(row.slug);
  p.set_title(row.title);
  p.set_statement(row.statement);
  *p.mutable_time_limit() = TimeUtil::MillisecondsToDuration(row.time_limit_ms);
  p.set_memory_limit_mb(row.memory_limit_mb);
  p.set_difficulty(row.difficulty);
  p.set_version(row.version);
  *p.mutable_created_at() = ToProto(row.created_at);
  *p.mutable_updated_at() = ToProto(row.updated_at);
  return p;
}

v1::ProblemResponse ProblemResponse(const store::ProblemRow& row) {
  v1::ProblemResponse out;
  *out.mutable_problem() = ProblemProto(row);
  return out;
}

v1::Contest ContestProto(const store::ContestRow& row) {
  v1::Contest c;
  c.set_contest_id(row.contest_id);
  c.set_slug(row.slug);
  c.set_title(row.title);
  *c.mutable_starts_at() = ToProto(row.starts_at);
  *c.mutable_ends_at() = ToProto(row.ends_at);
  c.set_status(row.published() ? v1::CONTEST_STATUS_PUBLISHED : v1::CONTEST_STATUS_DRAFT);
  c.set_version(row.version);
  *c.mutable_created_at() = ToProto(row.created_at);
  *c.mutable_updated_at() = ToProto(row.updated_at);
  for (const store::ContestProblemRow& cp : row.problems) {
    auto* p = c.add_problems();
    p->set_problem_id(cp.problem_id);
    p->set_label(cp.label);
  }
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
  ASSIGN_OR_RETURN(std::optional<store::ContestRow> row, store::GetContest(ex, contest_id));
  if (!row.has_value()) return ContestNotFound(contest_id);
  return ContestProto(*row);
}

// The response of every change to an existing contest: the contest as it
// now stands, problems included.
absl::StatusOr<v1::ContestResponse> ContestNow(pg::Transaction& tx, const std::string& contest_id) {
  v1::ContestResponse out;
  ASSIGN_OR_RETURN(*out.mutable_contest(), LoadContest(tx, contest_id));
  return out;
}

// Before a problem joins or leaves a contest: the contest locked (NOT_FOUND
// when absent; the lock serializes every change to its problem set), the
// problem existing (NOT_FOUND) and the contest not published
// (FAILED_PRECONDITION).
absl::Status LockProblemSet(pg::Transaction& tx, const std::string& contest_id,
                            const std::string& problem_id) {
  ASSIGN_OR_RETURN(std::optional<store::ContestRow> contest, store::LockContest(tx, contest_id));
  if (!contest.has_value()) return ContestNotFound(contest_id);
  ASSIGN_OR_RETURN(bool problem_exists, store::ProblemExists(tx, problem_id));
  if (!problem_exists) return ProblemNotFound(problem_id);
  if (contest->published()) {
    return absl::FailedPreconditionError(
        absl::StrCat("contest ", contest_id, " is published; its problems are fixed"));
  }
  return absl::OkStatus();
}

// Only masked fields whose value differs: they become the UPDATE's non-NULL
// parameters and the event's old/new values.
store::ProblemChanges ChangesOf(const v1::UpdateProblemRequest& update,
                                const store::ProblemRow& before) {
  const std::set<std::string> mask(update.update_mask().paths().begin(),
                                   update.update_mask().paths().end());
  const v1::Problem& req = update.problem();
  store::ProblemChanges c;
  if (mask.count(kPathTitle) && req.title() != before.title) c.title = req.title();
  if (mask.count(kPathStatement) && req.statement() != before.statement) {
    c.statement = req.statement();
  }
  if (mask.count(kPathTimeLimit)) {  // validated: 100 ms..60 s
    const auto time_limit_ms =
        static_cast<int32_t>(TimeUtil::DurationToMilliseconds(req.time_limit()));
    if (time_limit_ms != before.time_limit_ms) c.time_limit_ms = time_limit_ms;
  }
  if (mask.count(kPathMemoryLimit) && req.memory_limit_mb() != before.memory_limit_mb) {
    c.memory_limit_mb = req.memory_limit_mb();
  }
  if (mask.count(kPathDifficulty) && req.difficulty() != before.difficulty) {
    c.difficulty = req.difficulty();
  }
  return c;
}

// How every read RPC ends: the value, or the error mapped for `method`.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* out, const char* method) {
  if (!result.ok()) return server::ToGrpcStatus(result.status(), method);
  *out = std::move(result).value();
  return grpc::Status::OK;
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

absl::Status ValidateTimeLimit(const google::protobuf::Duration& v) {
  if (v.nanos() % 1000000 != 0 || v.seconds() < 0 || v.seconds() > 60 ||
      TimeUtil::DurationToMilliseconds(v) < 100 || TimeUtil::DurationToMilliseconds(v) > 60000) {
    return absl::InvalidArgumentError("time_limit: whole milliseconds, 0.1s..60s");
  }
  return absl::OkStatus();
}

// `status` with its message's field path under `prefix` ("problem.").
absl::Status InField(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
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
  RETURN_IF_ERROR(ValidateTimeLimit(req.time_limit()));
  RETURN_IF_ERROR(ValidateMemoryLimit(req.memory_limit_mb()));
  return ValidateDifficulty(req.difficulty());
}

absl::Status ValidateUpdateProblem(const v1::UpdateProblemRequest& update) {
  const v1::Problem& req = update.problem();
  RETURN_IF_ERROR(InField("problem.", ValidateId("problem_id", req.problem_id())));
  if (update.update_mask().paths().empty()) {
    return absl::InvalidArgumentError("update_mask: at least one path is required");
  }
  // A repeated path is harmless: the mask is a set.
  for (int i = 0; i < update.update_mask().paths_size(); ++i) {
    const std::string& path = update.update_mask().paths(i);
    absl::Status valid;
    if (path == kPathTitle) {
      valid = ValidateTitle(req.title());
    } else if (path == kPathStatement) {
      valid = ValidateStatement(req.statement());
    } else if (path == kPathTimeLimit) {
      valid = ValidateTimeLimit(req.time_limit());
    } else if (path == kPathMemoryLimit) {
      valid = ValidateMemoryLimit(req.memory_limit_mb());
    } else if (path == kPathDifficulty) {
      valid = ValidateDifficulty(req.difficulty());
    } else {
      return absl::InvalidArgumentError(absl::StrCat("update_mask.paths[", i, "]: unknown path \"",
                                                     absl::CEscape(path.substr(0, 64)), "\""));
    }
    RETURN_IF_ERROR(InField("problem.", valid));
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

grpc::ServerUnaryReactor* AppServiceImpl::CreateProblem(grpc::CallbackServerContext* ctx,
                                                        const v1::CreateProblemRequest* req,
                                                        v1::ProblemResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "CreateProblem", *req, [&] { return ValidateCreateProblem(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ProblemResponse>> {
          const store::NewProblem problem{.problem_id = ids::NewUuidV7(),
                                          .slug = req->slug(),
                                          .title = req->title(),
                                          .statement = req->statement(),
                                          .time_limit_ms = static_cast<int32_t>(
                                              TimeUtil::DurationToMilliseconds(req->time_limit())),
                                          .memory_limit_mb = req->memory_limit_mb(),
                                          .difficulty = req->difficulty()};
          ASSIGN_OR_RETURN(std::optional<store::ProblemRow> row, store::InsertProblem(tx, problem));
          if (!row) {
            ASSIGN_OR_RETURN(bool taken, store::ProblemSlugTaken(tx, req->slug()));
            if (taken) {
              return absl::AlreadyExistsError(
                  absl::StrCat("problem slug \"", req->slug(), "\" is taken"));
            }
            return absl::AbortedError("problems: the slug was taken and freed meanwhile");
          }
          return mutation::Changed(events::ProblemCreated(actor, *row), ProblemResponse(*row));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::UpdateProblem(grpc::CallbackServerContext* ctx,
                                                        const v1::UpdateProblemRequest* req,
                                                        v1::ProblemResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    const std::string& problem_id = req->problem().problem_id();
    return mutations_.Handle(
        *ctx, "UpdateProblem", *req, [&] { return ValidateUpdateProblem(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ProblemResponse>> {
          ASSIGN_OR_RETURN(std::optional<store::ProblemRow> before,
                           store::LockProblem(tx, problem_id));
          if (!before.has_value()) return ProblemNotFound(problem_id);
          const store::ProblemChanges changes = ChangesOf(*req, *before);
          if (changes.empty()) return mutation::Unchanged(ProblemResponse(*before));
          ASSIGN_OR_RETURN(store::ProblemRow after, store::UpdateProblem(tx, problem_id, changes));
          return mutation::Changed(events::ProblemUpdated(actor, problem_id, *before, changes),
                                   ProblemResponse(after));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::CreateContest(grpc::CallbackServerContext* ctx,
                                                        const v1::CreateContestRequest* req,
                                                        v1::ContestResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    return mutations_.Handle(
        *ctx, "CreateContest", *req, [&] { return ValidateCreateContest(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ContestResponse>> {
          ASSIGN_OR_RETURN(bool taken, store::ContestSlugTaken(tx, req->slug()));
          if (taken) {
            return absl::AlreadyExistsError(
                absl::StrCat("contest slug \"", req->slug(), "\" is taken"));
          }
          const store::NewContest contest{.contest_id = ids::NewUuidV7(),
                                          .slug = req->slug(),
                                          .title = req->title(),
                                          .starts_at = FromProto(req->starts_at()),
                                          .ends_at = FromProto(req->ends_at())};
          ASSIGN_OR_RETURN(store::ContestRow row, store::InsertContest(tx, contest));
          v1::ContestResponse out;
          *out.mutable_contest() = ContestProto(row);
          return mutation::Changed(events::ContestCreated(actor, row), std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::AddProblemToContest(
    grpc::CallbackServerContext* ctx, const v1::AddProblemToContestRequest* req,
    v1::ContestResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    const std::string& contest_id = req->contest_id();
    const std::string& problem_id = req->problem_id();
    const std::string& label = req->label();
    return mutations_.Handle(
        *ctx, "AddProblemToContest", *req, [&] { return ValidateAddProblemToContest(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ContestResponse>> {
          RETURN_IF_ERROR(LockProblemSet(tx, contest_id, problem_id));
          ASSIGN_OR_RETURN(std::optional<std::string> present,
                           store::LabelOfProblem(tx, contest_id, problem_id));
          if (present.has_value()) {
            if (*present != label) {
              return absl::AlreadyExistsError(
                  absl::StrCat("problem already in contest with label ", *present));
            }
            ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
            return mutation::Unchanged(std::move(out));
          }
          ASSIGN_OR_RETURN(std::optional<std::string> holder,
                           store::ProblemOfLabel(tx, contest_id, label));
          if (holder.has_value()) {
            return absl::AlreadyExistsError(absl::StrCat(
                "label ", label, " is already used in the contest by problem ", *holder));
          }
          RETURN_IF_ERROR(store::AddContestProblem(tx, contest_id, problem_id, label));
          RETURN_IF_ERROR(store::BumpContest(tx, contest_id));
          ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
          return mutation::Changed(
              events::ContestProblemAdded(actor, contest_id, problem_id, label), std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::RemoveProblemFromContest(
    grpc::CallbackServerContext* ctx, const v1::RemoveProblemFromContestRequest* req,
    v1::ContestResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    const std::string& contest_id = req->contest_id();
    const std::string& problem_id = req->problem_id();
    return mutations_.Handle(
        *ctx, "RemoveProblemFromContest", *req,
        [&] { return ValidateRemoveProblemFromContest(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ContestResponse>> {
          RETURN_IF_ERROR(LockProblemSet(tx, contest_id, problem_id));
          ASSIGN_OR_RETURN(std::optional<std::string> label,
                           store::RemoveContestProblem(tx, contest_id, problem_id));
          if (!label.has_value()) {
            ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
            return mutation::Unchanged(std::move(out));
          }
          RETURN_IF_ERROR(store::BumpContest(tx, contest_id));
          ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
          return mutation::Changed(
              events::ContestProblemRemoved(actor, contest_id, problem_id, *label), std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::PublishContest(grpc::CallbackServerContext* ctx,
                                                         const v1::PublishContestRequest* req,
                                                         v1::ContestResponse* resp) {
  return calls_.Run(ctx, [=, this] {
    const std::string& contest_id = req->contest_id();
    return mutations_.Handle(
        *ctx, "PublishContest", *req, [&] { return ValidatePublishContest(*req); },
        [&](pg::Transaction& tx,
            const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<v1::ContestResponse>> {
          ASSIGN_OR_RETURN(std::optional<store::ContestRow> before,
                           store::LockContest(tx, contest_id));
          if (!before.has_value()) return ContestNotFound(contest_id);
          if (before->published()) {
            ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
            return mutation::Unchanged(std::move(out));
          }
          ASSIGN_OR_RETURN(int64_t problems, store::CountContestProblems(tx, contest_id));
          if (problems == 0) {
            return absl::FailedPreconditionError(
                absl::StrCat("contest ", contest_id, " has no problems to publish"));
          }
          RETURN_IF_ERROR(store::PublishContest(tx, contest_id));
          ASSIGN_OR_RETURN(v1::ContestResponse out, ContestNow(tx, contest_id));
          return mutation::Changed(events::ContestPublished(actor, contest_id, *before),
                                   std::move(out));
        },
        resp);
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::GetProblem(grpc::CallbackServerContext* ctx,
                                                     const v1::GetProblemRequest* req,
                                                     v1::Problem* resp) {
  return calls_.Run(ctx, [=, this] {
    auto problem = [&]() -> absl::StatusOr<v1::Problem> {
      RETURN_IF_ERROR(authorizer_.Admit(*ctx, "GetProblem").status());
      RETURN_IF_ERROR(ValidateId("problem_id", req->problem_id()));
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      ASSIGN_OR_RETURN(std::optional<store::ProblemRow> row,
                       store::GetProblem(*conn, req->problem_id()));
      if (!row.has_value()) return ProblemNotFound(req->problem_id());
      return ProblemProto(*row);
    };
    return Reply(problem(), resp, "GetProblem");
  });
}

grpc::ServerUnaryReactor* AppServiceImpl::GetContest(grpc::CallbackServerContext* ctx,
                                                     const v1::GetContestRequest* req,
                                                     v1::Contest* resp) {
  return calls_.Run(ctx, [=, this] {
    auto contest = [&]() -> absl::StatusOr<v1::Contest> {
      RETURN_IF_ERROR(authorizer_.Admit(*ctx, "GetContest").status());
      RETURN_IF_ERROR(ValidateId("contest_id", req->contest_id()));
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      return LoadContest(*conn, req->contest_id());
    };
    return Reply(contest(), resp, "GetContest");
  });
}

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"CreateProblem", "app.editor"},
      {"UpdateProblem", "app.editor"},
      {"CreateContest", "app.editor"},
      {"AddProblemToContest", "app.editor"},
      {"RemoveProblemFromContest", "app.editor"},
      {"PublishContest", "app.editor"},
      {"GetProblem", "app.reader"},
      {"GetContest", "app.reader"},
  };
  return *rules;
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
