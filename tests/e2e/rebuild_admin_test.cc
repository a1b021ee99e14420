// The "Admin's database is lost" procedure (docs/guarantees.md), for real:
// the three server binaries, events through the whole pipeline, Admin's
// tables wiped, then Replay on both owners brings every audit row back,
// exactly once; each replay is itself in audit_logs with the operator as the
// actor. Also the owners' other operator action, RedriveDeadOutbox, and the
// refusals of both (nothing changed).
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/pg/connection.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/pg_query.h"
#include "tests/support/tokens.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"
#include "ulticode/outbox/v1/outbox.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;
namespace opsv1 = ::ulticode::outbox::v1;

class RebuildAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "rebuild";
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) {
      pg::ConnectOptions o;
      o.conninfo = mesh_->Dsn(s);
      auto c = pg::Connection::Connect(o);
      ASSERT_TRUE(c.ok()) << c.status();
      db_[static_cast<int>(s)] = std::move(c).value();
    }
  }

  pg::Connection& Db(Service s) { return *db_[static_cast<int>(s)]; }
  int64_t Admin(const std::string& sql) { return QueryInt(Db(Service::kAdmin), sql); }

  static void As(grpc::ClientContext* ctx, const std::string& principal,
                 std::vector<std::string> roles) {
    testing::TokenSpec spec;
    spec.subject = principal;
    spec.roles = std::move(roles);
    ctx->AddMetadata("authorization", "Bearer " + testing::SharedTestTokens().Mint(spec));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  // Business changes on both owners; returns their event ids.
  std::vector<std::string> Mutate(int n) {
    auto auth = auth::v1::AuthService::NewStub(mesh_->Channel(Service::kAuth, 0));
    auto app = app::v1::AppService::NewStub(mesh_->Channel(Service::kApp, 0));
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      grpc::ClientContext a;
      As(&a, "alice", {"auth.admin"});
      auth::v1::CreateUserRequest user;
      user.set_username(absl::StrCat("user", i));
      user.set_email(absl::StrCat("user", i, "@example.com"));
      auth::v1::CreateUserResponse created;
      EXPECT_TRUE(auth->CreateUser(&a, user, &created).ok());
      ids.push_back(created.event_id());
      grpc::ClientContext p;
      As(&p, "alice", {"app.editor"});
      app::v1::CreateProblemRequest problem;
      problem.set_slug(absl::StrCat("problem-", i));
      problem.set_title(absl::StrCat("Problem ", i));
      problem.set_statement("Add two numbers.");
      problem.set_time_limit_ms(1000);
      problem.set_memory_limit_mb(256);
      problem.set_difficulty(1);
      app::v1::ProblemResponse made;
      grpc::Status s = app->CreateProblem(&p, problem, &made);
      EXPECT_TRUE(s.ok()) << s.error_message();
      ids.push_back(made.event_id());
    }
    return ids;
  }

  bool AllConfirmed() {
    return QueryInt(Db(Service::kAuth),
                    "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'") == 0 &&
           QueryInt(Db(Service::kApp),
                    "SELECT count(*) FROM audit_outbox WHERE state <> 'CONFIRMED'") == 0;
  }

  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<pg::Connection> db_[3];
};

