// A generated adversary. The three real binaries run on a private Redis
// (bounded as every Redis of the mesh) and the test PostgreSQL, under steady
// load from honest clients (business changes on both owners, an honest
// reader). Then, one round at a time, an adversary holding ONE credential
// (an owner's Redis login, an owner's runtime database login, an
// `audit.reader` token, an unauthenticated connection) runs one action of
// the catalogue below, with sizes and counts drawn from the seed. The order
// of the rounds is drawn too; every action runs once per seed.
//
// After each round: the honest clients' throughput and p99 stay within a
// bound of the baseline measured before any attack, every process's memory
// within its bound, and the attack was refused or counted by a metric an
// alert rule watches. At the end: every honest change is in audit_logs
// exactly once.
//
// ULTICODE_ADVERSARY_SEED picks another seed (CI runs the fixed one);
// docs/security.md lists the catalogue and what each action met.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/tlog/witnessing.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/metric_text.h"
#include "tests/support/pg_query.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

constexpr uint64_t kSeed = 33033;
constexpr int64_t kShare = 16 << 20;       // --owner-stream-max-bytes
constexpr int64_t kMaxMemory = 642 << 20;  // tests/support/redis_server.cc
constexpr absl::Duration kRound = absl::Seconds(5);
constexpr int kHealthWatches = 500;  // --health-max-watches

uint64_t Seed() {
  uint64_t seed = kSeed;
  if (const char* s = std::getenv("ULTICODE_ADVERSARY_SEED"); s != nullptr && *s != '\0') {
    EXPECT_FALSE(testing::InCi()) << "CI runs the fixed seed";
    EXPECT_TRUE(absl::SimpleAtoi(s, &seed)) << "ULTICODE_ADVERSARY_SEED=" << s;
  }
  return seed;
}

