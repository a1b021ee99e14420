// Peers that hold one credential and use it against the others, on the three
// real binaries with real PostgreSQL and Redis:
//  - an owner's Redis login writes entries as large as Redis lets it (one
//    value of 200 MB, and four entries of 40 fields of 1 MB): Redis refuses
//    the first, the four become poison (too_large) without Admin ever
//    holding them, and both owners' events keep reaching audit_logs. The
//    mesh has a Redis of its own, bounded as deployed: its clients' memory
//    bound (maxmemory-clients) is shared by every client, so no other
//    test's clients may count against it;
//  - an owner's database login keeps a committed event from Admin (marks it
//    CONFIRMED before it was ever published): Admin reports its number
//    missing once later events arrived, while numbers taken and never
//    committed are attested void by the owner and not reported; the gap
//    resolves when an operator's Replay brings the event after all.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/redis_server.h"
#include "tests/support/tokens.h"
#include "ulticode/outbox/v1/outbox.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

class HostilePeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(shared_redis);
    ASSERT_TRUE(redis_server_.Start());
    testing::RedisEndpoint redis = shared_redis;
    redis.host = "127.0.0.1";
    redis.port = redis_server_.port();
    testing::MeshOptions options;
    options.prefix = "hostile";
    options.redis_addr = absl::StrCat("127.0.0.1:", redis_server_.port());
    // Gaps are reported 2 s after a higher number arrived, and the owners
    // attest numbers never committed after 1 s, checked each second.
    options.admin_args = {"--sequence-gap-grace=2s", "--metrics-sample-interval=1s"};
    options.auth_args = {"--outbox-number-settle=1s", "--metrics-sample-interval=1s"};
    options.app_args = options.auth_args;
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(Service::kAdmin);
    auto c = pg::Connection::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    admin_db_ = std::move(c).value();
    redis::Options r;
    r.host = redis.host;
    r.port = redis.port;
    r.user = redis.user;
    r.password = redis.password;
    r.command_timeout = absl::Seconds(30);
    redis_ = std::make_unique<redis::Client>(r);
  }

  static void As(grpc::ClientContext* ctx, const std::string& principal, const std::string& role) {
    testing::Authorize(ctx, principal, {role});
  }

  // One business change on each owner.
  void MutateBoth(int i) {
    CreateUser(absl::StrCat("user", i));
    auto problem = testing::CreateProblem(*mesh_, i);
    EXPECT_TRUE(problem.ok()) << problem.status();
  }

  int64_t Admin(const std::string& sql) { return QueryInt(*admin_db_, sql); }

  // A connection to `service`'s database as its runtime role: the login a
  // compromised owner host (or a leaked password) gives.
  std::unique_ptr<pg::Connection> AsRuntime(Service service) {
    pg::ConnectOptions o;
    const std::string dsn = mesh_->Dsn(service);
    o.conninfo = dsn.substr(0, dsn.find(" user=")) + dsn.substr(dsn.find(" dbname="));
    o.user = mesh_->RuntimeRole(service);
    o.password = mesh_->RuntimePassword(service);
    auto c = pg::Connection::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::string CreateUser(const std::string& name) {
    auto id = testing::CreateUser(*mesh_, name);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  // XADD of `fields` at `id`, as often as Redis closes the connection
  // before it answers: the clients' memory bound counts Admin's replies
  // too (a reader of a 40 MiB entry holds 40 MiB of it in Redis until it
  // has read it), so the writer may be the client Redis closes. An entry
  // that landed before the close is found by its id, never written twice.
  absl::Status AddOnce(const std::string& stream, const std::string& id,
                       const redis::StreamFields& fields) {
    std::vector<std::string> xadd = {"XADD", stream, id};
    for (const auto& [field, value] : fields) {
      xadd.push_back(field);
      xadd.push_back(value);
    }
    absl::Status last;
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto added = redis_->Command(xadd);
      if (added.ok()) return absl::OkStatus();
      last = added.status();
      auto there = redis_->Command(
          {"EVAL", "return #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])", "1", stream, id});
      if (there.ok() && there->integer() == 1) return absl::OkStatus();
    }
    return last;
  }

  // The stream's last-generated-id, as "<ms>-<seq>".
  std::string LastId(const std::string& stream) {
    auto info = redis_->Command(
        {"EVAL",
         "local i = redis.call('XINFO', 'STREAM', KEYS[1]) "
         "for k = 1, #i, 2 do if i[k] == 'last-generated-id' then return i[k + 1] end end",
         "1", stream});
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->str() : "";
  }

  testing::RedisServer redis_server_;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<pg::Connection> admin_db_;
  std::unique_ptr<redis::Client> redis_;
};

