// App's RPCs over real gRPC against a real PostgreSQL: atomicity of the
// business change and its outbox row, contents of every event, no-ops,
// idempotency keys, validation.
#include "app/app_service.h"

#include <cstdint>
#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "app/migrations.h"
#include "common/audit/event.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/server/error_details.h"
#include "common/server/grpc_server.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "owner/outbox/outbox_store.h"
#include "tests/support/owner_service_fixture.h"
#include "tests/support/test_env.h"

namespace ulticode::app {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;

// 2030-01-01T10:00:00Z.
constexpr int64_t kStart = 1893492000;
constexpr char kUnknownId[] = "0190a8e4-7b5c-7d3e-8f00-0123456789ab";

class AppServiceTest
    : public ::ulticode::testing::OwnerServiceTest<AppServiceImpl, v1::AppService> {
 protected:
  void SetUp() override {
    StartOwner(Migrations(), "ulticode.app.v1.AppService", "apptest", AccessRules());
  }
  // Every column of every row, "|" between columns, ";" between rows.
  std::string Rows(const std::string& sql) {
    pg::Statement st{"rows", sql.c_str()};
    auto r = conn_->Execute(st);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "<error>";
    std::vector<std::string> rows;
    for (int i = 0; i < r->rows(); ++i) {
      std::vector<std::string> cols;
      for (int j = 0; j < r->columns(); ++j) {
        cols.push_back(r->IsNull(i, j) ? "<null>" : r->GetString(i, j));
      }
      rows.push_back(absl::StrJoin(cols, "|"));
    }
    return absl::StrJoin(rows, ";");
  }
  std::map<std::string, int64_t> Counts() {
    std::map<std::string, int64_t> out;
    for (const char* t :
         {"problems", "contests", "contest_problems", "audit_outbox", "idempotency_keys"}) {
      out[t] = Scalar(absl::StrCat("SELECT count(*) FROM ", t));
    }
    return out;
  }

  static std::string Str(const google::protobuf::Struct& s, const std::string& k) {
    auto it = s.fields().find(k);
    return it == s.fields().end() ? "<absent>" : it->second.string_value();
  }
  static double Num(const google::protobuf::Struct& s, const std::string& k) {
    auto it = s.fields().find(k);
    return it == s.fields().end() ? -1 : it->second.number_value();
  }

  static google::protobuf::Timestamp Ts(int64_t seconds, int32_t nanos = 0) {
    google::protobuf::Timestamp t;
    t.set_seconds(seconds);
    t.set_nanos(nanos);
    return t;
  }
  static v1::CreateProblemRequest ProblemReq(const std::string& slug) {
    v1::CreateProblemRequest req;
    req.set_slug(slug);
    req.set_title("Problem " + slug);
    req.set_statement("Read two integers; print their sum.");
    *req.mutable_time_limit() = TimeUtil::MillisecondsToDuration(2000);
    req.set_memory_limit_mb(256);
    req.set_difficulty(3);
    return req;
  }
  static v1::CreateContestRequest ContestReq(const std::string& slug) {
    v1::CreateContestRequest req;
    req.set_slug(slug);
    req.set_title("Contest " + slug);
    *req.mutable_starts_at() = Ts(kStart);
    *req.mutable_ends_at() = Ts(kStart + 7200);
    return req;
  }

  v1::Problem CreateProblem(const std::string& slug) {
    v1::ProblemResponse resp;
    grpc::Status s = stub_->CreateProblem(Ctx().get(), ProblemReq(slug), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.problem();
  }
  v1::Contest CreateContest(const std::string& slug) {
    v1::ContestResponse resp;
    grpc::Status s = stub_->CreateContest(Ctx().get(), ContestReq(slug), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.contest();
  }
  v1::ContestResponse Add(const std::string& contest_id, const std::string& problem_id,
                          const std::string& label) {
    v1::AddProblemToContestRequest req;
    req.set_contest_id(contest_id);
    req.set_problem_id(problem_id);
    req.set_label(label);
    v1::ContestResponse resp;
    grpc::Status s = stub_->AddProblemToContest(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  v1::ContestResponse Publish(const std::string& contest_id) {
    v1::PublishContestRequest req;
    req.set_contest_id(contest_id);
    v1::ContestResponse resp;
    grpc::Status s = stub_->PublishContest(Ctx().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  void ExpectEnvelope(const audit::AuditEvent& e, const std::string& event_id,
                      const std::string& type, const std::string& actor, const std::string& action,
                      const std::string& entity_type, const std::string& entity_id,
                      const std::string& subject, const std::string& request_id) {
    EXPECT_TRUE(audit::Validate(e).ok()) << audit::Validate(e);
    EXPECT_FALSE(event_id.empty());
    EXPECT_EQ(e.event_id(), event_id);
    EXPECT_EQ(e.record().audit_id(), event_id);
    EXPECT_EQ(e.owner(), audit::v1::OWNER_APP);
    EXPECT_EQ(e.event_type(), type);
    // As built: Event() put its personal values back.
    EXPECT_EQ(e.schema_version(), audit::kEmbeddedPersonalDataSchemaVersion);
    EXPECT_GT(e.occurred_at().seconds(), 1'700'000'000);
    EXPECT_EQ(e.record().actor(), actor);
    EXPECT_EQ(e.record().action(), action);
    EXPECT_EQ(e.record().entity_type(), entity_type);
    EXPECT_EQ(e.record().entity_id(), entity_id);
    EXPECT_EQ(e.record().subject(), subject);
    EXPECT_EQ(e.record().client_ip(), "127.0.0.1");
    EXPECT_NE(e.record().user_agent().find("grpc-c++"), std::string::npos);
    EXPECT_EQ(e.record().request_id(), request_id);
  }
};

TEST_F(AppServiceTest, EveryMutatingRpcWritesExactlyOneOutboxRowWithTheRightContents) {
  const std::string kActor = "setter.carol@example.com";
  // "Σ" is two bytes: the event carries the size in bytes.
  const std::string statement = "Σ: read a and b, print a + b.\n";

  v1::CreateProblemRequest create;
  create.set_slug("two-sum");
  create.set_title("Two Sum");
  create.set_statement(statement);
  *create.mutable_time_limit() = TimeUtil::MillisecondsToDuration(2000);
  create.set_memory_limit_mb(256);
  create.set_difficulty(3);
  create.set_request_id(::ulticode::testing::RequestIdFor("req-create-problem"));
  v1::ProblemResponse created;
  ASSERT_TRUE(stub_->CreateProblem(Ctx(kActor).get(), create, &created).ok());
  ASSERT_TRUE(created.changed());
  EXPECT_EQ(OutboxRows(), 1);
  const std::string pid = created.problem().problem_id();
  EXPECT_EQ(created.problem().version(), 1);
  EXPECT_EQ(
      Rows("SELECT slug, title, statement, time_limit_ms, memory_limit_mb, difficulty, version "
           "FROM problems WHERE problem_id = '" +
           pid + "'"),
      "two-sum|Two Sum|" + statement + "|2000|256|3|1");
  auto e = Event(created.event_id());
  ExpectEnvelope(e, created.event_id(), "app.problem.created", kActor, "create_problem", "problem",
                 pid, pid, ::ulticode::testing::RequestIdFor("req-create-problem"));
  EXPECT_FALSE(e.record().has_old_value());
  EXPECT_EQ(e.record().new_value().fields_size(), 7);
  EXPECT_EQ(Str(e.record().new_value(), "slug"), "two-sum");
  EXPECT_EQ(Str(e.record().new_value(), "title"), "Two Sum");
  EXPECT_EQ(Num(e.record().new_value(), "statement_bytes"), static_cast<double>(statement.size()));
  EXPECT_EQ(Num(e.record().new_value(), "time_limit_ms"), 2000);
  EXPECT_EQ(Num(e.record().new_value(), "memory_limit_mb"), 256);
  EXPECT_EQ(Num(e.record().new_value(), "difficulty"), 3);
  EXPECT_EQ(Num(e.record().new_value(), "version"), 1);
  EXPECT_EQ(e.record().new_value().fields().count("statement"), 0u);

  // Masked: title, statement, time limit (changed) and difficulty (same).
  // memory_limit_mb differs but is not masked, so it must stay.
  const std::string statement2 = "Read a and b (|a|, |b| <= 10^9), print a + b.";
  v1::UpdateProblemRequest update;
  update.mutable_problem()->set_problem_id(pid);
  for (const char* path : {"title", "statement", "time_limit", "difficulty"}) {
    update.mutable_update_mask()->add_paths(path);
  }
  update.mutable_problem()->set_title("Two Sum (easy)");
  update.mutable_problem()->set_statement(statement2);
  *update.mutable_problem()->mutable_time_limit() = TimeUtil::MillisecondsToDuration(1000);
  update.mutable_problem()->set_memory_limit_mb(999);
  update.mutable_problem()->set_difficulty(3);
  v1::ProblemResponse updated;
  ASSERT_TRUE(stub_->UpdateProblem(Ctx(kActor).get(), update, &updated).ok());
  ASSERT_TRUE(updated.changed());
  EXPECT_EQ(OutboxRows(), 2);
  EXPECT_EQ(updated.problem().version(), 2);
  EXPECT_EQ(updated.problem().memory_limit_mb(), 256);
  EXPECT_EQ(
      Rows("SELECT slug, title, statement, time_limit_ms, memory_limit_mb, difficulty, version "
           "FROM problems WHERE problem_id = '" +
           pid + "'"),
      "two-sum|Two Sum (easy)|" + statement2 + "|1000|256|3|2");
  e = Event(updated.event_id());
  ExpectEnvelope(e, updated.event_id(), "app.problem.updated", kActor, "update_problem", "problem",
                 pid, pid, "");
  EXPECT_EQ(e.record().old_value().fields_size(), 3);
  EXPECT_EQ(e.record().new_value().fields_size(), 3);
  EXPECT_EQ(Str(e.record().old_value(), "title"), "Two Sum");
  EXPECT_EQ(Str(e.record().new_value(), "title"), "Two Sum (easy)");
  EXPECT_EQ(Num(e.record().old_value(), "statement_bytes"), static_cast<double>(statement.size()));
  EXPECT_EQ(Num(e.record().new_value(), "statement_bytes"), static_cast<double>(statement2.size()));
  EXPECT_EQ(Num(e.record().old_value(), "time_limit_ms"), 2000);
  EXPECT_EQ(Num(e.record().new_value(), "time_limit_ms"), 1000);
  EXPECT_EQ(e.record().new_value().fields().count("difficulty"), 0u);
  EXPECT_EQ(e.record().new_value().fields().count("memory_limit_mb"), 0u);

  v1::CreateContestRequest contest;
  contest.set_slug("weekly-1");
  contest.set_title("Weekly Round 1");
  *contest.mutable_starts_at() = Ts(kStart);
  *contest.mutable_ends_at() = Ts(kStart + 7200);
  contest.set_request_id(::ulticode::testing::RequestIdFor("req-create-contest"));
  v1::ContestResponse made;
  ASSERT_TRUE(stub_->CreateContest(Ctx(kActor).get(), contest, &made).ok());
  ASSERT_TRUE(made.changed());
  EXPECT_EQ(OutboxRows(), 3);
  const std::string cid = made.contest().contest_id();
  EXPECT_EQ(made.contest().status(), v1::CONTEST_STATUS_DRAFT);
  EXPECT_EQ(made.contest().version(), 1);
  EXPECT_EQ(made.contest().starts_at().seconds(), kStart);
  EXPECT_EQ(made.contest().ends_at().seconds(), kStart + 7200);
  EXPECT_EQ(made.contest().problems_size(), 0);
  const std::string contest_sql =
      "SELECT slug, title, status, version, published_at IS NULL, "
      "extract(epoch FROM starts_at)::bigint, extract(epoch FROM ends_at)::bigint "
      "FROM contests WHERE contest_id = '" +
      cid + "'";
  EXPECT_EQ(Rows(contest_sql), "weekly-1|Weekly Round 1|DRAFT|1|t|1893492000|1893499200");
  e = Event(made.event_id());
  ExpectEnvelope(e, made.event_id(), "app.contest.created", kActor, "create_contest", "contest",
                 cid, cid, ::ulticode::testing::RequestIdFor("req-create-contest"));
  EXPECT_FALSE(e.record().has_old_value());
  EXPECT_EQ(e.record().new_value().fields_size(), 6);
  EXPECT_EQ(Str(e.record().new_value(), "slug"), "weekly-1");
  EXPECT_EQ(Str(e.record().new_value(), "title"), "Weekly Round 1");
  EXPECT_EQ(Str(e.record().new_value(), "starts_at"), "2030-01-01T10:00:00Z");
  EXPECT_EQ(Str(e.record().new_value(), "ends_at"), "2030-01-01T12:00:00Z");
  EXPECT_EQ(Str(e.record().new_value(), "status"), "DRAFT");
  EXPECT_EQ(Num(e.record().new_value(), "version"), 1);

  const std::string members_sql =
      "SELECT problem_id, label FROM contest_problems WHERE contest_id = '" + cid + "'";
  const std::string version_sql = "SELECT version FROM contests WHERE contest_id = '" + cid + "'";
  v1::AddProblemToContestRequest add;
  add.set_contest_id(cid);
  add.set_problem_id(pid);
  add.set_label("A");
  add.set_request_id(::ulticode::testing::RequestIdFor("req-add"));
  v1::ContestResponse added;
  ASSERT_TRUE(stub_->AddProblemToContest(Ctx(kActor).get(), add, &added).ok());
  ASSERT_TRUE(added.changed());
  EXPECT_EQ(OutboxRows(), 4);
  EXPECT_EQ(added.contest().version(), 2);
  ASSERT_EQ(added.contest().problems_size(), 1);
  EXPECT_EQ(added.contest().problems(0).problem_id(), pid);
  EXPECT_EQ(added.contest().problems(0).label(), "A");
  EXPECT_EQ(Rows(members_sql), pid + "|A");
  EXPECT_EQ(Scalar(version_sql), 2);
  e = Event(added.event_id());
  ExpectEnvelope(e, added.event_id(), "app.contest.problem_added", kActor, "add_contest_problem",
                 "contest_problem", cid + "/" + pid, cid,
                 ::ulticode::testing::RequestIdFor("req-add"));
  EXPECT_FALSE(e.record().has_old_value());
  EXPECT_EQ(e.record().new_value().fields_size(), 2);
  EXPECT_EQ(Str(e.record().new_value(), "problem_id"), pid);
  EXPECT_EQ(Str(e.record().new_value(), "label"), "A");

  v1::RemoveProblemFromContestRequest remove;
  remove.set_contest_id(cid);
  remove.set_problem_id(pid);
  v1::ContestResponse removed;
  ASSERT_TRUE(stub_->RemoveProblemFromContest(Ctx(kActor).get(), remove, &removed).ok());
  ASSERT_TRUE(removed.changed());
  EXPECT_EQ(OutboxRows(), 5);
  EXPECT_EQ(removed.contest().version(), 3);
  EXPECT_EQ(removed.contest().problems_size(), 0);
  EXPECT_EQ(Rows(members_sql), "");
  EXPECT_EQ(Scalar(version_sql), 3);
  e = Event(removed.event_id());
  ExpectEnvelope(e, removed.event_id(), "app.contest.problem_removed", kActor,
                 "remove_contest_problem", "contest_problem", cid + "/" + pid, cid, "");
  EXPECT_FALSE(e.record().has_new_value());
  EXPECT_EQ(e.record().old_value().fields_size(), 2);
  EXPECT_EQ(Str(e.record().old_value(), "problem_id"), pid);
  EXPECT_EQ(Str(e.record().old_value(), "label"), "A");

  add.set_label("B");
  add.set_request_id("");
  v1::ContestResponse readded;
  ASSERT_TRUE(stub_->AddProblemToContest(Ctx(kActor).get(), add, &readded).ok());
  ASSERT_TRUE(readded.changed());
  EXPECT_EQ(OutboxRows(), 6);
  EXPECT_EQ(readded.contest().version(), 4);
  EXPECT_EQ(Rows(members_sql), pid + "|B");
  e = Event(readded.event_id());
  ExpectEnvelope(e, readded.event_id(), "app.contest.problem_added", kActor, "add_contest_problem",
                 "contest_problem", cid + "/" + pid, cid, "");
  EXPECT_EQ(Str(e.record().new_value(), "label"), "B");
  EXPECT_NE(readded.event_id(), added.event_id());

  v1::PublishContestRequest publish;
  publish.set_contest_id(cid);
  publish.set_request_id(::ulticode::testing::RequestIdFor("req-publish"));
  v1::ContestResponse published;
  ASSERT_TRUE(stub_->PublishContest(Ctx(kActor).get(), publish, &published).ok());
  ASSERT_TRUE(published.changed());
  EXPECT_EQ(OutboxRows(), 7);
  EXPECT_EQ(published.contest().status(), v1::CONTEST_STATUS_PUBLISHED);
  EXPECT_EQ(published.contest().version(), 5);
  ASSERT_EQ(published.contest().problems_size(), 1);
  EXPECT_EQ(published.contest().problems(0).label(), "B");
  EXPECT_EQ(Rows(contest_sql), "weekly-1|Weekly Round 1|PUBLISHED|5|f|1893492000|1893499200");
  e = Event(published.event_id());
  ExpectEnvelope(e, published.event_id(), "app.contest.published", kActor, "publish_contest",
                 "contest", cid, cid, ::ulticode::testing::RequestIdFor("req-publish"));
  EXPECT_EQ(e.record().old_value().fields_size(), 1);
  EXPECT_EQ(e.record().new_value().fields_size(), 1);
  EXPECT_EQ(Str(e.record().old_value(), "status"), "DRAFT");
  EXPECT_EQ(Str(e.record().new_value(), "status"), "PUBLISHED");

  // Seven calls, seven distinct pending rows.
  EXPECT_EQ(Scalar("SELECT count(DISTINCT event_id) FROM audit_outbox WHERE state = 'PENDING'"), 7);
}

TEST_F(AppServiceTest, FaultAfterOutboxInsertBeforeCommitLeavesNeitherRow) {
  std::vector<std::string> faulted;
  fault_ = [&faulted](absl::string_view method) {
    faulted.emplace_back(method);
    return absl::InternalError("injected fault before COMMIT");
  };
  v1::CreateProblemRequest req = ProblemReq("faulty");
  req.set_request_id(::ulticode::testing::RequestIdFor("fault-create"));
  v1::ProblemResponse resp;
  grpc::Status s = stub_->CreateProblem(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(faulted, std::vector<std::string>{"CreateProblem"});
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 0);
  EXPECT_EQ(OutboxRows(), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 0);

  // Nothing was burned: the same request_id goes through once the fault is gone.
  fault_ = [](absl::string_view) { return absl::OkStatus(); };
  ASSERT_TRUE(stub_->CreateProblem(Ctx().get(), req, &resp).ok());
  EXPECT_TRUE(resp.changed());
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 1);
  EXPECT_EQ(OutboxRows(), 1);

  const v1::Contest c = CreateContest("faulty-round");
  Add(c.contest_id(), resp.problem().problem_id(), "A");
  ASSERT_EQ(OutboxRows(), 3);
  const std::string contest_sql = "SELECT status, version, published_at IS NULL FROM contests";
  ASSERT_EQ(Rows(contest_sql), "DRAFT|2|t");

  faulted.clear();
  fault_ = [&faulted](absl::string_view method) {
    faulted.emplace_back(method);
    return method == "PublishContest" ? absl::InternalError("injected fault before COMMIT")
                                      : absl::OkStatus();
  };
  v1::PublishContestRequest publish;
  publish.set_contest_id(c.contest_id());
  v1::ContestResponse pr;
  s = stub_->PublishContest(Ctx().get(), publish, &pr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(faulted, std::vector<std::string>{"PublishContest"});
  EXPECT_EQ(Rows(contest_sql), "DRAFT|2|t");
  EXPECT_EQ(OutboxRows(), 3);

  fault_ = [](absl::string_view) { return absl::OkStatus(); };
  ASSERT_TRUE(stub_->PublishContest(Ctx().get(), publish, &pr).ok());
  EXPECT_TRUE(pr.changed());
  EXPECT_EQ(Rows(contest_sql), "PUBLISHED|3|f");
  EXPECT_EQ(OutboxRows(), 4);
}

TEST_F(AppServiceTest, BusinessErrorsLeaveNoOutboxRow) {
  const v1::Problem p = CreateProblem("alpha");
  const v1::Problem q = CreateProblem("beta");
  const v1::Contest c = CreateContest("round-1");
  ASSERT_EQ(OutboxRows(), 3);

  v1::CreateProblemRequest dup = ProblemReq("alpha");
  dup.set_request_id(::ulticode::testing::RequestIdFor("biz-dup-problem"));
  v1::ProblemResponse pr;
  grpc::Status s = stub_->CreateProblem(Ctx().get(), dup, &pr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("slug"), std::string::npos) << s.error_message();
  v1::CreateContestRequest dup_contest = ContestReq("round-1");
  v1::ContestResponse cr;
  s = stub_->CreateContest(Ctx().get(), dup_contest, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("slug"), std::string::npos) << s.error_message();

  v1::UpdateProblemRequest update;
  update.mutable_problem()->set_problem_id(kUnknownId);
  update.mutable_update_mask()->add_paths("title");
  update.mutable_problem()->set_title("Ghost");
  s = stub_->UpdateProblem(Ctx().get(), update, &pr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);

  v1::AddProblemToContestRequest add;
  add.set_contest_id(kUnknownId);
  add.set_problem_id(p.problem_id());
  add.set_label("A");
  s = stub_->AddProblemToContest(Ctx().get(), add, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("contest"), std::string::npos) << s.error_message();
  add.set_contest_id(c.contest_id());
  add.set_problem_id(kUnknownId);
  s = stub_->AddProblemToContest(Ctx().get(), add, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("problem"), std::string::npos) << s.error_message();

  v1::RemoveProblemFromContestRequest remove;
  remove.set_contest_id(kUnknownId);
  remove.set_problem_id(p.problem_id());
  EXPECT_EQ(stub_->RemoveProblemFromContest(Ctx().get(), remove, &cr).error_code(),
            grpc::StatusCode::NOT_FOUND);
  remove.set_contest_id(c.contest_id());
  remove.set_problem_id(kUnknownId);
  EXPECT_EQ(stub_->RemoveProblemFromContest(Ctx().get(), remove, &cr).error_code(),
            grpc::StatusCode::NOT_FOUND);

  v1::PublishContestRequest publish;
  publish.set_contest_id(kUnknownId);
  EXPECT_EQ(stub_->PublishContest(Ctx().get(), publish, &cr).error_code(),
            grpc::StatusCode::NOT_FOUND);
  publish.set_contest_id(c.contest_id());
  s = stub_->PublishContest(Ctx().get(), publish, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Rows("SELECT status, version FROM contests"), "DRAFT|1");
  EXPECT_EQ(OutboxRows(), 3);

  Add(c.contest_id(), p.problem_id(), "A");
  ASSERT_EQ(OutboxRows(), 4);
  // Another problem under a taken label; the same problem under another label.
  add.set_problem_id(q.problem_id());
  add.set_label("A");
  s = stub_->AddProblemToContest(Ctx().get(), add, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("label"), std::string::npos) << s.error_message();
  add.set_problem_id(p.problem_id());
  add.set_label("B");
  s = stub_->AddProblemToContest(Ctx().get(), add, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(s.error_message().find("label"), std::string::npos) << s.error_message();

  Publish(c.contest_id());
  ASSERT_EQ(OutboxRows(), 5);
  add.set_problem_id(q.problem_id());
  add.set_label("B");
  s = stub_->AddProblemToContest(Ctx().get(), add, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  remove.set_problem_id(p.problem_id());
  s = stub_->RemoveProblemFromContest(Ctx().get(), remove, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  EXPECT_EQ(OutboxRows(), 5);
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 2);
  EXPECT_EQ(Scalar("SELECT count(*) FROM contests"), 1);
  EXPECT_EQ(Rows("SELECT problem_id, label FROM contest_problems"), p.problem_id() + "|A");
  EXPECT_EQ(Rows("SELECT status, version FROM contests"), "PUBLISHED|3");
  EXPECT_EQ(Scalar("SELECT max(version) FROM problems"), 1);
  // A failed request leaves no idempotency key behind.
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 0);
}

TEST_F(AppServiceTest, NoOpChangesSucceedAndWriteNoEvent) {
  const v1::Problem p = CreateProblem("gamma");
  const std::string problem_sql =
      "SELECT title, statement, time_limit_ms, memory_limit_mb, difficulty, version, updated_at "
      "FROM problems WHERE problem_id = '" +
      p.problem_id() + "'";
  const std::string problem_before = Rows(problem_sql);

  v1::UpdateProblemRequest same;
  same.mutable_problem()->set_problem_id(p.problem_id());
  for (const char* path : {"title", "statement", "time_limit", "memory_limit_mb", "difficulty"}) {
    same.mutable_update_mask()->add_paths(path);
  }
  same.mutable_problem()->set_title(p.title());
  same.mutable_problem()->set_statement(p.statement());
  *same.mutable_problem()->mutable_time_limit() = p.time_limit();
  same.mutable_problem()->set_memory_limit_mb(p.memory_limit_mb());
  same.mutable_problem()->set_difficulty(p.difficulty());
  v1::ProblemResponse u;
  ASSERT_TRUE(stub_->UpdateProblem(Ctx().get(), same, &u).ok());
  EXPECT_FALSE(u.changed());
  EXPECT_TRUE(u.event_id().empty());
  EXPECT_TRUE(MessageDifferencer::Equals(u.problem(), p)) << u.problem().DebugString();

  // Only masked values count (and only they are validated); a repeated path is a set.
  v1::UpdateProblemRequest title_only;
  title_only.mutable_problem()->set_problem_id(p.problem_id());
  title_only.mutable_update_mask()->add_paths("title");
  title_only.mutable_update_mask()->add_paths("title");
  title_only.mutable_problem()->set_title(p.title());
  title_only.mutable_problem()->set_difficulty(0);
  *title_only.mutable_problem()->mutable_time_limit() = TimeUtil::MillisecondsToDuration(5);
  ASSERT_TRUE(stub_->UpdateProblem(Ctx().get(), title_only, &u).ok());
  EXPECT_FALSE(u.changed());
  EXPECT_EQ(u.problem().version(), 1);
  EXPECT_EQ(Rows(problem_sql), problem_before);
  EXPECT_EQ(OutboxRows(), 1);

  const v1::Contest c = CreateContest("round-2");
  const v1::ContestResponse a1 = Add(c.contest_id(), p.problem_id(), "A");
  ASSERT_TRUE(a1.changed());
  ASSERT_EQ(a1.contest().version(), 2);
  const std::string contest_sql =
      "SELECT status, version, updated_at FROM contests WHERE contest_id = '" + c.contest_id() +
      "'";
  const std::string contest_before = Rows(contest_sql);

  const v1::ContestResponse a2 = Add(c.contest_id(), p.problem_id(), "A");
  EXPECT_FALSE(a2.changed());
  EXPECT_TRUE(a2.event_id().empty());
  EXPECT_EQ(a2.contest().version(), 2);
  EXPECT_TRUE(MessageDifferencer::Equals(a2.contest(), a1.contest())) << a2.contest().DebugString();

  const v1::Problem q = CreateProblem("delta");
  v1::RemoveProblemFromContestRequest remove;
  remove.set_contest_id(c.contest_id());
  remove.set_problem_id(q.problem_id());  // never in the contest
  v1::ContestResponse r;
  ASSERT_TRUE(stub_->RemoveProblemFromContest(Ctx().get(), remove, &r).ok());
  EXPECT_FALSE(r.changed());
  EXPECT_TRUE(r.event_id().empty());
  EXPECT_EQ(r.contest().version(), 2);
  EXPECT_EQ(r.contest().problems_size(), 1);
  EXPECT_EQ(Rows(contest_sql), contest_before);
  EXPECT_EQ(OutboxRows(), 4);  // create p, create c, add, create q

  const v1::ContestResponse pub1 = Publish(c.contest_id());
  ASSERT_TRUE(pub1.changed());
  ASSERT_EQ(pub1.contest().version(), 3);
  const std::string published_before = Rows(contest_sql);
  const v1::ContestResponse pub2 = Publish(c.contest_id());
  EXPECT_FALSE(pub2.changed());
  EXPECT_TRUE(pub2.event_id().empty());
  EXPECT_EQ(pub2.contest().status(), v1::CONTEST_STATUS_PUBLISHED);
  EXPECT_EQ(pub2.contest().version(), 3);
  EXPECT_EQ(Rows(contest_sql), published_before);
  EXPECT_EQ(Scalar("SELECT count(*) FROM contest_problems"), 1);
  EXPECT_EQ(OutboxRows(), 5);
}

TEST_F(AppServiceTest, RepeatedRequestIdReturnsTheFirstResultAndChangesNothingMore) {
  v1::CreateProblemRequest req = ProblemReq("epsilon");
  req.set_request_id(::ulticode::testing::RequestIdFor("idem-1"));
  v1::ProblemResponse first, second;
  ASSERT_TRUE(stub_->CreateProblem(Ctx().get(), req, &first).ok());
  ASSERT_TRUE(stub_->CreateProblem(Ctx().get(), req, &second).ok());
  EXPECT_TRUE(first.changed());
  EXPECT_EQ(first.SerializeAsString(), second.SerializeAsString());
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 1);
  EXPECT_EQ(OutboxRows(), 1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 1);

  req.set_slug("epsilon-2");
  v1::ProblemResponse third;
  grpc::Status s = stub_->CreateProblem(Ctx().get(), req, &third);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("request_id"), std::string::npos) << s.error_message();
  // The same id on another method is a different request too.
  v1::CreateContestRequest contest = ContestReq("idem-round");
  contest.set_request_id(::ulticode::testing::RequestIdFor("idem-1"));
  v1::ContestResponse cr;
  s = stub_->CreateContest(Ctx().get(), contest, &cr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("request_id"), std::string::npos) << s.error_message();
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM contests"), 0);
  EXPECT_EQ(OutboxRows(), 1);

  // Concurrent repeats of one key: one change, one event, same answer.
  const v1::Contest c = CreateContest("idem-round");
  ASSERT_EQ(OutboxRows(), 2);
  v1::AddProblemToContestRequest add;
  add.set_contest_id(c.contest_id());
  add.set_problem_id(first.problem().problem_id());
  add.set_label("A");
  add.set_request_id(::ulticode::testing::RequestIdFor("idem-2"));
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> answers(kThreads);
  std::vector<grpc::Status> statuses(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      v1::ContestResponse r;
      statuses[i] = stub_->AddProblemToContest(Ctx().get(), add, &r);
      answers[i] = r.SerializeAsString();
    });
  }
  for (auto& t : threads) t.join();
  v1::ContestResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(answers[0]));
  EXPECT_TRUE(parsed.changed());
  EXPECT_FALSE(parsed.event_id().empty());
  for (int i = 0; i < kThreads; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
    EXPECT_EQ(answers[i], answers[0]) << i;
  }
  EXPECT_EQ(OutboxRows(), 3);
  EXPECT_EQ(Event(parsed.event_id()).event_type(), "app.contest.problem_added");
  EXPECT_EQ(Scalar("SELECT count(*) FROM contest_problems"), 1);
  EXPECT_EQ(Scalar("SELECT version FROM contests"), 2);
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 2);
}

TEST_F(AppServiceTest, InvalidInputGetsInvalidArgumentNamingTheFieldAndWritesNothing) {
  const v1::Problem p = CreateProblem("seed-problem");
  const v1::Contest c = CreateContest("seed-contest");
  const std::string pid = p.problem_id();
  const std::string cid = c.contest_id();
  const auto before = Counts();
  const std::string state_sql =
      "SELECT (SELECT version FROM problems), (SELECT version FROM contests), "
      "(SELECT status FROM contests)";
  const std::string state_before = Rows(state_sql);

  struct Case {
    std::string what;
    std::string field;
    std::function<grpc::Status()> call;
  };
  std::vector<Case> cases;
  auto create_problem = [&](const std::string& field,
                            std::function<void(v1::CreateProblemRequest&)> edit) {
    v1::CreateProblemRequest req = ProblemReq("fresh-problem");
    edit(req);
    cases.push_back({"CreateProblem " + req.ShortDebugString().substr(0, 120), field, [this, req] {
                       v1::ProblemResponse r;
                       return stub_->CreateProblem(Ctx().get(), req, &r);
                     }});
  };
  auto update_problem = [&](const std::string& field,
                            std::function<void(v1::UpdateProblemRequest&)> edit) {
    v1::UpdateProblemRequest req;
    req.mutable_problem()->set_problem_id(pid);
    req.mutable_update_mask()->add_paths("title");
    req.mutable_problem()->set_title("Renamed");
    edit(req);
    cases.push_back({"UpdateProblem " + req.ShortDebugString().substr(0, 120), field, [this, req] {
                       v1::ProblemResponse r;
                       return stub_->UpdateProblem(Ctx().get(), req, &r);
                     }});
  };
  auto create_contest = [&](const std::string& field,
                            std::function<void(v1::CreateContestRequest&)> edit) {
    v1::CreateContestRequest req = ContestReq("fresh-contest");
    edit(req);
    cases.push_back({"CreateContest " + req.ShortDebugString().substr(0, 120), field, [this, req] {
                       v1::ContestResponse r;
                       return stub_->CreateContest(Ctx().get(), req, &r);
                     }});
  };
  auto add_problem = [&](const std::string& field,
                         std::function<void(v1::AddProblemToContestRequest&)> edit) {
    v1::AddProblemToContestRequest req;
    req.set_contest_id(cid);
    req.set_problem_id(pid);
    req.set_label("A");
    edit(req);
    cases.push_back({"AddProblemToContest " + req.ShortDebugString(), field, [this, req] {
                       v1::ContestResponse r;
                       return stub_->AddProblemToContest(Ctx().get(), req, &r);
                     }});
  };
  auto remove_problem = [&](const std::string& field,
                            std::function<void(v1::RemoveProblemFromContestRequest&)> edit) {
    v1::RemoveProblemFromContestRequest req;
    req.set_contest_id(cid);
    req.set_problem_id(pid);
    edit(req);
    cases.push_back({"RemoveProblemFromContest " + req.ShortDebugString(), field, [this, req] {
                       v1::ContestResponse r;
                       return stub_->RemoveProblemFromContest(Ctx().get(), req, &r);
                     }});
  };
  auto publish = [&](const std::string& field,
                     std::function<void(v1::PublishContestRequest&)> edit) {
    v1::PublishContestRequest req;
    req.set_contest_id(cid);
    edit(req);
    cases.push_back({"PublishContest " + req.ShortDebugString(), field, [this, req] {
                       v1::ContestResponse r;
                       return stub_->PublishContest(Ctx().get(), req, &r);
                     }});
  };

  std::string title201, title201_multibyte;
  for (int i = 0; i < 201; ++i) {
    title201 += "x";
    title201_multibyte += "\xC3\xA9";  // é
  }
  const std::string statement_too_big(65537, 's');
  const std::string statement_nul("before\0after", 12);
  const std::vector<std::string> bad_slugs = {
      "",     "ab",   std::string(65, 'a'), "9abc", "-abc",   "Abc", "ab_c",
      "ab c", "ab.c", "ab\xC3\xA7",         "abC",  "abc/def"};
  const std::vector<std::string> bad_titles = {"",          title201,    title201_multibyte,
                                               "tab\there", "new\nline", "del\x7f"};
  const std::vector<std::string> bad_ids = {"",
                                            "not-a-uuid",
                                            "0190a8e47b5c7d3e8f000123456789ab",
                                            std::string(kUnknownId) + "0",
                                            "0190a8e4-7b5c-7d3e-8f00-0123456789ag",
                                            "0190a8e4_7b5c_7d3e_8f00_0123456789ab"};
  // Anything but a UUID: a name, a UUID without its hyphens or with a
  // letter past f, bytes that are not ASCII.
  const std::vector<std::string> bad_request_ids = {std::string(129, 'r'),
                                                    "has space",
                                                    "tab\tid",
                                                    "caf\xC3\xA9",
                                                    "del\x7f",
                                                    "alice",
                                                    "0190a8e47b5c7d3e8f000123456789ab",
                                                    "0190a8e4-7b5c-7d3e-8f00-0123456789ag"};

  for (const auto& slug : bad_slugs) {
    create_problem("slug", [&](auto& r) { r.set_slug(slug); });
    create_contest("slug", [&](auto& r) { r.set_slug(slug); });
  }
  for (const auto& title : bad_titles) {
    create_problem("title", [&](auto& r) { r.set_title(title); });
    update_problem("problem.title", [&](auto& r) { r.mutable_problem()->set_title(title); });
    create_contest("title", [&](auto& r) { r.set_title(title); });
  }
  for (const auto& statement : {statement_too_big, statement_nul}) {
    create_problem("statement", [&](auto& r) { r.set_statement(statement); });
    update_problem("problem.statement", [&](auto& r) {
      r.mutable_update_mask()->set_paths(0, "statement");
      r.mutable_problem()->set_statement(statement);
    });
  }
  std::vector<google::protobuf::Duration> bad_time_limits;
  for (int64_t ms : {0, 99, 60001, -1, INT32_MAX}) {
    bad_time_limits.push_back(TimeUtil::MillisecondsToDuration(ms));
  }
  bad_time_limits.push_back(TimeUtil::MicrosecondsToDuration(100500));  // not whole milliseconds
  for (const auto& v : bad_time_limits) {
    create_problem("time_limit", [&](auto& r) { *r.mutable_time_limit() = v; });
    update_problem("problem.time_limit", [&](auto& r) {
      r.mutable_update_mask()->set_paths(0, "time_limit");
      *r.mutable_problem()->mutable_time_limit() = v;
    });
  }
  for (int32_t v : {0, 15, 4097, -16}) {
    create_problem("memory_limit_mb", [&](auto& r) { r.set_memory_limit_mb(v); });
    update_problem("problem.memory_limit_mb", [&](auto& r) {
      r.mutable_update_mask()->set_paths(0, "memory_limit_mb");
      r.mutable_problem()->set_memory_limit_mb(v);
    });
  }
  for (int32_t v : {0, 11, -3}) {
    create_problem("difficulty", [&](auto& r) { r.set_difficulty(v); });
    update_problem("problem.difficulty", [&](auto& r) {
      r.mutable_update_mask()->set_paths(0, "difficulty");
      r.mutable_problem()->set_difficulty(v);
    });
  }
  // A bad value behind a valid first path is still caught.
  update_problem("problem.difficulty", [&](auto& r) {
    r.mutable_update_mask()->add_paths("difficulty");
    r.mutable_problem()->set_difficulty(42);
  });
  for (const auto& id : bad_ids) {
    update_problem("problem.problem_id", [&](auto& r) { r.mutable_problem()->set_problem_id(id); });
    add_problem("contest_id", [&](auto& r) { r.set_contest_id(id); });
    add_problem("problem_id", [&](auto& r) { r.set_problem_id(id); });
    remove_problem("contest_id", [&](auto& r) { r.set_contest_id(id); });
    remove_problem("problem_id", [&](auto& r) { r.set_problem_id(id); });
    publish("contest_id", [&](auto& r) { r.set_contest_id(id); });
  }
  update_problem("update_mask", [&](auto& r) { r.clear_update_mask(); });
  // An unknown path is named by its place in the mask.
  for (const char* path : {"slug", "bogus", "Title", "", "problem_id", "version"}) {
    update_problem("update_mask.paths[0]",
                   [&](auto& r) { r.mutable_update_mask()->set_paths(0, path); });
  }
  update_problem("update_mask.paths[1]",
                 [&](auto& r) { r.mutable_update_mask()->add_paths("bogus"); });
  update_problem("update_mask.paths[0]", [&](auto& r) {
    r.clear_update_mask();
    r.mutable_update_mask()->add_paths("title,difficulty");
  });

  create_contest("starts_at", [&](auto& r) { r.clear_starts_at(); });
  create_contest("ends_at", [&](auto& r) { r.clear_ends_at(); });
  create_contest("starts_at", [&](auto& r) { *r.mutable_starts_at() = Ts(-1); });
  create_contest("starts_at", [&](auto& r) { *r.mutable_starts_at() = Ts(kStart, -1); });
  create_contest("starts_at", [&](auto& r) { *r.mutable_starts_at() = Ts(kStart, 1000000000); });
  create_contest("starts_at", [&](auto& r) { *r.mutable_starts_at() = Ts(253402300800); });
  create_contest("ends_at", [&](auto& r) { *r.mutable_ends_at() = Ts(253402300800); });
  create_contest("ends_at", [&](auto& r) { *r.mutable_ends_at() = Ts(kStart, 1000000000); });
  create_contest("ends_at", [&](auto& r) { *r.mutable_ends_at() = Ts(INT64_MIN); });
  create_contest("ends_at", [&](auto& r) { *r.mutable_ends_at() = Ts(kStart); });       // equal
  create_contest("ends_at", [&](auto& r) { *r.mutable_ends_at() = Ts(kStart - 60); });  // before
  create_contest("ends_at",
                 [&](auto& r) { *r.mutable_ends_at() = Ts(kStart, 999); });  // < 1 µs later

  for (const char* label : {"", "a", "ABC", "A1", "1", "Ab", " A", "A ", "\xC3\x89", "-"}) {
    add_problem("label", [&](auto& r) { r.set_label(label); });
  }

  for (const auto& rid : bad_request_ids) {
    create_problem("request_id", [&](auto& r) { r.set_request_id(rid); });
    update_problem("request_id", [&](auto& r) { r.set_request_id(rid); });
    create_contest("request_id", [&](auto& r) { r.set_request_id(rid); });
    add_problem("request_id", [&](auto& r) { r.set_request_id(rid); });
    remove_problem("request_id", [&](auto& r) { r.set_request_id(rid); });
    publish("request_id", [&](auto& r) { r.set_request_id(rid); });
  }

  for (const auto& id : bad_ids) {
    cases.push_back({"GetProblem " + id, "problem_id", [this, id] {
                       v1::GetProblemRequest req;
                       req.set_problem_id(id);
                       v1::Problem r;
                       return stub_->GetProblem(Ctx().get(), req, &r);
                     }});
    cases.push_back({"GetContest " + id, "contest_id", [this, id] {
                       v1::GetContestRequest req;
                       req.set_contest_id(id);
                       v1::Contest r;
                       return stub_->GetContest(Ctx().get(), req, &r);
                     }});
  }

  ASSERT_GT(cases.size(), 150u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.field << ": " << s.error_message();
    EXPECT_TRUE(absl::StartsWith(s.error_message(), c.field + ":"))
        << "want field " << c.field << ", got: " << s.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), c.field) << s.error_message();
    EXPECT_EQ(Counts(), before);
  }
  EXPECT_EQ(Rows(state_sql), state_before);
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 0);
}