int64_t Rss(pid_t pid) { return testing::ProcessMemory(pid, "VmRSS"); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Business changes on both owners and an honest reader, in a loop; what
// each window saw.
class HonestLoad {
 public:
  explicit HonestLoad(Mesh& mesh) : mesh_(mesh) {}
  ~HonestLoad() { Stop(); }

  void Start() {
    threads_.emplace_back([this] { Write(); });
    threads_.emplace_back([this] { Read(); });
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  struct Window {
    int writes = 0;
    double write_p99 = 0;
    int reads = 0;
    int refused_reads = 0;
    double read_p99 = 0;
    absl::Duration length;
  };
  // What happened since the previous call.
  Window Take() {
    std::lock_guard<std::mutex> lock(mu_);
    Window w;
    w.writes = static_cast<int>(write_ms_.size());
    w.write_p99 = Percentile(write_ms_, 0.99);
    w.reads = static_cast<int>(read_ms_.size());
    w.read_p99 = Percentile(read_ms_, 0.99);
    w.refused_reads = refused_reads_;
    w.length = absl::Now() - since_;
    write_ms_.clear();
    read_ms_.clear();
    refused_reads_ = 0;
    since_ = absl::Now();
    return w;
  }
  int users() const { return users_; }
  int problems() const { return problems_; }

 private:
  void Write() {
    for (int i = 0; !stop_; ++i) {
      const absl::Time start = absl::Now();
      const bool user = testing::CreateUser(mesh_, absl::StrCat("honest", i)).ok();
      const bool problem = testing::CreateProblem(mesh_, i).ok();
      users_ += user;
      problems_ += problem;
      std::lock_guard<std::mutex> lock(mu_);
      if (user && problem) write_ms_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }
  }
  void Read() {
    auto stub = admin::v1::AdminService::NewStub(mesh_.Channel(Service::kAdmin, 0));
    while (!stop_) {
      grpc::ClientContext ctx;
      testing::Authorize(&ctx, "honest-auditor", {"audit.reader"});
      admin::v1::QueryAuditLogsRequest req;
      req.set_page_size(20);
      admin::v1::QueryAuditLogsResponse resp;
      const absl::Time start = absl::Now();
      const grpc::Status s = stub->QueryAuditLogs(&ctx, req, &resp);
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) {
        read_ms_.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      } else {
        ++refused_reads_;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  Mesh& mesh_;
  std::atomic<bool> stop_{false};
  std::atomic<int> users_{0}, problems_{0};
  std::mutex mu_;
  std::vector<double> write_ms_, read_ms_;
  int refused_reads_ = 0;
  absl::Time since_ = absl::Now();
  std::vector<std::thread> threads_;
};

class AdversaryTest : public ::testing::Test {
 public:  // the catalogue's actions use the fixture
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(shared_redis);
    ASSERT_TRUE(redis_server_.Start());
    redis_ = shared_redis;
    redis_.host = "127.0.0.1";
    redis_.port = redis_server_.port();
    testing::MeshOptions options;
    options.prefix = "adversary";
    options.redis_addr = absl::StrCat("127.0.0.1:", redis_server_.port());
    options.admin_args = {"--stream-guard-interval=100ms",
                          absl::StrCat("--owner-stream-max-bytes=", kShare),
                          "--max-reads-per-principal=2", "--metrics-sample-interval=1s",
                          absl::StrCat("--health-max-watches=", kHealthWatches)};
    options.auth_args = {"--metrics-sample-interval=1s", "--outbox-number-settle=1s"};
    options.app_args = options.auth_args;
    mesh_ = std::make_unique<Mesh>(pg, redis_, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    admin_db_ = Connect(mesh_->Dsn(Service::kAdmin), "", "");
    ASSERT_NE(admin_db_, nullptr);
  }

  static std::unique_ptr<pg::Connection> Connect(const std::string& dsn, const std::string& user,
                                                 const std::string& password) {
    pg::ConnectOptions o;
    o.conninfo =
        user.empty() ? dsn : dsn.substr(0, dsn.find(" user=")) + dsn.substr(dsn.find(" dbname="));
    o.user = user;
    o.password = password;
    auto c = pg::Connection::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // The app owner's runtime database login (a compromised host).
  std::unique_ptr<pg::Connection> AppDatabaseLogin() {
    return Connect(mesh_->Dsn(Service::kApp), mesh_->RuntimeRole(Service::kApp),
                   mesh_->RuntimePassword(Service::kApp));
  }
  // The app owner's Redis login.
  std::unique_ptr<redis::Client> AppRedisLogin() {
    redis::Options o;
    o.host = redis_.host;
    o.port = redis_.port;
    o.user = mesh_->RedisUser(Service::kApp);
    o.password = mesh_->RedisPassword(Service::kApp);
    o.command_timeout = absl::Seconds(30);
    return std::make_unique<redis::Client>(o);
  }
  std::unique_ptr<redis::Client> RedisRoot() {
    redis::Options o;
    o.host = redis_.host;
    o.port = redis_.port;
    o.user = redis_.user;
    o.password = redis_.password;
    return std::make_unique<redis::Client>(o);
  }

  // The value of `series` on `service`'s /metrics; -1 when absent.
  double Metric(Service service, const std::string& series) {
    const std::string text =
        testing::RunCommand(
            absl::StrCat("curl -s http://127.0.0.1:", mesh_->metrics_port(service, 0), "/metrics"))
            .output;
    return testing::MetricValue("\n" + text, series);
  }

  // Admin's log lines that mention `what`.
  std::string AdminLines(const std::string& what) {
    std::string out;
    std::istringstream lines(mesh_->Output(Service::kAdmin, 0));
    for (std::string line; std::getline(lines, line);) {
      if (line.find(what) != std::string::npos) absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

  // A number of Redis's INFO `section` (as the harness's user); -1 when it
  // cannot be read.
  int64_t RedisInfo(const std::string& section, const std::string& field) {
    auto info = RedisRoot()->Command({"INFO", section});
    if (!info.ok()) return -1;
    const std::string& text = info->str();
    const size_t at = text.find(field + ":");
    int64_t v = -1;
    if (at != std::string::npos) {
      const size_t from = at + field.size() + 1;
      (void)absl::SimpleAtoi(text.substr(from, text.find('\r', from) - from), &v);
    }
    return v;
  }
  int64_t EvictedClients() { return RedisInfo("stats", "evicted_clients"); }
  int64_t RedisUsedMemory() { return RedisInfo("memory", "used_memory"); }

  testing::RedisServer redis_server_;
  testing::RedisEndpoint redis_;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<pg::Connection> admin_db_;
};

// One action: its credential, its name, and the attack; it returns what
// refused or counted it (a line for the report), failing the test when
// nothing did.
struct Action {
  const char* credential;
  const char* name;
  std::function<std::string(AdversaryTest&, std::mt19937_64&)> run;
};

// Writes entries of `bytes` to `key` as the owner until the round ends;
// how many Redis took and how many it refused (OOM, or the connection cut).
std::pair<int, int> Flood(redis::Client& owner, const std::string& key, size_t bytes,
                          const redis::StreamFields& extra) {
  int taken = 0, refused = 0;
  const absl::Time end = absl::Now() + kRound;
  redis::StreamFields fields = extra;
  fields.emplace_back("payload", std::string(bytes, 'x'));
  while (absl::Now() < end) {
    auto added = owner.XAddBatch(key, std::vector<redis::StreamFields>(8, fields));
    if (added.ok()) {
      taken += 8;
    } else {
      ++refused;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  return {taken, refused};
}

std::vector<Action> Catalogue() {
  using T = AdversaryTest;
  return {
      {"owner Redis login", "flood its audit stream",
       [](T& t, std::mt19937_64& rng) {
         const size_t bytes = std::vector<size_t>{64 << 10, 256 << 10, 1000 << 10}[rng() % 3];
         const std::string series = absl::StrCat("ulticode_stream_over_share_total{stream=\"",
                                                 t.mesh_->app_stream(), "\"}");
         const double before = t.Metric(Service::kAdmin, series);
         auto owner = t.AppRedisLogin();
         const auto [taken, refused] = Flood(*owner, t.mesh_->app_stream(), bytes, {});
         EXPECT_TRUE(WaitFor([&] { return t.Metric(Service::kAdmin, series) > before; },
                             std::chrono::seconds(10)))
             << series << "; MEMORY USAGE "
             << t.RedisRoot()
                    ->Command({"MEMORY", "USAGE", t.mesh_->app_stream(), "SAMPLES", "0"})
                    ->integer()
             << "; Admin may: "
             << t.RedisRoot()
                    ->Command({"ACL", "DRYRUN", t.mesh_->RedisUser(Service::kAdmin), "MEMORY",
                               "USAGE", t.mesh_->app_stream()})
                    ->str()
             << "; Admin's guard said: " << t.AdminLines("guard");
         return absl::StrCat(taken, " entries of ", bytes, " B taken, ", refused,
                             " batches refused; cut back to its share: ", series, " ",
                             t.Metric(Service::kAdmin, series));
       }},
      {"owner Redis login", "flood its cosignature stream",
       [](T& t, std::mt19937_64& rng) {
         const size_t bytes = (16 << 10) * (1 + rng() % 16);
         const std::string key = tlog::CosignatureStreamFor(t.mesh_->app_stream());
         const std::string series =
             absl::StrCat("ulticode_stream_over_share_total{stream=\"", key, "\"}");
         const double before = t.Metric(Service::kAdmin, series);
         auto owner = t.AppRedisLogin();
         const auto [taken, refused] =
             Flood(*owner, key, bytes, {{tlog::kSizeField, "1"}, {tlog::kCosignatureField, "x"}});
         EXPECT_TRUE(WaitFor([&] { return t.Metric(Service::kAdmin, series) > before; },
                             std::chrono::seconds(10)))
             << series;
         return absl::StrCat(taken, " entries of ", bytes, " B; ", series, " ",
                             t.Metric(Service::kAdmin, series));
       }},
      {"owner Redis login", "replay an old genuine cosignature",
       [](T& t, std::mt19937_64&) {
         const std::string line = testing::QueryText(
             *t.admin_db_,
             "SELECT size || ' ' || line FROM log_cosignatures WHERE witness = 'app'"
             " ORDER BY size LIMIT 1");
         EXPECT_FALSE(line.empty()) << "no cosignature of app yet";
         const std::string size = line.substr(0, line.find(' '));
         const std::string series =
             "ulticode_log_cosignatures_total{outcome=\"stale\",witness=\"app\"}";
         const double before = std::max(0.0, t.Metric(Service::kAdmin, series));
         auto owner = t.AppRedisLogin();
         EXPECT_TRUE(owner
                         ->XAddBatch(tlog::CosignatureStreamFor(t.mesh_->app_stream()),
                                     {{{tlog::kSizeField, size},
                                       {tlog::kCosignatureField, line.substr(line.find(' ') + 1)}}})
                         .ok());
         EXPECT_TRUE(WaitFor([&] { return t.Metric(Service::kAdmin, series) > before; },
                             std::chrono::seconds(10)))
             << series;
         // Counted stale is what ignored means (kKeep changed nothing); the
         // cosigned size itself is moved on by the owner's next answer, so a
         // look at it afterwards could not tell.
         return absl::StrCat("cosignature of size ", size, " replayed; ", series, " ",
                             t.Metric(Service::kAdmin, series), " (ignored)");
       }},
      {"owner Redis login", "probe every command on every key it can name",
       [](T& t, std::mt19937_64& rng) {
         // Every key an owner can name (its own three, the other owner's
         // three, one of nobody's) under every command of a catalogue, and
         // commands that name no key, asked with ACL DRYRUN (nothing runs):
         // only the pairs its rules grant may pass (looking at its own stream
         // and Admin's group on it is the resend sweep's, outbox/resend.h).
         const std::string own = t.mesh_->app_stream(), other = t.mesh_->auth_stream();
         const std::vector<std::string> keys = {
             own,         tlog::ProofStreamFor(own),   tlog::CosignatureStreamFor(own),
             other,       tlog::ProofStreamFor(other), tlog::CosignatureStreamFor(other),
             "nobody:key"};
         const std::set<std::pair<std::string, std::string>> granted = {
             {"XADD", own},
             {"XINFO", own},
             {"XINFO GROUPS", own},
             {"XPENDING", own},
             // Reading and deleting its own entries: erasure (personal_erasure.h).
             {"XREAD", own},
             {"XDEL", own},
             {"XADD", tlog::CosignatureStreamFor(own)},
             {"XREAD", tlog::ProofStreamFor(own)},
             {"XINFO", tlog::ProofStreamFor(own)}};
         // {name, arguments before the key, arguments after it}
         struct Keyed {
           std::string name;
           std::vector<std::string> before, after;
         };
         std::vector<Keyed> commands = {
             {"XADD", {"XADD"}, {"*", "f", "v"}},
             {"XREAD", {"XREAD", "STREAMS"}, {"0"}},
             {"XINFO", {"XINFO", "STREAM"}, {}},
             {"XINFO GROUPS", {"XINFO", "GROUPS"}, {}},
             {"XPENDING", {"XPENDING"}, {"g"}},
             {"XRANGE", {"XRANGE"}, {"-", "+"}},
             {"XREVRANGE", {"XREVRANGE"}, {"+", "-"}},
             {"XLEN", {"XLEN"}, {}},
             {"XTRIM", {"XTRIM"}, {"MAXLEN", "0"}},
             {"XDEL", {"XDEL"}, {"0-1"}},
             {"XSETID", {"XSETID"}, {"1-1"}},
             {"XACK", {"XACK"}, {"g", "0-1"}},
             {"XCLAIM", {"XCLAIM"}, {"g", "c", "0", "0-1"}},
             {"XREADGROUP", {"XREADGROUP", "GROUP", "g", "c", "STREAMS"}, {">"}},
             {"XGROUP DESTROY", {"XGROUP", "DESTROY"}, {"g"}},
             {"XGROUP CREATE", {"XGROUP", "CREATE"}, {"g", "0"}},
             {"DEL", {"DEL"}, {}},
             {"UNLINK", {"UNLINK"}, {}},
             {"RENAME", {"RENAME"}, {"nobody:other"}},
             {"EXPIRE", {"EXPIRE"}, {"1"}},
             {"SET", {"SET"}, {"v"}},
             {"GET", {"GET"}, {}},
             {"DUMP", {"DUMP"}, {}},
             {"MEMORY USAGE", {"MEMORY", "USAGE"}, {}},
             {"OBJECT ENCODING", {"OBJECT", "ENCODING"}, {}},
         };
         const std::vector<std::vector<std::string>> keyless = {
             {"FLUSHALL"},
             {"FLUSHDB"},
             {"KEYS", "*"},
             {"SCAN", "0"},
             {"CONFIG", "SET", "maxmemory", "0"},
             {"ACL", "SETUSER", "x", "on"},
             {"CLIENT", "KILL", "TYPE", "normal"},
             {"CLIENT", "NO-EVICT", "on"},
             {"SHUTDOWN", "NOSAVE"},
             {"EVAL", "return 1", "0"},
             {"FUNCTION", "FLUSH"},
             {"PUBLISH", "c", "m"},
             {"SELECT", "1"},
             {"SWAPDB", "0", "1"},
             {"MONITOR"}};
         std::shuffle(commands.begin(), commands.end(), rng);
         auto root = t.RedisRoot();
         const std::string user = t.mesh_->RedisUser(Service::kApp);
         auto passes = [&](const std::vector<std::string>& command) {
           std::vector<std::string> dry = {"ACL", "DRYRUN", user};
           dry.insert(dry.end(), command.begin(), command.end());
           auto r = root->Command(dry);
           return r.ok() && r->str() == "OK";
         };
         int probes = 0, wrong = 0;
         for (const Keyed& c : commands) {
           for (const std::string& key : keys) {
             std::vector<std::string> command = c.before;
             command.push_back(key);
             command.insert(command.end(), c.after.begin(), c.after.end());
             const bool expected = granted.count({c.name, key}) > 0;
             ++probes;
             if (passes(command) != expected) {
               ++wrong;
               ADD_FAILURE() << c.name << " " << key << (expected ? " is refused" : " is allowed");
             }
           }
         }
         for (const auto& command : keyless) {
           ++probes;
           if (passes(command)) {
             ++wrong;
             ADD_FAILURE() << command[0] << " is allowed";
           }
         }
         EXPECT_EQ(wrong, 0);
         return absl::StrCat(probes, " probes (", commands.size(), " commands x ", keys.size(),
                             " keys, ", keyless.size(), " without a key): ", wrong,
                             " differ from its 4 grants");
       }},
      {"owner Redis login", "hold connections with half-sent commands",
       [](T& t, std::mt19937_64& rng) {
         const int connections = 100 + static_cast<int>(rng() % 100);
         const std::string user = t.mesh_->RedisUser(Service::kApp);
         const std::string password = t.mesh_->RedisPassword(Service::kApp);
         auto bulk = [](const std::string& v) {
           return absl::StrCat("$", v.size(), "\r\n", v, "\r\n");
         };
         const std::string auth = absl::StrCat("*3\r\n", bulk("AUTH"), bulk(user), bulk(password));
         // XADD <own stream> * f <1 MiB value>, stopped 64 KiB short of its end.
         const std::string head = absl::StrCat("*5\r\n", bulk("XADD"), bulk(t.mesh_->app_stream()),
                                               bulk("*"), bulk("f"), "$", 1 << 20, "\r\n");
         const std::string body((1 << 20) - (64 << 10), 'z');
         const int64_t evicted_before = t.EvictedClients();
         EXPECT_GE(evicted_before, 0) << "INFO stats has no evicted_clients";
         std::vector<int> fds;
         for (int c = 0; c < connections; ++c) {
           const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
           sockaddr_in addr{};
           addr.sin_family = AF_INET;
           addr.sin_port = htons(static_cast<uint16_t>(t.redis_.port));
           addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
           if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
             if (fd >= 0) ::close(fd);
             continue;
           }
           (void)!::send(fd, auth.data(), auth.size(), MSG_NOSIGNAL);
           (void)!::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
           (void)!::send(fd, body.data(), body.size(), MSG_NOSIGNAL);
           fds.push_back(fd);
         }
         // Redis evicts as soon as the buffers pass its bound.
         (void)testing::WaitFor([&] { return t.EvictedClients() > evicted_before; },
                                std::chrono::seconds(10), std::chrono::milliseconds(50));
         const int64_t evicted = t.EvictedClients() - evicted_before;
         const int64_t used = t.RedisUsedMemory();
         for (int fd : fds) ::close(fd);
         EXPECT_GT(evicted, 0) << "Redis closed none of " << fds.size() << " connections";
         EXPECT_LE(used, kMaxMemory);
         return absl::StrCat(fds.size(),
                             " connections each holding ~1 MiB of a command: Redis "
                             "closed the largest (INFO evicted_clients ",
                             evicted, "), used_memory ", used >> 20, " MiB");
       }},
      {"owner database login", "hold the number attestor's lock",
       [](T& t, std::mt19937_64&) {
         auto db = t.AppDatabaseLogin();
         EXPECT_TRUE(
             testing::QueryText(
                 *db, "SELECT pg_advisory_lock(hashtextextended('ulticode.outbox.numbers', 0))")
                 .empty());
         const std::string series = "ulticode_outbox_numbers_lock_missed_seconds{owner=\"app\"}";
         double missed = 0;
         EXPECT_TRUE(WaitFor([&] { return (missed = t.Metric(Service::kApp, series)) >= 2; },
                             std::chrono::seconds(15)))
             << series;
         return absl::StrCat("held until ", series, " reached ", missed,
                             " (the alert fires past 300)");
       }},
      {"owner database login", "no-op updates and rewinds of its safety state",
       [](T& t, std::mt19937_64& rng) {
         auto db = t.AppDatabaseLogin();
         // The attestor itself is held off meanwhile: it would move the
         // mark (and its time) as honest numbers settle.
         EXPECT_TRUE(
             testing::QueryText(
                 *db, "SELECT pg_advisory_lock(hashtextextended('ulticode.outbox.numbers', 0))")
                 .empty());
         const std::string at = "SELECT attested_at::text FROM outbox_numbers_attested";
         const std::string attested = testing::QueryText(*db, at);
         int refused = 0;
         for (const char* sql : {"UPDATE outbox_numbers_attested SET through = through - 1",
                                 "UPDATE outbox_numbers_attested SET through = through + 1000000",
                                 "UPDATE log_witnessed SET size = size - 1",
                                 "UPDATE log_witnessed SET note = 'forged'",
                                 "UPDATE log_witnessed SET entry_id = 'x'"}) {
           auto r = db->Execute(pg::Statement{"rewind", sql}, {});
           const bool check_violation =
               !r.ok() && std::string(r.status().message()).find("23514") != std::string::npos;
           EXPECT_TRUE(check_violation) << sql << ": " << r.status();
           refused += check_violation;
         }
         for (uint64_t i = 0; i < 1 + rng() % 20; ++i) {
           EXPECT_TRUE(
               db->Execute(
                     pg::Statement{"noop", "UPDATE outbox_numbers_attested SET through = through"},
                     {})
                   .ok());
         }
         EXPECT_EQ(testing::QueryText(*db, at), attested) << "a no-op refreshed the attestation";
         return absl::StrCat(refused,
                             " of 5 rewinds refused (23514); no-op updates left "
                             "attested_at as it was");
       }},
      {"owner database login", "DELETE and TRUNCATE every table it can name",
       [](T& t, std::mt19937_64&) {
         auto db = t.AppDatabaseLogin();
         auto tables = db->Execute(
             pg::Statement{
                 "tables",
                 "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"},
             {});
         EXPECT_TRUE(tables.ok());
         // The business tables it deletes from by design (a problem taken
         // out of a contest); nothing else.
         const std::vector<std::string> deletable = {"contest_problems"};
         int refused = 0, tried = 0;
         for (int i = 0; tables.ok() && i < tables->rows(); ++i) {
           const std::string table = tables->GetString(i, 0);
           for (const char* verb : {"DELETE FROM ", "TRUNCATE "}) {
             if (verb[0] == 'D' &&
                 std::find(deletable.begin(), deletable.end(), table) != deletable.end()) {
               continue;
             }
             const std::string sql = absl::StrCat(verb, table);
             auto r = db->Execute(pg::Statement{"probe", sql.c_str()}, {});
             ++tried;
             if (!r.ok() && std::string(r.status().message()).find("42501") != std::string::npos) {
               ++refused;
             } else {
               ADD_FAILURE() << sql << " was not refused: " << r.status();
             }
           }
         }
         return absl::StrCat(refused, " of ", tried, " refused (42501)");
       }},
      {"audit.reader token", "flood reads",
       [](T& t, std::mt19937_64& rng) {
         const int clients = 4 + static_cast<int>(rng() % 8);
         const std::string series = "ulticode_grpc_reads_limited_total";
         const double before = std::max(0.0, t.Metric(Service::kAdmin, series));
         std::atomic<int> refused{0};
         std::vector<std::thread> threads;
         const absl::Time end = absl::Now() + kRound;
         for (int c = 0; c < clients; ++c) {
           threads.emplace_back([&] {
             auto stub = admin::v1::AdminService::NewStub(t.mesh_->Channel(Service::kAdmin, 0));
             while (absl::Now() < end) {
               grpc::ClientContext ctx;
               testing::Authorize(&ctx, "mallory", {"audit.reader"});
               admin::v1::QueryAuditLogsRequest req;
               req.set_page_size(1000);  // the largest page, with its proofs
               req.set_view(admin::v1::AUDIT_LOG_VIEW_PROVEN);
               admin::v1::QueryAuditLogsResponse resp;
               if (stub->QueryAuditLogs(&ctx, req, &resp).error_code() ==
                   grpc::StatusCode::RESOURCE_EXHAUSTED) {
                 ++refused;
               }
             }
           });
         }
         for (std::thread& th : threads) th.join();
         EXPECT_GT(refused, 0);
         EXPECT_GT(t.Metric(Service::kAdmin, series), before) << series;
         return absl::StrCat(clients, " concurrent readers; ", refused.load(),
                             " reads refused RESOURCE_EXHAUSTED; ", series, " ",
                             t.Metric(Service::kAdmin, series));
       }},
      {"audit.reader token", "open watches past its limit",
       [](T& t, std::mt19937_64& rng) {
         const int extra = 1 + static_cast<int>(rng() % 8);
         auto stub = admin::v1::AdminService::NewStub(t.mesh_->Channel(Service::kAdmin, 0));
         std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
         std::vector<std::unique_ptr<grpc::ClientReader<admin::v1::WatchAuditLogsResponse>>>
             watches;
         int refused = 0;
         for (int i = 0; i < 16 + extra; ++i) {
           contexts.push_back(std::make_unique<grpc::ClientContext>());
           testing::Authorize(contexts.back().get(), "mallory", {"audit.reader"});
           admin::v1::WatchAuditLogsRequest req;
           watches.push_back(stub->WatchAuditLogs(contexts.back().get(), req));
           admin::v1::WatchAuditLogsResponse first;
           if (!watches.back()->Read(&first)) {
             refused +=
                 watches.back()->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
             watches.pop_back();
           }
         }
         EXPECT_EQ(refused, extra) << "--watch-max-per-principal is 16";
         for (auto& c : contexts) c->TryCancel();
         for (auto& w : watches) (void)w->Finish();
         return absl::StrCat(16 + extra, " watches asked, ", refused,
                             " refused RESOURCE_EXHAUSTED (16 per principal)");
       }},
      {"unauthenticated connection", "flood health watches",
       [](T& t, std::mt19937_64& rng) {
         const int connections = 6 + static_cast<int>(rng() % 6);
         const std::string series = "ulticode_health_watches_refused_total{listener=\"grpc\"}";
         const double before = std::max(0.0, t.Metric(Service::kAdmin, series));
         std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
         std::vector<std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>>>
             watches;
         std::vector<std::unique_ptr<grpc::health::v1::Health::Stub>> stubs;
         for (int c = 0; c < connections; ++c) {
           grpc::ChannelArguments args;
           args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection of its own
           stubs.push_back(grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(
               absl::StrCat("127.0.0.1:", t.mesh_->grpc_port(Service::kAdmin, 0)),
               grpc::InsecureChannelCredentials(), args)));
           for (int s = 0; s < 100; ++s) {
             contexts.push_back(std::make_unique<grpc::ClientContext>());
             grpc::health::v1::HealthCheckRequest req;
             watches.push_back(stubs.back()->Watch(contexts.back().get(), req));
           }
         }
         int served = 0;
         for (auto& w : watches) {
           grpc::health::v1::HealthCheckResponse r;
           served += w->Read(&r);
         }
         const int64_t rss = Rss(t.mesh_->Pid(Service::kAdmin, 0));
         EXPECT_EQ(served, kHealthWatches) << "--health-max-watches";
         EXPECT_EQ(t.Metric(Service::kAdmin, series) - before, connections * 100 - kHealthWatches)
             << series;
         for (auto& c : contexts) c->TryCancel();
         for (auto& w : watches) (void)w->Finish();
         return absl::StrCat(connections, " connections x 100 watches: ", served, " served, ",
                             connections * 100 - served, " refused RESOURCE_EXHAUSTED (", series,
                             "); Admin RSS ", rss >> 20, " MiB");
       }},
      {"unauthenticated connection", "call every read without a token",
       [](T& t, std::mt19937_64&) {
         auto stub = admin::v1::AdminService::NewStub(t.mesh_->Channel(Service::kAdmin, 0));
         int refused = 0;
         for (int i = 0; i < 3; ++i) {
           grpc::ClientContext ctx;
           grpc::Status s;
           if (i == 0) {
             admin::v1::QueryAuditLogsResponse r;
             s = stub->QueryAuditLogs(&ctx, {}, &r);
           } else if (i == 1) {
             admin::v1::AuditLog r;
             admin::v1::GetAuditLogRequest req;
             req.set_event_id("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c");
             s = stub->GetAuditLog(&ctx, req, &r);
           } else {
             admin::v1::PipelineStatus r;
             s = stub->GetPipelineStatus(&ctx, {}, &r);
           }
           refused += s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
         }
         EXPECT_EQ(refused, 3);
         return absl::StrCat(refused, " of 3 reads refused UNAUTHENTICATED");
       }},
  };
}

TEST_F(AdversaryTest, OneCredentialAtATimeNeitherLosesNorStarvesTheHonest) {
  const uint64_t seed = Seed();
  std::printf("[adversary] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  std::vector<Action> rounds = Catalogue();
  std::shuffle(rounds.begin(), rounds.end(), rng);

  HonestLoad honest(*mesh_);
  honest.Start();
  // Warm up (the first checkpoints and cosignatures), then the baseline.
  ASSERT_TRUE(WaitFor(
      [&] {
        return testing::QueryInt(*admin_db_,
                                 "SELECT count(*) FROM log_cosignatures WHERE witness = 'app'") > 0;
      },
      std::chrono::seconds(60)));
  (void)honest.Take();
  absl::SleepFor(absl::Seconds(8));
  const HonestLoad::Window base = honest.Take();
  std::printf("[adversary] baseline: %d writes (p99 %.0f ms), %d reads (p99 %.0f ms) in %s\n",
              base.writes, base.write_p99, base.reads, base.read_p99,
              absl::FormatDuration(base.length).c_str());
  ASSERT_GT(base.writes, 10);

  for (const Action& action : rounds) {
    SCOPED_TRACE(absl::StrCat(action.credential, ": ", action.name));
    (void)honest.Take();
    const absl::Time start = absl::Now();
    const std::string outcome = action.run(*this, rng);
    // The honest load is judged over a whole round, however short the attack.
    absl::SleepFor(start + kRound - absl::Now());
    const HonestLoad::Window w = honest.Take();
    const double rate = w.writes / absl::ToDoubleSeconds(w.length);
    const double base_rate = base.writes / absl::ToDoubleSeconds(base.length);
    const int64_t admin_rss = Rss(mesh_->Pid(Service::kAdmin, 0));
    const int64_t redis_used = RedisUsedMemory();
    std::printf(
        "[adversary] %-28s %-46s | honest %.1f writes/s (x%.2f), p99 %.0f ms, %d reads (p99 %.0f "
        "ms, %d refused) | Admin RSS %lld MiB, Redis %lld MiB | %s\n",
        action.credential, action.name, rate, rate / base_rate, w.write_p99, w.reads, w.read_p99,
        w.refused_reads, static_cast<long long>(admin_rss >> 20),
        static_cast<long long>(redis_used >> 20), outcome.c_str());
    EXPECT_GE(rate, 0.3 * base_rate) << "honest throughput";
    EXPECT_LE(w.write_p99, std::max(5 * base.write_p99, base.write_p99 + 1000)) << "honest p99";
    EXPECT_EQ(w.refused_reads, 0) << "the honest reader was refused";
    EXPECT_LT(admin_rss, int64_t{512} << 20);
    // Redis may pass maxmemory by what one command in flight holds.
    EXPECT_LE(redis_used, kMaxMemory + (64 << 20));
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      EXPECT_TRUE(mesh_->Running(s, 0));
    }
  }
  honest.Stop();

  // Admin's connections are never the ones Redis closes for client memory.
  auto clients = RedisRoot()->Command({"CLIENT", "LIST"});
  ASSERT_TRUE(clients.ok()) << clients.status();
  std::istringstream lines(clients->str());
  int admin_connections = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(absl::StrCat(" user=", mesh_->RedisUser(Service::kAdmin), " ")) ==
        std::string::npos) {
      continue;
    }
    ++admin_connections;
    const size_t flags = line.find(" flags=");
    EXPECT_NE(line.substr(flags + 7, line.find(' ', flags + 7) - flags - 7).find('e'),
              std::string::npos)
        << line;
  }
  EXPECT_GT(admin_connections, 0);

  // Nothing lost, nothing twice: every honest change is one audit row.
  const int users = honest.users(), problems = honest.problems();
  EXPECT_TRUE(WaitFor(
      [&] {
        return testing::QueryInt(*admin_db_,
                                 "SELECT count(*) FROM audit_logs"
                                 " WHERE event_type = 'auth.user.created'") == users &&
               testing::QueryInt(*admin_db_,
                                 "SELECT count(*) FROM audit_logs"
                                 " WHERE event_type = 'app.problem.created'") == problems;
      },
      std::chrono::seconds(120)))
      << users << " users, " << problems << " problems; audit rows: "
      << testing::QueryInt(*admin_db_,
                           "SELECT count(*) FROM audit_logs"
                           " WHERE event_type = 'auth.user.created'")
      << ", "
      << testing::QueryInt(*admin_db_,
                           "SELECT count(*) FROM audit_logs"
                           " WHERE event_type = 'app.problem.created'");
}

}  // namespace
}  // namespace ulticode
