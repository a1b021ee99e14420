// Admin's query API over real gRPC against a real PostgreSQL and Redis:
// filters, newest-first keyset pagination (also while rows arrive), page
// tokens, validation, GetAuditLog, and the pipeline status with streams,
// groups, inbox rows and a Redis that is down. audit_logs rows are inserted
// directly: this tests the read side only.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "admin/migrations.h"
#include "admin/query/audit_query_service.h"
#include "common/ids/uuid.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "common/server/bearer_resolver.h"
#include "common/server/error_details.h"
#include "common/server/grpc_server.h"
#include "common/tlog/note.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/audit_rows.h"
#include "tests/support/keys.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"
#include "tools/verify/served_row.h"

namespace ulticode::admin {

namespace query {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;
using ::ulticode::testing::RandomSuffix;

// Far from any real clock, with microseconds, so every bound is exact.
const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000) + absl::Microseconds(123456);

// What the test inserted, to compute the expected answer of each query.
struct Row {
  std::string event_id;
  std::string owner;
  std::string actor;
  std::string action;
  std::string entity_type;
  std::string entity_id;
  absl::Time occurred_at;
};

google::protobuf::Timestamp Ts(absl::Time t) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

// A Duration in (fractional) seconds.
double Seconds(const google::protobuf::Duration& d) {
  return static_cast<double>(TimeUtil::DurationToNanoseconds(d)) / 1e9;
}

google::protobuf::Struct StructFromJson(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

class AdminQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    pg::PoolOptions po;
    po.connect.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "adminquery"));
    auto conn = pg::Connection::Connect(po.connect);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, Migrations()).ok());
    pool_ = std::make_unique<pg::Pool>(po);
    redis_.host = redis.host;
    redis_.port = redis.port;
    redis_.user = redis.user;
    redis_.password = redis.password;
    const std::string sfx = RandomSuffix();
    auth_stream_ = "test:audit:auth:" + sfx;
    app_stream_ = "test:audit:app:" + sfx;
    options_.streams = {{audit::v1::OWNER_AUTH, auth_stream_}, {audit::v1::OWNER_APP, app_stream_}};
    options_.redis = redis_;
    metrics_ = metrics::Metrics::Unexposed("test");
    Serve(options_);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // (Re)starts the service under test with `options`.
  void Serve(const QueryServiceOptions& options) {
    if (server_) server_->Shutdown(absl::Seconds(1));
    if (!watches_)
      watches_ = std::make_unique<watch::WatchHub>(watch::WatchOptions{}, metrics_->registry());
    service_ = std::make_unique<AuditQueryService>(*pool_, authorizer_, *watches_,
                                                   metrics_->registry(), options);
    server_ = std::make_unique<server::GrpcServer>(
        server::PlaintextOptions("127.0.0.1:0", 8, server::kAdminMaxReceiveBytes),
        metrics_->registry());
    server_->AddService(service_.get(), "ulticode.admin.v1.AdminService");
    ASSERT_TRUE(server_->Start().ok());
    stub_ = v1::AdminService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
  }

  // A call as an auditor holding every role.
  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", ::ulticode::testing::SharedTestTokens().Bearer("auditor"));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  void Exec(const std::string& sql, const pg::Params& params = {}) {
    pg::Statement st{"test.exec", sql.c_str()};
    auto r = conn_->Execute(st, params);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }

  // An event as an owner would sign it.
  static audit::AuditEvent Event(const std::string& owner, const std::string& actor,
                                 const std::string& action, const std::string& entity_type,
                                 const std::string& entity_id, absl::Time at,
                                 const std::string& event_id = ids::NewUuidV7()) {
    audit::AuditEvent e = audit::NewEvent(audit::OwnerFromName(owner), owner + "." + action,
                                          {actor, "", "", "", ""}, at);
    e.set_event_id(event_id);
    auto* r = e.mutable_record();
    r->set_audit_id(event_id);
    r->set_subject(entity_id);
    r->set_action(action);
    r->set_entity_type(entity_type);
    r->set_entity_id(entity_id);
    return e;
  }

  // Writes `e` as the inbox does (Admin's writer, signed by its owner) and
  // remembers it.
  std::string AddEvent(const audit::AuditEvent& e) {
    ::ulticode::testing::WriteAuditRows(*conn_, {e});
    const auto& r = e.record();
    rows_.push_back({e.event_id(), audit::OwnerName(e.owner()), r.actor(), r.action(),
                     r.entity_type(), r.entity_id(),
                     absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(e.occurred_at()))});
    return e.event_id();
  }

  std::string Add(const std::string& owner, const std::string& actor, const std::string& action,
                  const std::string& entity_type, const std::string& entity_id, absl::Time at,
                  const std::string& event_id = ids::NewUuidV7()) {
    return AddEvent(Event(owner, actor, action, entity_type, entity_id, at, event_id));
  }

  // Ids of the remembered rows matching `keep`, newest first.
  std::vector<std::string> Expected(const std::function<bool(const Row&)>& keep) const {
    std::vector<Row> rows;
    for (const Row& r : rows_) {
      if (keep(r)) rows.push_back(r);
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      if (a.occurred_at != b.occurred_at) return a.occurred_at > b.occurred_at;
      return a.event_id > b.event_id;  // lowercase hex: byte order = uuid order
    });
    std::vector<std::string> ids;
    for (const Row& r : rows) ids.push_back(r.event_id);
    return ids;
  }

  grpc::Status Query(const v1::QueryAuditLogsRequest& req, v1::QueryAuditLogsResponse* resp) {
    auto ctx = Ctx();
    return stub_->QueryAuditLogs(ctx.get(), req, resp);
  }

  // Every page of `req`, in order; fails the test on any error.
  std::vector<std::string> AllPages(v1::QueryAuditLogsRequest req, int* pages = nullptr) {
    std::vector<std::string> ids;
    for (int page = 1; page <= 1000; ++page) {
      v1::QueryAuditLogsResponse resp;
      grpc::Status s = Query(req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) break;
      for (const auto& log : resp.audit_logs()) ids.push_back(log.event_id());
      if (pages != nullptr) *pages = page;
      if (resp.next_page_token().empty()) break;
      EXPECT_EQ(resp.audit_logs_size(), req.page_size() == 0 ? 100 : req.page_size());
      req.set_page_token(resp.next_page_token());
    }
    return ids;
  }

  // Expects INVALID_ARGUMENT whose message mentions every one of `words`
  // and whose BadRequest names `field` (a field path of the request).
  void ExpectInvalid(const v1::QueryAuditLogsRequest& req, const std::string& field,
                     std::vector<std::string> words) {
    v1::QueryAuditLogsResponse resp;
    grpc::Status s = Query(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << req.ShortDebugString() << " -> " << s.error_message();
    for (const auto& w : words) {
      EXPECT_NE(s.error_message().find(w), std::string::npos)
          << "\"" << s.error_message() << "\" does not mention " << w;
    }
    EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), field)
        << req.ShortDebugString() << " -> " << s.error_message();
  }

  // A varied data set: two owners, three actors, several entities, ties on
  // occurred_at (broken by event_id).
  void AddVariedRows() {
    const char* owners[] = {"auth", "app"};
    const char* actors[] = {"alice", "bob", "carol"};
    const char* actions[] = {"create_user", "assign_role", "update_problem", "publish_contest"};
    const char* types[] = {"user", "problem"};
    for (int i = 0; i < 30; ++i) {
      // Every third row shares its time with the previous one.
      const absl::Time at = kT0 - absl::Seconds(i - (i % 3 == 2 ? 1 : 0));
      Add(owners[i % 2], actors[i % 3], actions[i % 4], types[(i / 2) % 2],
          absl::StrCat("e", i % 5), at);
    }
  }

  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<pg::Pool> pool_;
  redis::Options redis_;
  std::string auth_stream_;
  std::string app_stream_;
  QueryServiceOptions options_;
  std::unique_ptr<metrics::Metrics> metrics_;
  const server::BearerTokenResolver resolver_{
      ::ulticode::testing::SharedTestTokens().jwks(),
      jwt::VerifyOptions{::ulticode::testing::kTestIssuer, ::ulticode::testing::kTestAudience}};
  const server::Authorizer authorizer_{resolver_, AccessRules()};
  std::unique_ptr<watch::WatchHub> watches_;  // not started: these tests do not watch
  std::unique_ptr<AuditQueryService> service_;
  std::unique_ptr<server::GrpcServer> server_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
  std::vector<Row> rows_;
};

