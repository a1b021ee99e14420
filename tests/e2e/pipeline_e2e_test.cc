// End to end: the three real server binaries against the test PostgreSQL and
// Redis. Mutating RPCs of Auth and App must each leave exactly one audit row
// in Admin, field by field; read-only and failed RPCs must leave none.
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/pg/connection.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;
namespace authv1 = ::ulticode::auth::v1;
namespace appv1 = ::ulticode::app::v1;
namespace adminv1 = ::ulticode::admin::v1;

// What one mutating call must produce in audit_logs.
struct Expected {
  std::string event_id;
  audit::v1::Owner owner;
  std::string event_type;
  std::string actor;
  std::string action;
  std::string entity_type;
  std::string entity_id;
  std::string request_id;
  // A key of new_value (or old_value when there is no new one) and its value.
  std::string value_key;
  std::string value;
};

class PipelineE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "e2e";
    options.tls = true;  // and mutual TLS is covered by tls_test
    // Everything a process says, for the secrets check at the end.
    options.auth_args = options.app_args = options.admin_args = {"--log-level=debug"};
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    auth_ = authv1::AuthService::NewStub(mesh_->Channel(Service::kAuth, 0));
    app_ = appv1::AppService::NewStub(mesh_->Channel(Service::kApp, 0));
    admin_ = adminv1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
  }

  static void As(grpc::ClientContext* ctx, const std::string& principal) {
    ctx->AddMetadata("authorization", testing::SharedTestTokens().Bearer(principal));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<authv1::AuthService::Stub> auth_;
  std::unique_ptr<appv1::AppService::Stub> app_;
  std::unique_ptr<adminv1::AdminService::Stub> admin_;
};

