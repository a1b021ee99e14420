// The live tail end to end: `ulticode-tail --from-beginning` follows Admin's
// WatchAuditLogs while clients make business changes, through an Admin
// stopped gracefully, an Admin killed (-9), a Redis wipe (its own private
// server killed and restarted without persistence) and the follower itself
// stopped and started again on its position file. Then every committed
// event is printed exactly once, in log order, with no gap: the printed
// log indexes are 0..N-1 and their event ids are log_leaves' in order.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode {
namespace {

namespace v1 = admin::v1;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

// The rows a follower printed, in order (lines that are not JSON rows are
// its messages on stderr).
std::vector<v1::AuditLog> Printed(const std::string& output) {
  std::vector<v1::AuditLog> rows;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StartsWith(line, "{")) continue;
    v1::AuditLog row;
    google::protobuf::util::JsonParseOptions opts;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &row, opts).ok())
        << line;
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST(WatchE2eTest, AFollowerFromIndexZeroPrintsEveryEventOnceInLogOrderThroughRestartsAndAWipe) {
  auto pg = testing::PgFromEnv();
  auto shared_redis = testing::RedisFromEnv();
  if (!pg || !shared_redis) {
    if (testing::InCi()) FAIL() << "PostgreSQL and Redis are required in CI";
    GTEST_SKIP() << "no test PostgreSQL/Redis";
  }
  // A private Redis: this test wipes it.
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start());
  testing::RedisEndpoint endpoint = *shared_redis;
  endpoint.host = "127.0.0.1";
  endpoint.port = redis.port();
  testing::MeshOptions options;
  options.prefix = "watche2e";
  options.redis_addr = absl::StrCat("127.0.0.1:", redis.port());
  options.admin_args = {"--log-sequence-interval=50ms", "--watch-poll-interval=20ms",
                        "--shutdown-timeout=2s"};
  // Published rows Redis lost are published again after 2 s.
  options.auth_args = {"--dispatch-resend-timeout=2s"};
  options.app_args = options.auth_args;
  Mesh mesh(*pg, endpoint, options);
  std::string error;
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    ASSERT_TRUE(mesh.Start(s, 0, &error)) << error;
  }
  const std::string dir = mesh.keys().dir();
  testing::TokenSpec spec;
  spec.subject = "follower";
  spec.roles = {"audit.reader"};
  ASSERT_TRUE(
      crypto::WriteSecretFile(dir + "/follower.token", testing::SharedTestTokens().Mint(spec))
          .ok());
  const std::vector<std::string> tail_argv = {
      absl::StrCat(testing::BinDir(), "/tools/tail/ulticode-tail"),
      absl::StrCat("--admin=127.0.0.1:", mesh.grpc_port(Service::kAdmin, 0)),
      "--token-file=" + dir + "/follower.token",
      "--from-beginning",
      "--position-file=" + dir + "/tail.pos",
      "--idle-timeout=10s"};

  std::string printed;  // the output of every follower run, in order
  auto follower = std::make_unique<testing::ChildProcess>();
  ASSERT_TRUE(follower->Start(tail_argv));

  // Clients change things all along; each OK call is one committed event.
  std::atomic<bool> stop{false};
  std::vector<std::string> committed;
  std::thread clients([&] {
    for (int i = 0; !stop; ++i) {
      auto user = testing::CreateUser(mesh, absl::StrCat("w", i));
      if (user.ok()) committed.push_back(*user);
      auto problem = testing::CreateProblem(mesh, i);
      if (problem.ok()) committed.push_back(*problem);
    }
  });
  // Each fault strikes while rows flow: the follower printed 10 more since
  // the last one.
  auto pause = [&] {
    const size_t before = Printed(printed + follower->Output()).size();
    return WaitFor([&] { return Printed(printed + follower->Output()).size() >= before + 10; },
                   std::chrono::seconds(30), std::chrono::milliseconds(100));
  };
  ASSERT_TRUE(pause());
  EXPECT_EQ(mesh.Terminate(Service::kAdmin, 0), 0);  // graceful: watches end UNAVAILABLE
  ASSERT_TRUE(mesh.Start(Service::kAdmin, 0, &error)) << error;
  ASSERT_TRUE(pause()) << "no rows printed after Admin's restart";
  mesh.Kill(Service::kAdmin, 0);  // no goodbye: the connection breaks
  ASSERT_TRUE(mesh.Start(Service::kAdmin, 0, &error)) << error;
  ASSERT_TRUE(pause()) << "no rows printed after Admin was killed";
  redis.Kill();  // everything in Redis is gone
  ASSERT_TRUE(redis.Start());
  ASSERT_TRUE(pause()) << "no rows printed after Redis lost everything";
  EXPECT_EQ(follower->Stop(SIGTERM, std::chrono::seconds(10)), 0);  // the follower restarts
  printed += follower->Output();
  follower = std::make_unique<testing::ChildProcess>();
  ASSERT_TRUE(follower->Start(tail_argv));
  ASSERT_TRUE(pause()) << "no rows printed by the restarted follower";
  stop = true;
  clients.join();
  ASSERT_GT(committed.size(), 40u);

  // Every committed event reaches the log; the follower catches up with it.
  pg::ConnectOptions o;
  o.conninfo = mesh.Dsn(Service::kAdmin);
  auto db = pg::Connection::Connect(o);
  ASSERT_TRUE(db.ok()) << db.status();
  int64_t leaves = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        leaves = QueryInt(**db, "SELECT count(*) FROM log_leaves");
        return QueryInt(**db, "SELECT count(*) FROM audit_logs") >=
                   static_cast<int64_t>(committed.size()) &&
               QueryInt(**db, "SELECT count(*) FROM log_queue") == 0;
      },
      std::chrono::seconds(90)))
      << "the log did not take every event";
  ASSERT_TRUE(WaitFor(
      [&] { return Printed(printed + follower->Output()).size() >= static_cast<size_t>(leaves); },
      std::chrono::seconds(60)))
      << Printed(printed + follower->Output()).size() << " of " << leaves << " printed\n"
      << printed + follower->Output();
  EXPECT_EQ(follower->Stop(SIGTERM, std::chrono::seconds(10)), 0);
  printed += follower->Output();

  const std::vector<v1::AuditLog> rows = Printed(printed);
  pg::Statement order{"test.order", "SELECT event_id::text FROM log_leaves ORDER BY log_index"};
  auto log = (*db)->Execute(order);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(rows.size(), static_cast<size_t>(log->rows())) << printed;
  std::set<std::string> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].log_index(), i) << "row " << i << " of the output";
    EXPECT_EQ(rows[i].event_id(), log->GetString(static_cast<int>(i), 0));
    seen.insert(rows[i].event_id());
  }
  for (const std::string& id : committed) EXPECT_TRUE(seen.count(id)) << id << " never printed";
  // The follower did reconnect, more than once.
  int reconnects = 0;
  for (size_t at = 0; (at = printed.find("resuming where it stopped", at)) != std::string::npos;
       ++at) {
    ++reconnects;
  }
  EXPECT_GE(reconnects, 2) << printed;
  std::printf("[watch e2e] %zu committed events, %zu rows printed in log order, %d reconnects\n",
              committed.size(), rows.size(), reconnects);
}

}  // namespace
}  // namespace ulticode