TEST_F(AdminQueryTest, NoFilterReturnsEverythingNewestFirstWithTiesByEventId) {
  AddVariedRows();
  v1::QueryAuditLogsRequest req;
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(Query(req, &resp).ok());
  std::vector<std::string> got;
  for (const auto& log : resp.audit_logs()) got.push_back(log.event_id());
  EXPECT_EQ(got, Expected([](const Row&) { return true; }));
  EXPECT_TRUE(resp.next_page_token().empty());
  for (int i = 1; i < resp.audit_logs_size(); ++i) {
    EXPECT_GE(TimeUtil::TimestampToMicroseconds(resp.audit_logs(i - 1).occurred_at()),
              TimeUtil::TimestampToMicroseconds(resp.audit_logs(i).occurred_at()));
  }
}

TEST_F(AdminQueryTest, EachFilterAloneAndCombined) {
  AddVariedRows();
  struct Case {
    std::string name;
    std::function<void(v1::QueryAuditLogsRequest*)> set;
    std::function<bool(const Row&)> keep;
  };
  const absl::Time from = kT0 - absl::Seconds(20);
  const absl::Time to = kT0 - absl::Seconds(5);
  const std::vector<Case> cases = {
      {"owner", [](auto* r) { r->mutable_filter()->set_owner(audit::v1::OWNER_APP); },
       [](const Row& r) { return r.owner == "app"; }},
      {"actor", [](auto* r) { r->mutable_filter()->set_actor("bob"); },
       [](const Row& r) { return r.actor == "bob"; }},
      {"action", [](auto* r) { r->mutable_filter()->set_action("assign_role"); },
       [](const Row& r) { return r.action == "assign_role"; }},
      {"entity_type", [](auto* r) { r->mutable_filter()->set_entity_type("problem"); },
       [](const Row& r) { return r.entity_type == "problem"; }},
      {"entity",
       [](auto* r) {
         r->mutable_filter()->set_entity_type("user");
         r->mutable_filter()->set_entity_id("e2");
       },
       [](const Row& r) { return r.entity_type == "user" && r.entity_id == "e2"; }},
      {"start_time", [&](auto* r) { *r->mutable_filter()->mutable_start_time() = Ts(from); },
       [&](const Row& r) { return r.occurred_at >= from; }},
      {"end_time", [&](auto* r) { *r->mutable_filter()->mutable_end_time() = Ts(to); },
       [&](const Row& r) { return r.occurred_at < to; }},
      {"start_time+end_time",
       [&](auto* r) {
         *r->mutable_filter()->mutable_start_time() = Ts(from);
         *r->mutable_filter()->mutable_end_time() = Ts(to);
       },
       [&](const Row& r) { return r.occurred_at >= from && r.occurred_at < to; }},
      {"owner+actor",
       [](auto* r) {
         r->mutable_filter()->set_owner(audit::v1::OWNER_AUTH);
         r->mutable_filter()->set_actor("alice");
       },
       [](const Row& r) { return r.owner == "auth" && r.actor == "alice"; }},
      {"all",
       [&](auto* r) {
         r->mutable_filter()->set_owner(audit::v1::OWNER_AUTH);
         r->mutable_filter()->set_actor("carol");
         r->mutable_filter()->set_action("update_problem");
         r->mutable_filter()->set_entity_type("problem");
         *r->mutable_filter()->mutable_start_time() = Ts(from);
         *r->mutable_filter()->mutable_end_time() = Ts(kT0);
       },
       [&](const Row& r) {
         return r.owner == "auth" && r.actor == "carol" && r.action == "update_problem" &&
                r.entity_type == "problem" && r.occurred_at >= from && r.occurred_at < kT0;
       }},
      {"nothing matches", [](auto* r) { r->mutable_filter()->set_actor("nobody"); },
       [](const Row&) { return false; }},
  };
  for (const Case& c : cases) {
    v1::QueryAuditLogsRequest req;
    c.set(&req);
    const std::vector<std::string> want = Expected(c.keep);
    EXPECT_EQ(AllPages(req), want) << c.name;
    // And paged in small pages, the same rows in the same order.
    req.set_page_size(2);
    EXPECT_EQ(AllPages(req), want) << c.name << " (pages of 2)";
  }
  // The data set is varied enough that these cases actually filter.
  EXPECT_EQ(Expected([](const Row& r) { return r.owner == "app"; }).size(), 15u);
  EXPECT_GT(Expected([&](const Row& r) { return r.occurred_at >= from; }).size(), 0u);
  // "all": three rows match everything but the time range, which drops one.
  EXPECT_EQ(Expected([&](const Row& r) {
              return r.owner == "auth" && r.actor == "carol" && r.action == "update_problem" &&
                     r.entity_type == "problem";
            }).size(),
            3u);
}