// (Without the bridge's reply limits Admin read the entries whole: its peak
// RSS was 428 MiB here, and grows with what the owner writes.)
TEST_F(HostilePeersTest, HugeEntriesFromAnOwnersRedisLoginBecomePoisonWhileAdminStaysSmall) {
  MutateBoth(0);
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 2; },
                      std::chrono::seconds(30)));

  const std::string stream = mesh_->app_stream();
  auto single = redis_->XAddBatch(stream, {{{"payload", std::string(200 << 20, 'x')}}});
  EXPECT_FALSE(single.ok()) << "Redis took a 200 MB value";

  const std::string mib(1 << 20, 'y');
  // Ids after the stream's last one (the owners publish nothing meanwhile).
  const std::string last = LastId(stream);
  ASSERT_FALSE(last.empty());
  const std::string ms = last.substr(0, last.find('-'));
  for (int e = 0; e < 4; ++e) {
    redis::StreamFields fields;
    // 40 MiB: under the clients' memory bound (maxmemory-clients 64mb), far
    // over the bridge's entry limit.
    for (int f = 0; f < 40; ++f) fields.emplace_back(absl::StrCat("f", f), mib);
    const absl::Status added = AddOnce(stream, absl::StrCat(ms, "-", 1000000 + e), fields);
    ASSERT_TRUE(added.ok()) << added;
  }
  for (int i = 1; i <= 3; ++i) MutateBoth(i);

  EXPECT_TRUE(WaitFor(
      [&] {
        return Admin("SELECT count(*) FROM poison_events WHERE reason = 'too_large'") == 4 &&
               Admin("SELECT count(*) FROM audit_logs") == 8;
      },
      std::chrono::seconds(60)))
      << "poison: " << Admin("SELECT count(*) FROM poison_events")
      << ", audit rows: " << Admin("SELECT count(*) FROM audit_logs");
  const int64_t peak = testing::ProcessMemory(mesh_->Pid(Service::kAdmin, 0), "VmHWM");
  ASSERT_GT(peak, 0);
  EXPECT_LT(peak, int64_t{256} << 20) << "Admin's peak RSS";
  std::cout << "[hostile_peers] Admin peak RSS " << (peak >> 20) << " MiB\n";
}

// (Without the numbers, nothing at Admin noticed: the event was simply
// never there.)
TEST_F(HostilePeersTest, AnEventKeptFromAdminByTheOwnersDatabaseLoginIsReportedMissing) {
  MutateBoth(0);
  ASSERT_TRUE(WaitFor([&] { return Admin("SELECT count(*) FROM audit_logs") == 2; },
                      std::chrono::seconds(30)));
  // Three numbers taken and never committed (as a rollback, a killed
  // process or a failover leaves them): Auth attests them, nothing is
  // reported.
  pg::ConnectOptions super;
  super.conninfo = mesh_->Dsn(Service::kAuth);
  auto auth_super = pg::Connection::Connect(super);
  ASSERT_TRUE(auth_super.ok()) << auth_super.status();
  ASSERT_EQ(QueryInt(**auth_super,
                     "SELECT count(nextval('audit_outbox_sequence'))"
                     " FROM generate_series(1, 3)"),
            3);
  // Auth cannot publish for a moment (its stream key holds a string), so
  // its next event stays in the outbox after one failed attempt...
  const std::string stream = mesh_->auth_stream();
  ASSERT_TRUE(redis_->Command({"DEL", stream}).ok());
  ASSERT_TRUE(redis_->Command({"SET", stream, "blocked"}).ok());
  const std::string kept = CreateUser("kept-from-admin");
  auto auth = AsRuntime(Service::kAuth);
  ASSERT_NE(auth, nullptr);
  const std::string where = " WHERE event_id = '" + kept + "'";
  const std::string row = " FROM audit_outbox" + where;
  ASSERT_TRUE(WaitFor([&] { return QueryInt(*auth, "SELECT publication" + row) >= 1; },
                      std::chrono::seconds(30)));
  // ...where the owner's own database login marks it CONFIRMED.
  const std::string suppress = "UPDATE audit_outbox SET state = 'CONFIRMED'" + where;
  ASSERT_TRUE(auth->Execute(pg::Statement{"suppress", suppress.c_str()}).ok());
  const int64_t number = QueryInt(*auth, "SELECT owner_sequence" + row);
  ASSERT_GT(number, 0);
  ASSERT_TRUE(redis_->Command({"DEL", stream}).ok());
  for (int i = 1; i <= 2; ++i) MutateBoth(i);

  const std::string gap = absl::StrCat(
      "SELECT count(*) FROM owner_sequence_gaps WHERE owner ="
      " 'auth' AND first_missing = ",
      number, " AND last_missing = ", number);
  EXPECT_TRUE(WaitFor([&] { return Admin(gap + " AND resolved_at IS NULL") == 1; },
                      std::chrono::seconds(30)))
      << mesh_->Output(Service::kAdmin, 0);
  EXPECT_EQ(Admin("SELECT count(*) FROM owner_sequence_gaps"), 1)
      << "the three numbers never committed are attested, and app lost nothing";
  EXPECT_EQ(Admin("SELECT sum((new_value->>'numbers')::int) FROM audit_logs"
                  " WHERE event_type = 'auth.outbox.numbers_voided'"),
            3);
  EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + kept + "'"), 0);

  // An operator brings it back: Replay re-sends the owner's confirmed rows.
  grpc::ClientContext c;
  As(&c, "olga", "audit.operator");
  outbox::v1::ReplayRequest replay;
  replay.mutable_start_time()->set_seconds(absl::ToUnixSeconds(absl::Now() - absl::Hours(1)));
  replay.mutable_end_time()->set_seconds(absl::ToUnixSeconds(absl::Now() + absl::Minutes(1)));
  replay.set_reason("event numbers missing at Admin");
  outbox::v1::ReplayResponse replayed;
  const grpc::Status s = outbox::v1::OutboxOperations::NewStub(mesh_->Channel(Service::kAuth, 0))
                             ->Replay(&c, replay, &replayed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(WaitFor([&] { return Admin(gap + " AND resolved_at IS NOT NULL") == 1; },
                      std::chrono::seconds(30)))
      << mesh_->Output(Service::kAdmin, 0);
  EXPECT_EQ(Admin("SELECT count(*) FROM audit_logs WHERE event_id = '" + kept + "'"), 1);
}

}  // namespace
}  // namespace ulticode