TEST_F(AppServiceTest, BoundaryValuesAreAccepted) {
  std::string title200;
  for (int i = 0; i < 200; ++i) title200 += "\xF0\x9F\x8F\x86";  // 🏆, four bytes each
  v1::CreateProblemRequest big;
  big.set_slug("a" + std::string(62, '0') + "-");  // 64 characters
  big.set_title(title200);
  big.set_statement(std::string(65536, 's'));
  *big.mutable_time_limit() = TimeUtil::MillisecondsToDuration(60000);
  big.set_memory_limit_mb(4096);
  big.set_difficulty(10);
  big.set_request_id(::ulticode::testing::RequestIdFor("big"));
  v1::ProblemResponse r1;
  grpc::Status s = stub_->CreateProblem(Ctx().get(), big, &r1);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r1.problem().title(), title200);
  EXPECT_EQ(r1.problem().statement().size(), 65536u);

  v1::CreateProblemRequest small;
  small.set_slug("abc");
  small.set_title("x");
  *small.mutable_time_limit() = TimeUtil::MillisecondsToDuration(100);
  small.set_memory_limit_mb(16);
  small.set_difficulty(1);  // empty statement allowed
  v1::ProblemResponse r2;
  s = stub_->CreateProblem(Ctx().get(), small, &r2);
  ASSERT_TRUE(s.ok()) << s.error_message();

  v1::CreateContestRequest wide = ContestReq("all-time");
  *wide.mutable_starts_at() = Ts(0);
  *wide.mutable_ends_at() = Ts(253402300799, 999999999);
  v1::ContestResponse r3;
  s = stub_->CreateContest(Ctx().get(), wide, &r3);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r3.contest().starts_at().seconds(), 0);
  EXPECT_EQ(r3.contest().ends_at().seconds(), 253402300799);
  EXPECT_EQ(r3.contest().ends_at().nanos(), 999999000);  // microseconds, as stored
  v1::CreateContestRequest tight = ContestReq("one-micro");
  *tight.mutable_ends_at() = Ts(kStart, 1000);
  s = stub_->CreateContest(Ctx().get(), tight, &r3);
  ASSERT_TRUE(s.ok()) << s.error_message();

  const v1::ContestResponse added = Add(r3.contest().contest_id(), r1.problem().problem_id(), "ZZ");
  EXPECT_TRUE(added.changed());
  EXPECT_EQ(OutboxRows(), 5);
  EXPECT_EQ(Scalar("SELECT count(*) FROM problems"), 2);
  EXPECT_EQ(Scalar("SELECT count(*) FROM contests"), 2);
}