TEST_F(AdminQueryTest, TimeBoundsAreExactToTheMicrosecond) {
  const std::string at = Add("auth", "alice", "create_user", "user", "u1", kT0);
  Add("auth", "alice", "create_user", "user", "u2", kT0 - absl::Microseconds(1));
  Add("auth", "alice", "create_user", "user", "u3", kT0 + absl::Microseconds(1));
  auto ids = [&](absl::Time from, absl::Time to) {
    v1::QueryAuditLogsRequest req;
    *req.mutable_filter()->mutable_start_time() = Ts(from);
    *req.mutable_filter()->mutable_end_time() = Ts(to);
    return AllPages(req);
  };
  // start_time inclusive, end_time exclusive.
  EXPECT_EQ(ids(kT0, kT0 + absl::Microseconds(1)), std::vector<std::string>{at});
  // Sub-microsecond bounds select what the nanosecond bound says.
  EXPECT_EQ(ids(kT0 - absl::Nanoseconds(1), kT0 + absl::Nanoseconds(1)),
            std::vector<std::string>{at});
  EXPECT_TRUE(ids(kT0 + absl::Nanoseconds(1), kT0 + absl::Nanoseconds(999)).empty());
}

TEST_F(AdminQueryTest, PaginationCollectsEveryRowExactlyOnce) {
  for (int i = 0; i < 23; ++i) {
    // Many ties: only 6 distinct times.
    Add("auth", "alice", "create_user", "user", absl::StrCat("u", i), kT0 - absl::Seconds(i % 6));
  }
  v1::QueryAuditLogsRequest req;
  req.set_page_size(5);
  int pages = 0;
  const std::vector<std::string> got = AllPages(req, &pages);
  EXPECT_EQ(pages, 5);  // 5+5+5+5+3
  EXPECT_EQ(got, Expected([](const Row&) { return true; }));
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()).size(), 23u);

  // An exact multiple: the last full page has no token (page_size + 1 probe).
  req.set_page_size(23);
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(Query(req, &resp).ok());
  EXPECT_EQ(resp.audit_logs_size(), 23);
  EXPECT_TRUE(resp.next_page_token().empty());
  req.set_page_size(22);
  ASSERT_TRUE(Query(req, &resp).ok());
  EXPECT_FALSE(resp.next_page_token().empty());

  // The page size may change between pages; the filters may not.
  v1::QueryAuditLogsRequest next;
  next.set_page_size(1000);
  next.set_page_token(resp.next_page_token());
  v1::QueryAuditLogsResponse last;
  ASSERT_TRUE(Query(next, &last).ok());
  ASSERT_EQ(last.audit_logs_size(), 1);
  EXPECT_EQ(last.audit_logs(0).event_id(), got.back());
}