TEST_F(RebuildAdminTest, ReplayFromBothOwnersRebuildsAWipedAdminDatabaseExactlyOnce) {
  const std::vector<std::string> ids = Mutate(10);
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 20 && AllConfirmed(); },
                      std::chrono::seconds(30)));

  // Admin's database is lost: an empty one takes its place.
  ASSERT_TRUE(Db(Service::kAdmin)
                  .Execute(pg::Statement{"wipe", "TRUNCATE audit_logs, consumer_inbox, poison_events"},
                           {})
                  .ok());
  ASSERT_EQ(Admin("SELECT count(*) FROM audit_logs"), 0);

  google::protobuf::Timestamp from, to;
  from.set_seconds(absl::ToUnixSeconds(absl::Now() - absl::Hours(1)));
  to.set_seconds(absl::ToUnixSeconds(absl::Now() + absl::Minutes(1)));
  std::vector<std::string> replay_events;
  for (Service s : {Service::kAuth, Service::kApp}) {
    auto ops = opsv1::OutboxOperations::NewStub(mesh_->Channel(s, 0));
    opsv1::ReplayRequest req;
    *req.mutable_from() = from;
    *req.mutable_to() = to;
    req.set_reason("Admin database restored from an empty backup");
    req.set_request_id("rebuild-1");
    {
      grpc::ClientContext ctx;
      As(&ctx, "olivia", {"audit.reader"});
      opsv1::ReplayResponse resp;
      EXPECT_EQ(ops->Replay(&ctx, req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED)
          << "audit.operator is required";
    }
    grpc::ClientContext ctx;
    As(&ctx, "olivia", {"audit.operator"});
    opsv1::ReplayResponse resp;
    grpc::Status st = ops->Replay(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.replayed(), 10);
    EXPECT_TRUE(resp.changed());
    replay_events.push_back(resp.event_id());
  }
  // Every original event is back, once, with the operator's two records.
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 22; },
                      std::chrono::seconds(30)))
      << Admin("SELECT count(*) FROM audit_logs");
  for (const std::string& id : ids) {
    EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + id + "'"), 1) << id;
  }
  for (const std::string& id : replay_events) {
    EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + id +
                    "' AND actor = 'olivia' AND action = 'replay_outbox' AND entity_type ="
                    " 'audit_outbox' AND new_value->>'replayed' = '10'"),
              1)
        << id;
  }
  EXPECT_TRUE(WaitFor([&] { return AllConfirmed(); }, std::chrono::seconds(30)))
      << "the replayed rows are receipted again";
}

TEST_F(RebuildAdminTest, RedriveDeadOutboxPublishesDeadRowsAgainAndRefusesBadRequests) {
  const std::vector<std::string> ids = Mutate(2);
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 4 && AllConfirmed(); },
                      std::chrono::seconds(30)));
  // An event that went DEAD (say Redis refused it for good) and whose cause
  // was fixed; its audit row is gone too (Admin lost it).
  const std::string dead = ids[0];
  ASSERT_TRUE(Db(Service::kAuth)
                  .Execute(pg::Statement{"kill", ("UPDATE audit_outbox SET state = 'DEAD', "
                                                  "last_error = 'refused' WHERE event_id = '" +
                                                  dead + "'")
                                                     .c_str()},
                           {})
                  .ok());
  ASSERT_TRUE(Db(Service::kAdmin)
                  .Execute(pg::Statement{"lose", ("DELETE FROM audit_logs WHERE event_id = '" +
                                                  dead + "'")
                                                     .c_str()},
                           {})
                  .ok());
  ASSERT_TRUE(Db(Service::kAdmin)
                  .Execute(pg::Statement{"lose2", ("DELETE FROM consumer_inbox WHERE event_id = '" +
                                                   dead + "'")
                                                      .c_str()},
                           {})
                  .ok());
  auto ops = opsv1::OutboxOperations::NewStub(mesh_->Channel(Service::kAuth, 0));
  auto call = [&](const opsv1::RedriveDeadOutboxRequest& req, opsv1::RedriveDeadOutboxResponse* resp) {
    grpc::ClientContext ctx;
    As(&ctx, "olivia", {"audit.operator"});
    return ops->RedriveDeadOutbox(&ctx, req, resp);
  };
  opsv1::RedriveDeadOutboxResponse resp;
  {
    opsv1::RedriveDeadOutboxRequest req;  // no ids and no all: never "everything"
    req.set_reason("fixed");
    grpc::Status st = call(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("all: true"), std::string::npos) << st.error_message();
  }
  {
    opsv1::RedriveDeadOutboxRequest req;  // one id is not DEAD: nothing changes
    req.add_event_ids(dead);
    req.add_event_ids(ids[2]);
    req.set_reason("fixed");
    grpc::Status st = call(req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find(ids[2] + " is not a DEAD row"), std::string::npos)
        << st.error_message();
    EXPECT_EQ(QueryInt(Db(Service::kAuth), "SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"),
              1);
  }
  opsv1::RedriveDeadOutboxRequest req;
  req.add_event_ids(dead);
  req.set_reason("Redis ACL fixed");
  grpc::Status st = call(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.redriven(), 1);
  ASSERT_TRUE(WaitFor(
      [&] {
        return Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + dead + "'") == 1 &&
               Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + resp.event_id() +
                     "' AND actor = 'olivia' AND action = 'redrive_dead_outbox' AND"
                     " new_value->'event_ids'->>0 = '" + dead + "'") == 1;
      },
      std::chrono::seconds(30)));
  EXPECT_TRUE(WaitFor([&] { return AllConfirmed(); }, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace ulticode