TEST_F(AppServiceTest, CallerWithoutPrincipalIsUnauthenticated) {
  const v1::Problem p = CreateProblem("zeta");
  const v1::Problem q = CreateProblem("eta");
  const v1::Contest c = CreateContest("round-3");
  Add(c.contest_id(), p.problem_id(), "A");
  const auto before = Counts();
  const std::string state_sql = "SELECT status, version FROM contests";
  const std::string state_before = Rows(state_sql);

  // Every call below would succeed with a valid token.
  ::ulticode::testing::TokenSpec expired;
  expired.expires_in = -absl::Hours(1);
  for (const std::string& authorization :
       {std::string(""), std::string("Bearer not.a.token"), std::string("Basic YWxpY2U6eA=="),
        "Bearer " + ::ulticode::testing::SharedTestTokens().Mint(expired)}) {
    SCOPED_TRACE("authorization: " + authorization.substr(0, 20));
    auto Ctx = [&](const std::string&) {
      auto ctx = std::make_unique<grpc::ClientContext>();
      if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      return ctx;
    };
    const std::string principal;
    v1::ProblemResponse pr;
    v1::ContestResponse cr;
    std::vector<grpc::Status> results;
    results.push_back(stub_->CreateProblem(Ctx(principal).get(), ProblemReq("theta"), &pr));
    v1::UpdateProblemRequest update;
    update.mutable_problem()->set_problem_id(p.problem_id());
    update.mutable_update_mask()->add_paths("title");
    update.mutable_problem()->set_title("Renamed");
    results.push_back(stub_->UpdateProblem(Ctx(principal).get(), update, &pr));
    results.push_back(stub_->CreateContest(Ctx(principal).get(), ContestReq("round-4"), &cr));
    v1::AddProblemToContestRequest add;
    add.set_contest_id(c.contest_id());
    add.set_problem_id(q.problem_id());
    add.set_label("B");
    results.push_back(stub_->AddProblemToContest(Ctx(principal).get(), add, &cr));
    v1::RemoveProblemFromContestRequest remove;
    remove.set_contest_id(c.contest_id());
    remove.set_problem_id(p.problem_id());
    results.push_back(stub_->RemoveProblemFromContest(Ctx(principal).get(), remove, &cr));
    v1::PublishContestRequest publish;
    publish.set_contest_id(c.contest_id());
    results.push_back(stub_->PublishContest(Ctx(principal).get(), publish, &cr));
    // Identity is checked before the request itself.
    v1::CreateProblemRequest invalid;
    results.push_back(stub_->CreateProblem(Ctx(principal).get(), invalid, &pr));
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << i << ": " << results[i].error_message();
    }
    EXPECT_EQ(Counts(), before);
    EXPECT_EQ(Rows(state_sql), state_before);
  }
}