// A page stops at its byte budget (3 MiB), whatever page_size asks: 40 rows
// of ~400 KB each (a large value in both old_value and new_value) come in
// pages that any gRPC client accepts (under 4 MiB), each with a next-page token, and the
// pages together hold every row exactly once.
TEST_F(AdminQueryTest, PagesStopAtTheirByteBudget) {
  const std::string big = std::string(200 * 1000, 'x');
  for (int i = 0; i < 40; ++i) {
    audit::AuditEvent e = Event("app", "alice", "update_problem", "problem", absl::StrCat("p", i),
                                kT0 - absl::Seconds(i));
    (*e.mutable_record()->mutable_old_value()->mutable_fields())["statement"].set_string_value(big);
    (*e.mutable_record()->mutable_new_value()->mutable_fields())["statement"].set_string_value(big +
                                                                                               "y");
    AddEvent(e);
  }
  v1::QueryAuditLogsRequest req;
  req.set_page_size(1000);
  std::vector<std::string> got;
  int pages = 0;
  for (; pages < 100; ++pages) {
    v1::QueryAuditLogsResponse resp;
    auto ctx = Ctx();
    grpc::Status s = stub_->QueryAuditLogs(ctx.get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
    EXPECT_LE(resp.ByteSizeLong(), 4u << 20) << "page " << pages;  // what clients accept
    for (const auto& log : resp.audit_logs()) {
      EXPECT_EQ(log.new_value().fields().at("statement").string_value().size(), big.size() + 1);
      got.push_back(log.event_id());
    }
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_GE(pages, 3);  // 40 x ~400 KB = ~16 MB
  EXPECT_EQ(got, Expected([](const Row&) { return true; }));
}

// A filter no index serves walks the table until the statement timeout,
// holding a pooled connection all along: it is refused before it runs, by
// the planner's estimate at the table's current size, naming what to add.
// Every filter has its index today (entity_id only with entity_type), so the
// index on action is dropped here to make one. (Before: every query ran.)
TEST_F(AdminQueryTest, FiltersNoIndexServesAtThisSizeAreRefusedBeforeTheyRun) {
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < 5000; ++i) {
    events.push_back(Event(i % 2 ? "auth" : "app", absl::StrCat("actor", i % 50), "update",
                           absl::StrCat("type", i % 7), absl::StrCat("entity", i),
                           kT0 - absl::Seconds(i)));
  }
  ::ulticode::testing::WriteAuditRows(*conn_, events);
  Exec("DROP INDEX audit_logs_action");
  Exec("ANALYZE audit_logs");
  // Here the served question is planned at 24 (one entity's rows), the
  // other at 317 (the whole table, then a sort).
  QueryServiceOptions options = options_;
  options.max_cost = 100;
  Serve(options);

  v1::QueryAuditLogsRequest served;
  served.mutable_filter()->set_entity_type("type3");
  served.mutable_filter()->set_entity_id("entity3");
  served.mutable_filter()->set_action("no-such-action");
  v1::QueryAuditLogsRequest unserved;
  unserved.mutable_filter()->set_action("no-such-action");
  v1::QueryAuditLogsResponse resp;
  grpc::Status s = stub_->QueryAuditLogs(Ctx().get(), served, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = stub_->QueryAuditLogs(Ctx().get(), unserved, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("no index serves this combination"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("--query-max-cost 100"), std::string::npos) << s.error_message();
  EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), "filter") << s.error_message();
}

// Filters that combine rare values (an actor's rows, almost none with this
// action) would walk all of the actor's rows for one page: a page walks at
// most max_scan_rows of them and ends with its token, and following the
// tokens still collects every match exactly once, in order. (Before: the
// walk went on until page_size matches or the table's end.)
TEST_F(AdminQueryTest, CombinedFiltersWalkABoundedStretchAPageAndStillFindEveryRow) {
  std::vector<audit::AuditEvent> events;
  std::vector<std::string> rare;
  for (int i = 0; i < 500; ++i) {
    const bool match = i == 50 || i == 250 || i == 251 || i == 450;
    events.push_back(Event("app", "walker", match ? "rare" : "common", "problem",
                           absl::StrCat("p", i), kT0 - absl::Seconds(i)));
    if (match) rare.push_back(events.back().event_id());
  }
  ::ulticode::testing::WriteAuditRows(*conn_, events);
  QueryServiceOptions options = options_;
  options.max_scan_rows = 100;
  Serve(options);

  v1::QueryAuditLogsRequest req;
  req.mutable_filter()->set_actor("walker");
  req.mutable_filter()->set_action("rare");
  req.set_page_size(10);
  std::vector<std::string> got;
  int pages = 0;
  for (; pages < 50; ++pages) {
    v1::QueryAuditLogsResponse resp;
    grpc::Status s = stub_->QueryAuditLogs(Ctx().get(), req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(resp.audit_logs_size(), 2) << "page " << pages << " read past its stretch";
    for (const auto& log : resp.audit_logs()) got.push_back(log.event_id());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ(got, rare);
  EXPECT_GE(pages, 4) << "500 rows, 100 a page";
  EXPECT_LE(pages, 6);

  // One filter alone walks only matching rows: no stretch, full pages.
  v1::QueryAuditLogsRequest one;
  one.mutable_filter()->set_actor("walker");
  one.set_page_size(200);
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(stub_->QueryAuditLogs(Ctx().get(), one, &resp).ok());
  EXPECT_EQ(resp.audit_logs_size(), 200);
}

TEST_F(AdminQueryTest, PaginationWhileNewRowsArriveNeverRepeatsOrSkipsExistingRows) {
  for (int i = 0; i < 20; ++i) {
    Add("auth", "alice", "create_user", "user", absl::StrCat("u", i), kT0 - absl::Seconds(i / 2));
  }
  const std::vector<std::string> existing = Expected([](const Row&) { return true; });
  std::set<std::string> newer;  // sort before the cursor: must never show up
  std::set<std::string> older;  // sort after the cursor: show up once

  v1::QueryAuditLogsRequest req;
  req.set_page_size(4);
  std::vector<std::string> got;
  for (int page = 0; page < 100; ++page) {
    v1::QueryAuditLogsResponse resp;
    grpc::Status s = Query(req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    for (const auto& log : resp.audit_logs()) got.push_back(log.event_id());
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
    const absl::Time cursor_at = absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(
        resp.audit_logs(resp.audit_logs_size() - 1).occurred_at()));
    // Between pages: a newer row, an older one, and two at the cursor's own
    // time, one with a larger id (before the cursor) and one with a smaller.
    newer.insert(
        Add("auth", "bob", "create_user", "user", "n", kT0 + absl::Hours(1) + absl::Seconds(page)));
    older.insert(
        Add("auth", "bob", "create_user", "user", "o", kT0 - absl::Hours(1) - absl::Seconds(page)));
    // (Hand-made ids: NewUuidV7At never goes below the last id it issued.)
    const std::string n = absl::StrFormat("%012d", page);
    newer.insert(Add("auth", "bob", "create_user", "user", "tie-larger", cursor_at,
                     "ffffffff-ffff-7fff-bfff-" + n));
    older.insert(Add("auth", "bob", "create_user", "user", "tie-smaller", cursor_at,
                     "00000000-0000-7000-8000-" + n));
  }
  std::map<std::string, int> seen;
  for (const auto& id : got) ++seen[id];
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " returned " << n << " times";
  for (const auto& id : existing) EXPECT_EQ(seen.count(id), 1u) << "skipped " << id;
  for (const auto& id : newer) EXPECT_EQ(seen.count(id), 0u) << "newer row " << id << " leaked";
  for (const auto& id : older) EXPECT_EQ(seen.count(id), 1u) << "older row " << id << " missed";
  EXPECT_FALSE(newer.empty());
  // Still newest first as a whole.
  std::vector<std::string> order = got;
  std::vector<std::string> sorted = Expected([&](const Row& r) { return seen.count(r.event_id); });
  EXPECT_EQ(order, sorted);
}

TEST_F(AdminQueryTest, PageTokensAreBoundToTheirFilters) {
  for (int i = 0; i < 5; ++i) {
    Add("auth", "alice", "create_user", "user", "u", kT0 - absl::Seconds(i));
  }
  v1::QueryAuditLogsRequest req;
  req.mutable_filter()->set_actor("alice");
  req.set_page_size(2);
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(Query(req, &resp).ok());
  ASSERT_FALSE(resp.next_page_token().empty());

  v1::QueryAuditLogsRequest other = req;
  other.set_page_token(resp.next_page_token());
  other.mutable_filter()->set_actor("bob");
  ExpectInvalid(other, "page_token", {"page_token", "different filter"});
  other.mutable_filter()->set_actor("alice");
  other.mutable_filter()->set_owner(audit::v1::OWNER_AUTH);
  ExpectInvalid(other, "page_token", {"page_token", "different filter"});
  other.mutable_filter()->clear_owner();
  *other.mutable_filter()->mutable_start_time() = Ts(kT0 - absl::Hours(1));
  ExpectInvalid(other, "page_token", {"page_token", "different filter"});

  other = req;
  other.set_page_token("definitely-not-a-token");
  ExpectInvalid(other, "page_token", {"page_token", "malformed"});
  std::string tampered = resp.next_page_token();
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  other.set_page_token(tampered);
  ExpectInvalid(other, "page_token", {"page_token", "malformed"});
  other.set_page_token(resp.next_page_token().substr(0, 10));
  ExpectInvalid(other, "page_token", {"page_token", "malformed"});
}

TEST_F(AdminQueryTest, InvalidRequestsNameTheField) {
  v1::QueryAuditLogsRequest req;
  req.set_page_size(-1);
  ExpectInvalid(req, "page_size", {"page_size", "1000"});
  req.set_page_size(1001);
  ExpectInvalid(req, "page_size", {"page_size", "1000"});

  req = {};
  req.mutable_filter()->set_owner(static_cast<audit::v1::Owner>(7));
  ExpectInvalid(req, "filter.owner", {"filter.owner"});

  req = {};
  req.mutable_filter()->set_entity_id("u1");
  ExpectInvalid(req, "filter.entity_id", {"filter.entity_id", "filter.entity_type"});

  req = {};
  *req.mutable_filter()->mutable_start_time() = Ts(kT0);
  *req.mutable_filter()->mutable_end_time() = Ts(kT0);
  ExpectInvalid(req, "filter.start_time", {"filter.start_time", "end_time"});
  *req.mutable_filter()->mutable_end_time() = Ts(kT0 - absl::Seconds(1));
  ExpectInvalid(req, "filter.start_time", {"filter.start_time", "end_time"});

  req = {};
  req.mutable_filter()->mutable_start_time()->set_nanos(-1);
  ExpectInvalid(req, "filter.start_time", {"filter.start_time"});
  req = {};
  req.mutable_filter()->mutable_end_time()->set_seconds(400'000'000'000);
  ExpectInvalid(req, "filter.end_time", {"filter.end_time"});

  for (const char* field : {"actor", "action", "entity_type"}) {
    req = {};
    const std::string long_value(257, 'x');
    if (std::string(field) == "actor") req.mutable_filter()->set_actor(long_value);
    if (std::string(field) == "action") req.mutable_filter()->set_action(long_value);
    if (std::string(field) == "entity_type") req.mutable_filter()->set_entity_type(long_value);
    ExpectInvalid(req, absl::StrCat("filter.", field), {absl::StrCat("filter.", field), "256"});
  }
  req = {};
  req.mutable_filter()->set_entity_type("user");
  req.mutable_filter()->set_entity_id(std::string(257, 'x'));
  ExpectInvalid(req, "filter.entity_id", {"filter.entity_id", "256"});
  req = {};
  req.mutable_filter()->set_actor(std::string("a\0b", 3));
  ExpectInvalid(req, "filter.actor", {"filter.actor"});

  // Limits are accepted.
  req = {};
  req.set_page_size(1000);
  req.mutable_filter()->set_actor(std::string(256, 'x'));
  v1::QueryAuditLogsResponse resp;
  EXPECT_TRUE(Query(req, &resp).ok());
}

TEST_F(AdminQueryTest, GetAuditLogMapsEveryFieldAndStructuredValues) {
  google::protobuf::Struct old_value =
      StructFromJson(R"({"roles":["judge"],"authz_version":3,"mfa":false,"nested":{"a":"b"}})");
  google::protobuf::Struct new_value =
      StructFromJson(R"({"roles":["judge","admin"],"authz_version":4,"note":null})");
  const std::string id = ids::NewUuidV7();
  audit::AuditEvent e =
      audit::NewEvent(audit::v1::OWNER_AUTH, "auth.role.assigned",
                      {"alice", "10.0.0.1", "grpcurl/1.8", "req-1", "trace-1"}, kT0);
  e.set_event_id(id);
  auto* rec = e.mutable_record();
  rec->set_audit_id(id);
  rec->set_subject("subj");
  rec->set_action("assign_role");
  rec->set_entity_type("user_role");
  rec->set_entity_id("u1/admin");
  *rec->mutable_old_value() = old_value;
  *rec->mutable_new_value() = new_value;
  AddEvent(e);
  Exec("UPDATE audit_logs SET ingested_at = $2::timestamptz WHERE event_id = $1::uuid",
       {pg::Text(id), pg::Time(kT0 + absl::Milliseconds(1500))});

  v1::GetAuditLogRequest req;
  req.set_event_id(id);
  v1::AuditLog log;
  auto ctx = Ctx();
  grpc::Status s = stub_->GetAuditLog(ctx.get(), req, &log);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(log.event_id(), id);
  EXPECT_EQ(log.owner(), audit::v1::OWNER_AUTH);
  EXPECT_EQ(log.event_type(), "auth.role.assigned");
  EXPECT_EQ(log.actor(), "alice");
  EXPECT_EQ(log.subject(), "subj");
  EXPECT_EQ(log.action(), "assign_role");
  EXPECT_EQ(log.entity_type(), "user_role");
  EXPECT_EQ(log.entity_id(), "u1/admin");
  EXPECT_EQ(log.client_ip(), "10.0.0.1");
  EXPECT_EQ(log.user_agent(), "grpcurl/1.8");
  EXPECT_EQ(log.request_id(), "req-1");
  EXPECT_EQ(log.trace_id(), "trace-1");
  EXPECT_EQ(TimeUtil::TimestampToMicroseconds(log.occurred_at()), absl::ToUnixMicros(kT0));
  EXPECT_EQ(TimeUtil::TimestampToMicroseconds(log.ingested_at()),
            absl::ToUnixMicros(kT0 + absl::Milliseconds(1500)));
  // Structured, not strings: compare field by field.
  ASSERT_TRUE(log.has_old_value());
  ASSERT_TRUE(log.has_new_value());
  EXPECT_TRUE(MessageDifferencer::Equals(log.old_value(), old_value))
      << log.old_value().ShortDebugString();
  EXPECT_TRUE(MessageDifferencer::Equals(log.new_value(), new_value))
      << log.new_value().ShortDebugString();
  const auto& roles = log.new_value().fields().at("roles").list_value();
  ASSERT_EQ(roles.values_size(), 2);
  EXPECT_EQ(roles.values(1).string_value(), "admin");
  EXPECT_EQ(log.new_value().fields().at("authz_version").number_value(), 4);
  EXPECT_TRUE(log.new_value().fields().at("note").has_null_value());
  EXPECT_EQ(log.old_value().fields().at("nested").struct_value().fields().at("a").string_value(),
            "b");

  // The same mapping through QueryAuditLogs; NULL values are absent.
  const std::string bare =
      Add("app", "bob", "create_problem", "problem", "p1", kT0 - absl::Hours(1));
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(Query(v1::QueryAuditLogsRequest(), &resp).ok());
  ASSERT_EQ(resp.audit_logs_size(), 2);
  EXPECT_TRUE(MessageDifferencer::Equals(resp.audit_logs(0), log))
      << resp.audit_logs(0).ShortDebugString();
  EXPECT_EQ(resp.audit_logs(1).event_id(), bare);
  EXPECT_EQ(resp.audit_logs(1).owner(), audit::v1::OWNER_APP);
  EXPECT_FALSE(resp.audit_logs(1).has_old_value());
  EXPECT_FALSE(resp.audit_logs(1).has_new_value());
}

// Reads serve the owner's signed envelope, bound to the log: a row changed in
// Admin's database after it was written (any column a filter or a client
// reads, the envelope itself once sequenced) fails the read with DATA_LOSS
// naming the event, in QueryAuditLogs and GetAuditLog alike.
TEST_F(AdminQueryTest, RowsThatDisagreeWithTheirEnvelopeOrLeafAreNeverServed) {
  audit::AuditEvent e = Event("auth", "alice", "assign_role", "user", "u1", kT0);
  (*e.mutable_record()->mutable_new_value()->mutable_fields())["role"].set_string_value("judge");
  const std::string id = AddEvent(e);
  Add("app", "bob", "create_problem", "problem", "p1", kT0 - absl::Hours(1));

  v1::GetAuditLogRequest get;
  get.set_event_id(id);
  auto expect_served = [&](v1::AuditLog::LogStatus status) {
    v1::AuditLog log;
    auto ctx = Ctx();
    grpc::Status st = stub_->GetAuditLog(ctx.get(), get, &log);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(log.actor(), "alice");
    EXPECT_EQ(log.log_status(), status);
    EXPECT_EQ(log.has_log_index(), status == v1::AuditLog::LOG_STATUS_LOGGED);
  };
  auto expect_refused = [&](const std::string& what, const std::string& filter_actor) {
    v1::AuditLog log;
    auto ctx = Ctx();
    grpc::Status st = stub_->GetAuditLog(ctx.get(), get, &log);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << what << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(id), std::string::npos) << st.error_message();
    for (const std::string& actor : {std::string(), filter_actor}) {
      v1::QueryAuditLogsRequest req;
      req.mutable_filter()->set_actor(actor);
      v1::QueryAuditLogsResponse resp;
      st = Query(req, &resp);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS)
          << what << " (actor filter '" << actor << "'): " << st.error_message();
      EXPECT_NE(st.error_message().find(id), std::string::npos) << st.error_message();
      EXPECT_EQ(resp.audit_logs_size(), 0);
    }
  };
  expect_served(v1::AuditLog::LOG_STATUS_PENDING);

  // Every column a read returns or a filter uses, changed one at a time.
  const std::pair<const char*, const char*> changes[] = {
      {"owner", "'app'"},
      {"event_type", "'auth.user.deleted'"},
      {"actor", "'mallory'"},
      {"subject", "'someone'"},
      {"action", "'delete_user'"},
      {"entity_type", "'problem'"},
      {"entity_id", "'u2'"},
      {"old_value", "'{\"role\": \"admin\"}'::jsonb"},
      {"new_value", "'{\"role\": \"admin\"}'::jsonb"},
      {"new_value", "NULL"},
      {"client_ip", "'10.9.9.9'"},
      {"user_agent", "'evil'"},
      {"request_id", "'r-2'"},
      {"trace_id", "'t-2'"},
      {"occurred_at", "occurred_at - interval '1 second'"},
  };
  for (int sequenced = 0; sequenced < 2; ++sequenced) {
    for (const auto& [column, value] : changes) {
      const std::string what = absl::StrCat(column, " = ", value);
      Exec(absl::StrCat("UPDATE audit_logs SET ", column, " = ", value,
                        " WHERE event_id = $1::uuid"),
           {pg::Text(id)});
      expect_refused(what, std::string(column) == "actor" ? "mallory" : "alice");
      // Put the row back as the writer stored it (its queue entry, or its
      // leaf, stays).
      Exec("DELETE FROM audit_logs WHERE event_id = $1::uuid", {pg::Text(id)});
      ::ulticode::testing::WriteAuditRows(*conn_, {e});
      expect_served(sequenced ? v1::AuditLog::LOG_STATUS_LOGGED : v1::AuditLog::LOG_STATUS_PENDING);
    }
    if (!sequenced) {
      ASSERT_EQ(::ulticode::testing::SequenceAll(*conn_), 2);
      expect_served(v1::AuditLog::LOG_STATUS_LOGGED);
    }
  }

  // Once sequenced, the envelope itself is bound: another event signed by
  // the same owner, written under this row's id with matching columns, is
  // not the log's leaf.
  audit::AuditEvent other = e;
  other.mutable_record()->set_actor("mallory");
  const crypto::SigningKey& key = ::ulticode::testing::SharedTestKeys().owner("auth");
  const std::string envelope = audit::Serialize(other);
  Exec(
      "UPDATE audit_logs SET actor = 'mallory', envelope = $2, seal = $3"
      " WHERE event_id = $1::uuid",
      {pg::Text(id), pg::Bytes(envelope),
       pg::Bytes(seal::SealBundle(key, {absl::string_view(envelope)}).value()[0])});
  expect_refused("a re-sealed envelope", "mallory");
}

// The PROVEN view: one checkpoint, and each row inside it with its log entry and
// inclusion proof, which a client checks with public keys only; a row not
// yet inside the checkpoint carries none.
TEST_F(AdminQueryTest, WithProofsRowsInsideTheCheckpointCarryWhatBindsThemToIt) {
  for (int i = 0; i < 5; ++i) {
    Add("auth", "alice", "create_user", "user", absl::StrCat("u", i), kT0 - absl::Seconds(i));
  }
  const auto& keys = ::ulticode::testing::SharedTestKeys();
  auto signer = tlog::NoteSigner::Create(keys.kLogOrigin, keys.log());
  ASSERT_TRUE(signer.ok());
  ASSERT_EQ(::ulticode::testing::SequenceAll(*conn_, &*signer), 5);
  Add("app", "bob", "create_problem", "problem", "p1", kT0 + absl::Seconds(1));  // pending

  v1::QueryAuditLogsRequest req;
  req.set_view(v1::AUDIT_LOG_VIEW_PROVEN);
  v1::QueryAuditLogsResponse resp;
  ASSERT_TRUE(Query(req, &resp).ok());
  ASSERT_EQ(resp.audit_logs_size(), 6);
  verify::CheckpointPolicy policy;
  policy.log.push_back(*tlog::NoteVerifier::Parse(keys.LogVerifierKey()));
  auto checkpoint = verify::OpenWitnessed(resp.checkpoint(), policy);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->size, 5u);
  EXPECT_FALSE(resp.audit_logs(0).has_proof()) << "the newest row is not sequenced yet";
  EXPECT_EQ(resp.audit_logs(0).log_status(), v1::AuditLog::LOG_STATUS_PENDING);
  for (int i = 1; i < 6; ++i) {
    const v1::AuditLog& log = resp.audit_logs(i);
    ASSERT_TRUE(log.has_proof()) << i;
    EXPECT_TRUE(verify::CheckRowIsLeaf(log, log.proof().leaf(), &keys.directory()).ok()) << i;
    EXPECT_TRUE(verify::CheckInclusion(log.log_index(), log.proof().leaf(), log.proof().hashes(),
                                       *checkpoint)
                    .ok())
        << i;
    // What the client would catch: a field that is not the leaf's, a leaf
    // at another index.
    v1::AuditLog changed = log;
    changed.set_actor("mallory");
    EXPECT_TRUE(absl::IsDataLoss(verify::CheckRowIsLeaf(changed, log.proof().leaf()))) << i;
    EXPECT_FALSE(verify::CheckInclusion((log.log_index() + 1) % 5, log.proof().leaf(),
                                        log.proof().hashes(), *checkpoint)
                     .ok())
        << i;
  }
  // In the default (BASIC) view, nothing extra.
  ASSERT_TRUE(Query(v1::QueryAuditLogsRequest(), &resp).ok());
  EXPECT_FALSE(resp.has_checkpoint());
  EXPECT_FALSE(resp.audit_logs(1).has_proof());
}

TEST_F(AdminQueryTest, GetAuditLogNotFoundAndBadId) {
  v1::GetAuditLogRequest req;
  v1::AuditLog log;
  req.set_event_id(ids::NewUuidV7());
  auto ctx = Ctx();
  grpc::Status s = stub_->GetAuditLog(ctx.get(), req, &log);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_NE(s.error_message().find(req.event_id()), std::string::npos);

  for (const char* bad : {"", "not-a-uuid", "0190f3a1-7c2e-7abc-8def-0123456789a",
                          "0190f3a1-7c2e-7abc-8def-0123456789abc'; DROP TABLE audit_logs; --"}) {
    req.set_event_id(bad);
    ctx = Ctx();
    s = stub_->GetAuditLog(ctx.get(), req, &log);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("event_id"), std::string::npos) << s.error_message();
    EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), "event_id") << s.error_message();
  }
}