TEST_F(PipelineE2ETest, EveryCommittedMutationLeavesExactlyOneAuditRowAndNothingElseDoes) {
  std::vector<Expected> expected;

  // --- Auth ---
  authv1::CreateUserResponse user;
  {
    grpc::ClientContext ctx;
    As(&ctx, "alice");
    authv1::CreateUserRequest req;
    req.set_username("bob");
    req.set_email("bob@example.com");
    req.set_display_name("Bob");
    req.set_request_id(::ulticode::testing::RequestIdFor("e2e-create-bob"));
    ASSERT_TRUE(auth_->CreateUser(&ctx, req, &user).ok());
    const std::string& id = user.user().user_id();
    expected.push_back({user.event_id(), audit::v1::OWNER_AUTH, "auth.user.created", "alice",
                        "create_user", "user", id,
                        ::ulticode::testing::RequestIdFor("e2e-create-bob"), "username", "bob"});
  }
  const std::string user_id = user.user().user_id();
  for (const char* verb : {"assign", "revoke"}) {
    grpc::ClientContext ctx;
    As(&ctx, "alice");
    if (std::string(verb) == "assign") {
      authv1::AssignRoleRequest req;
      req.set_user_id(user_id);
      req.set_role("judge");
      authv1::AssignRoleResponse resp;
      ASSERT_TRUE(auth_->AssignRole(&ctx, req, &resp).ok());
      expected.push_back({resp.event_id(), audit::v1::OWNER_AUTH, "auth.role.assigned", "alice",
                          "assign_role", "user_role", user_id + "/judge", "", "", ""});
    } else {
      authv1::RevokeRoleRequest req;
      req.set_user_id(user_id);
      req.set_role("judge");
      authv1::RevokeRoleResponse resp;
      ASSERT_TRUE(auth_->RevokeRole(&ctx, req, &resp).ok());
      expected.push_back({resp.event_id(), audit::v1::OWNER_AUTH, "auth.role.revoked", "alice",
                          "revoke_role", "user_role", user_id + "/judge", "", "", ""});
    }
  }
  {
    grpc::ClientContext ctx;
    As(&ctx, "root");
    authv1::UpdateLoginPolicyRequest req;
    for (const char* path :
         {"min_password_length", "lockout_threshold", "mfa_required", "session_lifetime"}) {
      req.mutable_update_mask()->add_paths(path);
    }
    req.mutable_login_policy()->set_min_password_length(14);
    req.mutable_login_policy()->set_lockout_threshold(5);
    req.mutable_login_policy()->set_mfa_required(true);
    *req.mutable_login_policy()->mutable_session_lifetime() =
        google::protobuf::util::TimeUtil::SecondsToDuration(3600);
    authv1::UpdateLoginPolicyResponse resp;
    ASSERT_TRUE(auth_->UpdateLoginPolicy(&ctx, req, &resp).ok());
    expected.push_back({resp.event_id(), audit::v1::OWNER_AUTH, "auth.login_policy.updated", "root",
                        "update_login_policy", "login_policy", "default", "", "", ""});
  }

  // --- App ---
  appv1::ProblemResponse problem;
  {
    grpc::ClientContext ctx;
    As(&ctx, "carol");
    appv1::CreateProblemRequest req;
    req.set_slug("two-sum");
    req.set_title("Two Sum");
    req.set_statement("Add two numbers.");
    *req.mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(1000);
    req.set_memory_limit_mb(256);
    req.set_difficulty(1);
    ASSERT_TRUE(app_->CreateProblem(&ctx, req, &problem).ok());
    expected.push_back({problem.event_id(), audit::v1::OWNER_APP, "app.problem.created", "carol",
                        "create_problem", "problem", problem.problem().problem_id(), "", "slug",
                        "two-sum"});
  }
  appv1::ContestResponse contest;
  {
    grpc::ClientContext ctx;
    As(&ctx, "carol");
    appv1::CreateContestRequest req;
    req.set_slug("weekly-1");
    req.set_title("Weekly 1");
    *req.mutable_starts_at() = google::protobuf::util::TimeUtil::SecondsToTimestamp(
        absl::ToUnixSeconds(absl::Now() + absl::Hours(24)));
    *req.mutable_ends_at() = google::protobuf::util::TimeUtil::SecondsToTimestamp(
        absl::ToUnixSeconds(absl::Now() + absl::Hours(26)));
    ASSERT_TRUE(app_->CreateContest(&ctx, req, &contest).ok());
    expected.push_back({contest.event_id(), audit::v1::OWNER_APP, "app.contest.created", "carol",
                        "create_contest", "contest", contest.contest().contest_id(), "", "slug",
                        "weekly-1"});
  }
  {
    grpc::ClientContext ctx;
    As(&ctx, "carol");
    appv1::AddProblemToContestRequest req;
    req.set_contest_id(contest.contest().contest_id());
    req.set_problem_id(problem.problem().problem_id());
    req.set_label("A");
    appv1::ContestResponse resp;
    ASSERT_TRUE(app_->AddProblemToContest(&ctx, req, &resp).ok());
    expected.push_back({resp.event_id(), audit::v1::OWNER_APP, "app.contest.problem_added", "carol",
                        "add_contest_problem", "contest_problem",
                        contest.contest().contest_id() + "/" + problem.problem().problem_id(), "",
                        "label", "A"});
  }

  // --- Reads and failures: no events ---
  {
    grpc::ClientContext ctx;
    As(&ctx, "alice");
    authv1::GetUserRequest req;
    req.set_user_id(user_id);
    authv1::User out;
    ASSERT_TRUE(auth_->GetUser(&ctx, req, &out).ok());
  }
  {
    grpc::ClientContext ctx;
    As(&ctx, "carol");
    appv1::GetProblemRequest req;
    req.set_problem_id(problem.problem().problem_id());
    appv1::Problem out;
    ASSERT_TRUE(app_->GetProblem(&ctx, req, &out).ok());
  }
  {
    grpc::ClientContext ctx;
    As(&ctx, "alice");
    authv1::CreateUserRequest req;
    req.set_username("");  // invalid
    authv1::CreateUserResponse out;
    EXPECT_EQ(auth_->CreateUser(&ctx, req, &out).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    As(&ctx, "alice");
    authv1::CreateUserRequest req;
    req.set_username("bob");  // taken
    req.set_email("bob2@example.com");
    authv1::CreateUserResponse out;
    EXPECT_EQ(auth_->CreateUser(&ctx, req, &out).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  {
    grpc::ClientContext ctx;  // no principal
    appv1::CreateProblemRequest req;
    req.set_slug("anon");
    req.set_title("Anon");
    appv1::ProblemResponse out;
    EXPECT_EQ(app_->CreateProblem(&ctx, req, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }

  // --- The owners committed exactly these events (the outbox row commits
  // with the change, so this is exact at once): reads and failures made none.
  for (auto [service, want] : {std::pair{Service::kAuth, 4}, std::pair{Service::kApp, 3}}) {
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(service);
    auto conn = pg::Connection::Connect(o);
    ASSERT_TRUE(conn.ok()) << conn.status();
    pg::Statement st{"outbox.count", "SELECT count(*) FROM audit_outbox"};
    auto r = (*conn)->Execute(st);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->GetInt64(0, 0), want);
  }

  // --- Admin has every row (with a deadline) ---
  for (const Expected& want : expected) {
    ASSERT_FALSE(want.event_id.empty()) << want.action;
    adminv1::AuditLog log;
    const bool arrived = WaitFor(
        [&] {
          grpc::ClientContext ctx;
          As(&ctx, "auditor");
          adminv1::GetAuditLogRequest req;
          req.set_event_id(want.event_id);
          return admin_->GetAuditLog(&ctx, req, &log).ok();
        },
        std::chrono::seconds(30));
    ASSERT_TRUE(arrived) << want.action << " never reached audit_logs\n"
                         << mesh_->Output(Service::kAdmin, 0);
    EXPECT_EQ(log.owner(), want.owner) << want.action;
    EXPECT_EQ(log.event_type(), want.event_type);
    EXPECT_EQ(log.actor(), want.actor);
    EXPECT_EQ(log.action(), want.action);
    EXPECT_EQ(log.entity_type(), want.entity_type);
    EXPECT_EQ(log.entity_id(), want.entity_id);
    EXPECT_EQ(log.request_id(), want.request_id);
    EXPECT_EQ(log.client_ip(), "127.0.0.1") << want.action;
    EXPECT_GT(log.occurred_at().seconds(), 0);
    EXPECT_GE(log.ingested_at().seconds(), log.occurred_at().seconds());
    if (!want.value_key.empty()) {
      const auto& fields = log.new_value().fields();
      ASSERT_TRUE(fields.contains(want.value_key)) << want.action << ": " << log.DebugString();
      EXPECT_EQ(fields.at(want.value_key).string_value(), want.value);
    }
  }
  // Old -> new where the change has a before.
  {
    grpc::ClientContext ctx;
    As(&ctx, "auditor");
    adminv1::GetAuditLogRequest req;
    req.set_event_id(expected[1].event_id);  // assign_role
    adminv1::AuditLog log;
    ASSERT_TRUE(admin_->GetAuditLog(&ctx, req, &log).ok());
    EXPECT_EQ(log.old_value().fields().at("roles").list_value().values_size(), 0);
    EXPECT_EQ(log.new_value().fields().at("roles").list_value().values(0).string_value(), "judge");
  }

  // --- Exactly these rows: reads and failures produced nothing ---
  adminv1::QueryAuditLogsResponse all;
  {
    grpc::ClientContext ctx;
    As(&ctx, "auditor");
    adminv1::QueryAuditLogsRequest req;
    req.set_page_size(1000);
    ASSERT_TRUE(admin_->QueryAuditLogs(&ctx, req, &all).ok());
  }
  std::set<std::string> got, want;
  for (const auto& l : all.audit_logs()) got.insert(l.event_id());
  for (const auto& e : expected) want.insert(e.event_id);
  EXPECT_EQ(got, want);
  EXPECT_EQ(all.audit_logs_size(), static_cast<int>(expected.size())) << "no duplicates";

  // --- The pipeline is quiet and healthy ---
  adminv1::PipelineStatus status;
  ASSERT_TRUE(WaitFor(
      [&] {
        grpc::ClientContext ctx;
        As(&ctx, "auditor");
        if (!admin_->GetPipelineStatus(&ctx, adminv1::GetPipelineStatusRequest(), &status).ok()) {
          return false;
        }
        int64_t pending = 0;
        for (const auto& s : status.streams()) pending += s.pending();
        return pending == 0 && status.inbox().processed() == static_cast<int64_t>(expected.size());
      },
      std::chrono::seconds(10)))
      << status.DebugString();
  EXPECT_EQ(status.inbox().pending(), 0);
  EXPECT_EQ(status.inbox().processing(), 0);
  EXPECT_EQ(status.inbox().dead(), 0);
  EXPECT_EQ(status.poison_count(), 0);
  ASSERT_EQ(status.streams_size(), 2);
  for (const auto& s : status.streams()) {
    EXPECT_TRUE(s.group_exists()) << s.stream();
    EXPECT_TRUE(s.has_group_lag()) << s.stream();  // known, not merely unset
    EXPECT_EQ(s.group_lag(), 0) << s.stream();
  }
  EXPECT_EQ(status.streams(0).length(), 4);  // auth events
  EXPECT_EQ(status.streams(1).length(), 3);  // app events

  // Clean shutdown of all three.
  for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) {
    EXPECT_EQ(mesh_->Terminate(s, 0), 0) << mesh_->Output(s, 0);
  }

  // The whole run's logs (debug level, access logs with every error's
  // detail) name no password and hold no private key.
  std::string logs;
  for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) logs += mesh_->Output(s, 0);
  ASSERT_GT(logs.size(), 1000u);
  const std::vector<std::string> secrets = mesh_->Secrets();
  ASSERT_EQ(secrets.size(), 12u);  // 3 x (2 database passwords, 1 Redis password, 1 key)
  for (const std::string& secret : secrets) {
    const std::string needle = secret.size() > 100 ? secret.substr(28, 40) : secret;  // PEM body
    EXPECT_EQ(logs.find(needle), std::string::npos) << "a secret reached the logs";
  }
  EXPECT_EQ(logs.find("PRIVATE KEY"), std::string::npos);

  // Who read what: every audit read is logged with its principal and filters.
  const std::string admin_log = mesh_->Output(Service::kAdmin, 0);
  EXPECT_NE(admin_log.find(R"("component":"audit_read","message":"QueryAuditLogs")"),
            std::string::npos);
  EXPECT_NE(admin_log.find(R"("principal":"auditor","filters":"page_size: 1000")"),
            std::string::npos)
      << admin_log.substr(0, 4000);
  EXPECT_NE(admin_log.find(R"("component":"audit_read","message":"GetAuditLog")"),
            std::string::npos);
}

}  // namespace
}  // namespace ulticode