TEST_F(AppServiceTest, ReadRpcsWriteNoEvents) {
  const v1::Problem p = CreateProblem("iota");
  v1::GetProblemRequest get;
  get.set_problem_id(p.problem_id());
  v1::Problem got;
  ASSERT_TRUE(stub_->GetProblem(Ctx().get(), get, &got).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(got, p)) << got.DebugString();

  const v1::Contest c = CreateContest("round-5");
  // Added out of order; read back A, B, Z, AA (single letters first).
  std::map<std::string, std::string> by_label;
  v1::ContestResponse last;
  for (const char* label : {"B", "AA", "A", "Z"}) {
    const v1::Problem x = CreateProblem(absl::AsciiStrToLower(absl::StrCat("prob-", label)));
    by_label[label] = x.problem_id();
    last = Add(c.contest_id(), x.problem_id(), label);
  }
  const int64_t rows = OutboxRows();
  ASSERT_EQ(rows, 10);  // 5 problems, 1 contest, 4 additions

  v1::GetContestRequest get_contest;
  get_contest.set_contest_id(c.contest_id());
  v1::Contest contest;
  ASSERT_TRUE(stub_->GetContest(Ctx().get(), get_contest, &contest).ok());
  EXPECT_EQ(contest.slug(), "round-5");
  EXPECT_EQ(contest.status(), v1::CONTEST_STATUS_DRAFT);
  EXPECT_EQ(contest.version(), 5);
  std::vector<std::string> labels;
  for (const auto& cp : contest.problems()) {
    labels.push_back(cp.label());
    EXPECT_EQ(cp.problem_id(), by_label[cp.label()]) << cp.label();
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"A", "B", "Z", "AA"}));
  EXPECT_TRUE(MessageDifferencer::Equals(contest, last.contest())) << last.contest().DebugString();

  get.set_problem_id(kUnknownId);
  EXPECT_EQ(stub_->GetProblem(Ctx().get(), get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  get_contest.set_contest_id(kUnknownId);
  EXPECT_EQ(stub_->GetContest(Ctx().get(), get_contest, &contest).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(OutboxRows(), rows);
  EXPECT_EQ(Scalar("SELECT count(*) FROM idempotency_keys"), 0);
}

}  // namespace
}  // namespace ulticode::app