TEST_F(AdminQueryTest, PipelineStatusReportsStreamsGroupsInboxAndPoison) {
  // auth: 5 entries, the group read one of them and did not acknowledge it.
  redis::Client client(redis_);
  std::vector<redis::StreamFields> entries(5, redis::StreamFields{{"event_id", "x"}});
  auto added = client.XAddBatch(auth_stream_, entries);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_TRUE(client.XGroupCreate(auth_stream_, options_.group, "0", false).ok());
  auto read = client.XReadGroup(options_.group, "c1", {auth_stream_}, 1, absl::ZeroDuration());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  // A third stream that exists without the group.
  const std::string lonely = "test:audit:lonely:" + RandomSuffix();
  ASSERT_TRUE(client.XAddBatch(lonely, {{{"k", "v"}}, {{"k", "v"}}}).ok());
  options_.streams.emplace_back(audit::v1::OWNER_APP, lonely);
  Serve(options_);

  // Inbox rows for our consumer, and some for another consumer that must
  // not be counted.
  const std::string insert =
      "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload, "
      "payload_sha256, stream, stream_entry_id, status, received_at, leased_at, first_failed_at) "
      "VALUES ($1, $2::uuid, 'auth', 'auth.user.created', '\\x00', '\\x00', 's', '1-0', $3, "
      "now() - $4::interval, now() - $5::interval, now() - $6::interval)";
  auto inbox = [&](const std::string& consumer, const std::string& status, const char* received,
                   const char* leased, const char* failed) {
    Exec(insert, {pg::Text(consumer), pg::Text(ids::NewUuidV7()), pg::Text(status),
                  pg::Text(received), pg::TextOrNull(leased), pg::TextOrNull(failed)});
  };
  inbox("audit_logs", "PENDING", "100 seconds", "", "");
  inbox("audit_logs", "PENDING", "10 seconds", "", "50 seconds");
  inbox("audit_logs", "PROCESSING", "200 seconds", "30 seconds", "");
  inbox("audit_logs", "PROCESSING", "200 seconds", "5 seconds", "");
  inbox("audit_logs", "PROCESSED", "300 seconds", "", "");
  inbox("audit_logs", "PROCESSED", "300 seconds", "", "");
  inbox("audit_logs", "PROCESSED", "300 seconds", "", "999 seconds");  // failed once, then done
  inbox("audit_logs", "DEAD", "400 seconds", "", "400 seconds");
  inbox("other", "PENDING", "9999 seconds", "", "9999 seconds");
  inbox("other", "PROCESSING", "9999 seconds", "9999 seconds", "");
  for (int i = 0; i < 3; ++i) {
    Exec(
        "INSERT INTO poison_events (consumer, stream, stream_entry_id, event_id, reason, detail,"
        " fields) VALUES ('audit_logs', 's', $1, NULL, 'malformed', 'test', '[]')",
        {pg::Text(absl::StrCat(i, "-0"))});
  }

  v1::PipelineStatus status;
  auto ctx = Ctx();
  const absl::Time before = absl::Now();
  grpc::Status s = stub_->GetPipelineStatus(ctx.get(), v1::GetPipelineStatusRequest(), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();

  ASSERT_EQ(status.streams_size(), 3);
  const v1::StreamStatus& auth = status.streams(0);
  EXPECT_EQ(auth.stream(), auth_stream_);
  EXPECT_EQ(auth.owner(), audit::v1::OWNER_AUTH);
  EXPECT_TRUE(auth.group_exists());
  EXPECT_EQ(auth.length(), 5);
  EXPECT_EQ(auth.pending(), 1);
  ASSERT_TRUE(auth.has_group_lag());
  EXPECT_EQ(auth.group_lag(), 4);
  EXPECT_EQ(auth.last_delivered_id(), (*added)[0]);

  const v1::StreamStatus& app = status.streams(1);  // the stream does not exist
  EXPECT_EQ(app.stream(), app_stream_);
  EXPECT_EQ(app.owner(), audit::v1::OWNER_APP);
  EXPECT_FALSE(app.group_exists());
  EXPECT_EQ(app.length(), 0);
  EXPECT_EQ(app.pending(), 0);
  EXPECT_EQ(app.group_lag(), 0);
  EXPECT_EQ(app.last_delivered_id(), "");

  const v1::StreamStatus& no_group = status.streams(2);  // stream without the group
  EXPECT_EQ(no_group.stream(), lonely);
  EXPECT_FALSE(no_group.group_exists());
  EXPECT_EQ(no_group.length(), 2);
  EXPECT_EQ(no_group.pending(), 0);

  const v1::InboxStatus& in = status.inbox();
  EXPECT_EQ(in.pending(), 2);
  EXPECT_EQ(in.processing(), 2);
  EXPECT_EQ(in.processed(), 3);
  EXPECT_EQ(in.dead(), 1);
  // Database-clock ages; generous upper bounds for a slow machine.
  EXPECT_GE(Seconds(in.oldest_pending_age()), 100);
  EXPECT_LT(Seconds(in.oldest_pending_age()), 160);
  EXPECT_GE(Seconds(in.oldest_lease_age()), 30);
  EXPECT_LT(Seconds(in.oldest_lease_age()), 90);
  EXPECT_GE(Seconds(in.oldest_retry_age()), 50);
  EXPECT_LT(Seconds(in.oldest_retry_age()), 110);
  EXPECT_EQ(status.poison_count(), 3);
  const absl::Time observed =
      absl::FromUnixMicros(TimeUtil::TimestampToMicroseconds(status.observed_at()));
  EXPECT_LT(absl::AbsDuration(observed - before), absl::Seconds(30));
}

TEST_F(AdminQueryTest, PipelineStatusOfAnEmptyPipelineIsAllZeros) {
  v1::PipelineStatus status;
  auto ctx = Ctx();
  grpc::Status s = stub_->GetPipelineStatus(ctx.get(), v1::GetPipelineStatusRequest(), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(status.streams_size(), 2);
  for (const auto& st : status.streams()) {
    EXPECT_FALSE(st.group_exists());
    EXPECT_EQ(st.group_lag(), 0);
  }
  EXPECT_EQ(status.inbox().pending(), 0);
  EXPECT_EQ(status.inbox().processed(), 0);
  EXPECT_EQ(Seconds(status.inbox().oldest_pending_age()), 0);
  EXPECT_EQ(Seconds(status.inbox().oldest_lease_age()), 0);
  EXPECT_EQ(Seconds(status.inbox().oldest_retry_age()), 0);
  EXPECT_EQ(status.poison_count(), 0);
  EXPECT_TRUE(status.has_observed_at());
}

TEST_F(AdminQueryTest, PipelineStatusStillAnswersWhenRedisIsDown) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  // A group on the private server, so "known" would look different.
  {
    redis::Options ro = redis_;
    ro.port = own.port();
    redis::Client c(ro);
    ASSERT_TRUE(c.XGroupCreate(auth_stream_, options_.group, "0", true).ok());
  }
  options_.redis.port = own.port();
  Serve(options_);
  own.Kill();
  Exec(
      "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload, "
      "payload_sha256, stream, stream_entry_id) VALUES ('audit_logs', $1::uuid, 'auth', "
      "'auth.user.created', '\\x00', '\\x00', 's', '1-0')",
      {pg::Text(ids::NewUuidV7())});

  v1::PipelineStatus status;
  auto ctx = Ctx();
  const absl::Time start = absl::Now();
  grpc::Status s = stub_->GetPipelineStatus(ctx.get(), v1::GetPipelineStatusRequest(), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // one failed dial, not one per stream
  EXPECT_EQ(status.inbox().pending(), 1);
  ASSERT_EQ(status.streams_size(), 2);
  for (const auto& st : status.streams()) {
    EXPECT_FALSE(st.group_exists()) << st.stream();
    EXPECT_FALSE(st.has_group_lag()) << st.stream() << ": unknown";
  }
  EXPECT_EQ(status.streams(0).stream(), auth_stream_);
  EXPECT_EQ(status.streams(1).owner(), audit::v1::OWNER_APP);

  // Redis back: the same service reports the group again.
  ASSERT_TRUE(own.Start());
  {
    redis::Options ro = redis_;
    ro.port = own.port();
    redis::Client c(ro);
    ASSERT_TRUE(c.XGroupCreate(auth_stream_, options_.group, "0", true).ok());
  }
  ctx = Ctx();
  s = stub_->GetPipelineStatus(ctx.get(), v1::GetPipelineStatusRequest(), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(status.streams(0).group_exists());
  ASSERT_TRUE(status.streams(0).has_group_lag());
  EXPECT_EQ(status.streams(0).group_lag(), 0);
}

}  // namespace
}  // namespace query
}  // namespace ulticode::admin
