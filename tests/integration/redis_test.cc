// Integration tests of common/redis against a real Redis: the shared one from
// ULTICODE_TEST_REDIS_HOST/PORT, and throwaway redis-server children for the
// restart, dead-peer and password cases.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/redis/redis_client.h"
#include "common/redis/reply.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace ulticode::redis {
namespace {

namespace ut = ::ulticode::testing;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::StartsWith;

using std::chrono_literals::operator""s;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

bool RedisServerOnPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = std::string(dir) + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

#define REQUIRE_REDIS_SERVER_BINARY()                                                \
  if (!RedisServerOnPath()) {                                                        \
    if (::ulticode::testing::InCi()) FAIL() << "redis-server not on PATH (CI=true)"; \
    GTEST_SKIP() << "redis-server not on PATH";                                      \
  }

// A redis-server child process on its own port; SIGTERM + waitpid on Stop()
// and in the destructor.
class ChildRedis {
 public:
  explicit ChildRedis(std::vector<std::string> extra_args = {})
      : port_(FreePort()), extra_args_(std::move(extra_args)) {}
  ~ChildRedis() { Stop(); }
  ChildRedis(const ChildRedis&) = delete;
  ChildRedis& operator=(const ChildRedis&) = delete;

  int port() const { return port_; }

  // Starts the server on port() and waits until it answers PING (NOAUTH
  // counts as an answer).
  ::testing::AssertionResult Start() {
    if (port_ == 0) return ::testing::AssertionFailure() << "no free port";
    // Bounded as every Redis of the mesh (a test's own --maxmemory, given
    // later, wins).
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--bind",
                                     "127.0.0.1",
                                     "--daemonize",
                                     "no",
                                     "--maxmemory",
                                     "256mb",
                                     "--maxmemory-policy",
                                     "noeviction"};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_ = fork();
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
    if (pid_ == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      execvp("redis-server", argv.data());
      _exit(127);
    }

    bool exited = false;
    Options probe_options;
    probe_options.port = port_;
    probe_options.connect_timeout = absl::Milliseconds(200);
    probe_options.command_timeout = absl::Milliseconds(200);
    const bool ready = ut::WaitFor(
        [&] {
          if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
            exited = true;
            pid_ = -1;
            return true;
          }
          const absl::Status s = Client(probe_options).Ping();
          return s.ok() || s.code() == absl::StatusCode::kUnauthenticated;
        },
        10s);
    if (exited) {
      return ::testing::AssertionFailure()
             << "redis-server exited at start (port " << port_ << " taken?)";
    }
    if (!ready) return ::testing::AssertionFailure() << "redis-server did not answer PING";
    return ::testing::AssertionSuccess();
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int port_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

Options LocalOptions(int port) {
  Options options;
  options.port = port;
  options.connect_timeout = absl::Milliseconds(500);
  options.command_timeout = absl::Seconds(1);
  return options;
}

TEST(RedisAddressTest, ParsesHostAndPort) {
  Options options;
  options.password = "kept";
  ASSERT_TRUE(ParseAddress("redis.internal:6380", &options).ok());
  EXPECT_EQ(options.host, "redis.internal");
  EXPECT_EQ(options.port, 6380);
  EXPECT_EQ(options.password, "kept");

  ASSERT_TRUE(ParseAddress("[::1]:7000", &options).ok());
  EXPECT_EQ(options.host, "::1");
  EXPECT_EQ(options.port, 7000);
}

TEST(RedisAddressTest, RejectsBadAddressesWithAClearMessage) {
  for (const char* bad : {"", "redis", "redis:", ":6379", "redis:abc", "redis:0", "redis:70000",
                          "::1:6379", "redis:63 79"}) {
    Options options;
    const absl::Status s = ParseAddress(bad, &options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), StartsWith("redis address \"")) << bad;
    EXPECT_EQ(options.host, "127.0.0.1") << bad;
    EXPECT_EQ(options.port, 6379) << bad;
  }
}

TEST(RedisErrorTest, MapsErrorPrefixesToCodes) {
  const absl::Status no_group = ErrorReplyToStatus("NOGROUP No such key 's'", "XREADGROUP");
  EXPECT_EQ(no_group.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(no_group.message(), "NOGROUP No such key 's' [XREADGROUP]");
  EXPECT_TRUE(IsNoGroup(no_group));
  EXPECT_FALSE(IsNoGroup(ErrorReplyToStatus("ERR NOGROUP lookalike")));

  const absl::Status busy = ErrorReplyToStatus("BUSYGROUP Consumer Group name already exists");
  EXPECT_EQ(busy.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(IsBusyGroup(busy));

  EXPECT_EQ(ErrorReplyToStatus("WRONGTYPE Operation against a key").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ErrorReplyToStatus("WRONGPASS invalid username-password pair").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ErrorReplyToStatus("NOAUTH Authentication required.").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ErrorReplyToStatus("LOADING Redis is loading the dataset in memory").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(ErrorReplyToStatus("ERR no such key").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrorReplyToStatus("ERR syntax error").code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(IsTransient(absl::UnavailableError("x")));
  EXPECT_TRUE(IsTransient(absl::DeadlineExceededError("x")));
  EXPECT_FALSE(IsTransient(no_group));
}

TEST(RedisReplyTest, DebugStringEscapesBinary) {
  const Reply r = Reply::Array(
      {Reply::Text(Reply::Kind::kString, std::string("a\0\r\n", 4)), Reply::Integer(7), Reply()});
  EXPECT_EQ(r.DebugString(), "[\"a\\x00\\x0d\\x0a\", 7, nil]");
  EXPECT_EQ(r.elements()[1].AsInteger().value(), 7);
  EXPECT_EQ(r.AsString().status().code(), absl::StatusCode::kInternal);
}

TEST(RedisClientTest, ConnectionRefusedIsUnavailable) {
  Client client(LocalOptions(FreePort()));
  const absl::Status s = client.Ping();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(client.connected());
}

TEST(RedisClientTest, NonPositiveTimeoutIsInvalidArgument) {
  Options options;
  options.command_timeout = absl::ZeroDuration();
  EXPECT_EQ(Client(options).Ping().code(), absl::StatusCode::kInvalidArgument);
}

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_REDIS(endpoint);
    options_.host = endpoint.host;
    options_.port = endpoint.port;
    options_.user = endpoint.user;
    options_.password = endpoint.password;
    client_.emplace(options_);
    key_ = "test:redis:" + ut::RandomSuffix();
  }

  void TearDown() override {
    if (client_) (void)client_->Command({"DEL", key_});
  }

  Options options_;
  std::optional<Client> client_;
  std::string key_;
};

TEST_F(RedisTest, BinarySafeRoundTrip) {
  const std::string key = key_ + std::string("\0\r\n", 3);
  const std::string value("a\0b\r\nc\xff\r\n$3\r\n", 14);
  ASSERT_EQ(value.size(), 14u);
  auto set = client_->Command({"SET", key, value});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->kind(), Reply::Kind::kStatus);
  EXPECT_EQ(set->str(), "OK");

  auto get = client_->Command({"GET", key});
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->kind(), Reply::Kind::kString);
  EXPECT_EQ(get->str(), value);

  auto empty = client_->Command({"SET", key, ""});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(client_->Command({"GET", key})->str(), "");
  EXPECT_TRUE(client_->Command({"GET", key + "missing"})->is_nil());
  EXPECT_EQ(client_->Command({"DEL", key})->integer(), 1);
}

TEST_F(RedisTest, ErrorReplyIsAStatusAndKeepsTheConnection) {
  ASSERT_TRUE(client_->Command({"SET", key_, "text"}).ok());
  auto wrong_type = client_->Command({"LPUSH", key_, "x"});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong_type.status().message()), StartsWith("WRONGTYPE"));
  EXPECT_THAT(std::string(wrong_type.status().message()), ::testing::HasSubstr("[LPUSH]"));

  auto not_integer = client_->Command({"INCR", key_});
  EXPECT_EQ(not_integer.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(not_integer.status().message()), StartsWith("ERR"));

  EXPECT_TRUE(client_->connected());
  EXPECT_TRUE(client_->Ping().ok());
  EXPECT_EQ(client_->Command({}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisTest, PipelineKeepsPerCommandErrors) {
  auto results =
      client_->Pipeline({{"SET", key_, "1"}, {"INCR", key_}, {"LPUSH", key_, "x"}, {"GET", key_}});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  EXPECT_EQ((*results)[0]->str(), "OK");
  EXPECT_EQ((*results)[1]->integer(), 2);
  EXPECT_EQ((*results)[2].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*results)[3]->str(), "2");

  auto none = client_->Pipeline({});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_EQ(client_->Pipeline({{"PING"}, {}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisTest, CommandTimeoutDropsTheConnectionAndTheNextCallRedials) {
  Options options = options_;
  options.command_timeout = absl::Milliseconds(200);
  Client client(options);
  ASSERT_TRUE(client.Ping().ok());
  const absl::Time start = absl::Now();
  auto blocked = client.Command({"BLPOP", key_, "3"});
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kDeadlineExceeded) << blocked.status();
  EXPECT_LT(elapsed, absl::Seconds(2));
  EXPECT_FALSE(client.connected());
  EXPECT_TRUE(client.Ping().ok());
  EXPECT_TRUE(client.connected());
}

TEST_F(RedisTest, MovedClientKeepsItsConnection) {
  ASSERT_TRUE(client_->Ping().ok());
  Client moved = std::move(*client_);
  EXPECT_TRUE(moved.connected());
  EXPECT_TRUE(moved.Ping().ok());
  *client_ = std::move(moved);
  EXPECT_TRUE(client_->Ping().ok());
}

TEST_F(RedisTest, GroupCreateWithMkstreamTwice) {
  auto first = client_->XGroupCreate(key_, "g");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  auto second = client_->XGroupCreate(key_, "g");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);

  auto groups = client_->XInfoGroups(key_);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].name, "g");

  auto no_stream = client_->XGroupCreate(key_ + ":none", "g", "0", /*mkstream=*/false);
  EXPECT_FALSE(no_stream.ok());
}

TEST_F(RedisTest, AddReadAckRoundTrip) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  const std::vector<StreamFields> entries = {
      {{"event_id", "e1"}, {"payload", std::string("bin\0\r\n", 6)}},
      {{"event_id", "e2"}},
      {{"event_id", "e3"}, {"a", ""}, {"b", "x"}},
  };
  auto ids = client_->XAddBatch(key_, entries);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_LT((*ids)[0], (*ids)[1]);

  auto read = client_->XReadGroup("g", "c1", {key_}, 10, absl::Seconds(1));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ((*read)[0].stream, key_);
  ASSERT_EQ((*read)[0].entries.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*read)[0].entries[i].id, (*ids)[i]);
    EXPECT_EQ((*read)[0].entries[i].fields, entries[i]);
    EXPECT_FALSE((*read)[0].entries[i].deleted);
  }

  auto pending = client_->XPendingSummary(key_, "g");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->count, 3);
  EXPECT_EQ(pending->smallest_id, (*ids)[0]);
  EXPECT_EQ(pending->largest_id, (*ids)[2]);
  EXPECT_THAT(pending->consumers, ElementsAre(Pair("c1", 3)));

  auto acked = client_->XAck(key_, "g", *ids);
  ASSERT_TRUE(acked.ok()) << acked.status();
  EXPECT_EQ(*acked, 3);
  EXPECT_EQ(client_->XAck(key_, "g", *ids).value(), 0);

  pending = client_->XPendingSummary(key_, "g");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->count, 0);
  EXPECT_FALSE(pending->smallest_id.has_value());
  EXPECT_THAT(pending->consumers, IsEmpty());

  auto again = client_->XReadGroup("g", "c1", {key_}, 10, absl::ZeroDuration());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*again, IsEmpty());
  EXPECT_EQ(client_->XAddBatch(key_, {{}}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RedisTest, BlockingReadOnEmptyStreamReturnsEmptyAfterTheBlockTime) {
  // The block time is longer than the command timeout: the client must
  // extend the socket timeout for this call.
  Options options = options_;
  options.command_timeout = absl::Milliseconds(150);
  Client client(options);
  ASSERT_TRUE(client.XGroupCreate(key_, "g").ok());
  const absl::Time start = absl::Now();
  auto read = client.XReadGroup("g", "c1", {key_}, 10, absl::Milliseconds(500));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, IsEmpty());
  EXPECT_GE(elapsed, absl::Milliseconds(450));
  EXPECT_LT(elapsed, absl::Seconds(3));
  // The normal timeout is back: a server-side block longer than it fails.
  EXPECT_EQ(client.Command({"BLPOP", key_ + ":list", "2"}).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(RedisTest, BlockingReadWakesUpWhenAnEntryArrives) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  absl::StatusOr<std::vector<StreamRead>> read;
  absl::Duration elapsed;
  std::thread reader([&] {
    Client client(options_);
    const absl::Time start = absl::Now();
    read = client.XReadGroup("g", "c1", {key_}, 10, absl::Seconds(10));
    elapsed = absl::Now() - start;
  });
  auto ids = client_->XAddBatch(key_, {{{"k", "v"}}});
  reader.join();
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  ASSERT_EQ((*read)[0].entries.size(), 1u);
  EXPECT_EQ((*read)[0].entries[0].id, (*ids)[0]);
  EXPECT_LT(elapsed, absl::Seconds(5));
}

TEST_F(RedisTest, PendingReadReportsDeletedEntries) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  auto ids = client_->XAddBatch(key_, {{{"n", "1"}}, {{"n", "2"}}});
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(client_->XReadGroup("g", "c1", {key_}, 10, absl::ZeroDuration()).ok());
  ASSERT_EQ(client_->Command({"XDEL", key_, (*ids)[0]})->integer(), 1);

  auto pel = client_->XReadGroup("g", "c1", {key_}, 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(pel.ok()) << pel.status();
  ASSERT_EQ(pel->size(), 1u);
  ASSERT_EQ((*pel)[0].entries.size(), 2u);
  EXPECT_EQ((*pel)[0].entries[0].id, (*ids)[0]);
  EXPECT_TRUE((*pel)[0].entries[0].deleted);
  EXPECT_THAT((*pel)[0].entries[0].fields, IsEmpty());
  EXPECT_EQ((*pel)[0].entries[1].id, (*ids)[1]);
  EXPECT_FALSE((*pel)[0].entries[1].deleted);
  EXPECT_THAT((*pel)[0].entries[1].fields, ElementsAre(Pair("n", "2")));
}

TEST_F(RedisTest, AutoClaimTakesOverAnIdleEntry) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  auto ids = client_->XAddBatch(key_, {{{"job", "a"}}, {{"job", "b"}}});
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto read = client_->XReadGroup("g", "dead-worker", {key_}, 10, absl::ZeroDuration());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 1u);
  ASSERT_EQ(client_->Command({"XDEL", key_, (*ids)[1]})->integer(), 1);

  // Redis 7 reports (and drops from the PEL) pending ids whose entry is gone;
  // 7.0 does so whatever their idle time, so collect them across calls.
  std::vector<std::string> deleted_ids;

  // Not idle long enough yet: nothing moves.
  auto early = client_->XAutoClaim(key_, "g", "rescuer", absl::Seconds(60), "0-0", 10);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_THAT(early->entries, IsEmpty());
  deleted_ids = early->deleted_ids;

  std::optional<AutoClaimResult> claimed;
  ASSERT_TRUE(ut::WaitFor(
      [&] {
        auto r = client_->XAutoClaim(key_, "g", "rescuer", absl::Milliseconds(100), "0-0", 10);
        EXPECT_TRUE(r.ok()) << r.status();
        if (!r.ok()) return false;
        deleted_ids.insert(deleted_ids.end(), r->deleted_ids.begin(), r->deleted_ids.end());
        if (r->entries.empty()) return false;
        claimed = *r;
        return true;
      },
      5s));
  ASSERT_EQ(claimed->entries.size(), 1u);
  EXPECT_EQ(claimed->entries[0].id, (*ids)[0]);
  EXPECT_THAT(claimed->entries[0].fields, ElementsAre(Pair("job", "a")));
  EXPECT_EQ(claimed->next_start, "0-0");
  EXPECT_THAT(deleted_ids, ElementsAre((*ids)[1]));

  auto pending = client_->XPendingSummary(key_, "g");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(pending->count, 1);
  EXPECT_THAT(pending->consumers, ElementsAre(Pair("rescuer", 1)));
}

TEST_F(RedisTest, NoGroupAfterTheStreamIsDeleted) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  ASSERT_TRUE(client_->XAddBatch(key_, {{{"k", "v"}}}).ok());
  ASSERT_EQ(client_->Command({"DEL", key_})->integer(), 1);

  auto read = client_->XReadGroup("g", "c1", {key_}, 10, absl::ZeroDuration());
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(IsNoGroup(read.status())) << read.status();
  EXPECT_THAT(std::string(read.status().message()), StartsWith("NOGROUP"));
  auto blocking = client_->XReadGroup("g", "c1", {key_}, 10, absl::Milliseconds(100));
  EXPECT_TRUE(IsNoGroup(blocking.status())) << blocking.status();
  EXPECT_TRUE(IsNoGroup(client_->XPendingSummary(key_, "g").status()));

  // The cure: recreate the group.
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").value());
  EXPECT_TRUE(client_->XReadGroup("g", "c1", {key_}, 10, absl::ZeroDuration()).ok());
}

TEST_F(RedisTest, InfoFigures) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g").ok());
  auto ids = client_->XAddBatch(
      key_, {{{"n", "1"}}, {{"n", "2"}}, {{"n", "3"}}, {{"n", "4"}}, {{"n", "5"}}});
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(client_->XReadGroup("g", "c1", {key_}, 2, absl::ZeroDuration()).ok());

  auto stream = client_->XInfoStream(key_);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(stream->length, 5);
  EXPECT_EQ(stream->groups, 1);
  EXPECT_EQ(stream->last_generated_id, (*ids)[4]);
  EXPECT_EQ(stream->first_entry_id, (*ids)[0]);
  EXPECT_EQ(stream->last_entry_id, (*ids)[4]);
  EXPECT_EQ(stream->entries_added, 5);

  auto groups = client_->XInfoGroups(key_);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 1u);
  const GroupInfo& g = (*groups)[0];
  EXPECT_EQ(g.name, "g");
  EXPECT_EQ(g.consumers, 1);
  EXPECT_EQ(g.pending, 2);
  EXPECT_EQ(g.last_delivered_id, (*ids)[1]);
  EXPECT_EQ(g.entries_read, 2);
  EXPECT_EQ(g.lag, 3);

  ASSERT_EQ(client_->XAck(key_, "g", {(*ids)[0]}).value(), 1);
  EXPECT_EQ(client_->XInfoGroups(key_).value()[0].pending, 1);

  auto missing = client_->XInfoStream(key_ + ":missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();

  ASSERT_EQ(client_->Command({"XTRIM", key_, "MAXLEN", "0"})->integer(), 5);
  auto empty = client_->XInfoStream(key_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->length, 0);
  EXPECT_FALSE(empty->first_entry_id.has_value());
  EXPECT_EQ(empty->last_generated_id, (*ids)[4]);
}

// A reader with reply limits (Admin reading the owners' streams) never
// builds an entry whose fields pass them: an entry of 2,000 fields and one
// of 600 KB arrive with their id and the reason only; the entries around
// them arrive whole.
TEST_F(RedisTest, BoundedRepliesOmitOversizedEntriesAndKeepTheRest) {
  ASSERT_TRUE(client_->XGroupCreate(key_, "g", "0", true).ok());
  StreamFields many;
  for (int i = 0; i < 2000; ++i) many.emplace_back(absl::StrCat("f", i), "v");
  const std::string big(200 * 1000, 'x');
  const StreamFields large = {{"a", big}, {"b", big}, {"c", big}};
  ASSERT_TRUE(client_->XAddBatch(key_, {{{"k", "1"}}, many, large, {{"k", "2"}}}).ok());

  Options bounded = options_;
  bounded.reply_limits = {
      .max_array_bytes = 300 * 1000, .max_array_elements = 1024, .max_element_bytes = 2 << 20};
  Client reader(bounded);
  auto reads = reader.XReadGroup("g", "c", {key_}, 10, absl::ZeroDuration(), ">");
  ASSERT_TRUE(reads.ok()) << reads.status();
  ASSERT_EQ(reads->size(), 1u);
  const auto& entries = (*reads)[0].entries;
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].fields, (StreamFields{{"k", "1"}}));
  EXPECT_TRUE(entries[1].fields.empty());
  EXPECT_EQ(entries[1].omitted, "4000 elements, over 1024");
  EXPECT_TRUE(entries[2].fields.empty());
  EXPECT_EQ(entries[2].omitted, "6 elements over 300000 bytes");
  EXPECT_EQ(entries[3].fields, (StreamFields{{"k", "2"}}));
  EXPECT_FALSE(entries[1].id.empty());

  // The pending list (re-read after a crash) and XAUTOCLAIM are bounded too.
  auto pending = reader.XReadGroup("g", "c", {key_}, 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  ASSERT_EQ((*pending)[0].entries.size(), 4u);
  EXPECT_EQ((*pending)[0].entries[2].omitted, "6 elements over 300000 bytes");
  auto claimed = reader.XAutoClaim(key_, "g", "other", absl::ZeroDuration(), "0", 10);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->entries.size(), 4u);
  EXPECT_EQ(claimed->entries[1].omitted, "4000 elements, over 1024");

  // Without limits (every other connection) the same entries come whole.
  auto whole = client_->XReadGroup("g", "other", {key_}, 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 1u);
  ASSERT_EQ((*whole)[0].entries.size(), 4u);
  EXPECT_EQ((*whole)[0].entries[1].fields.size(), 2000u);
  EXPECT_EQ((*whole)[0].entries[2].fields, large);
}

// Where Redis lets a single value be larger (proto-max-bulk-len left at its
// 512 MB default), the bounded reader fails the read once the value it is
// receiving passes its limit, instead of buffering all of it; the next call
// dials again.
TEST(RedisBoundedTest, AnElementOverTheLimitFailsTheReadBeforeItIsBuffered) {
  REQUIRE_REDIS_SERVER_BINARY();
  ChildRedis server;
  ASSERT_TRUE(server.Start());
  Client writer(LocalOptions(server.port()));
  ASSERT_TRUE(writer.XAddBatch("s", {{{"payload", std::string(5 << 20, 'x')}}}).ok());
  Options bounded = LocalOptions(server.port());
  bounded.reply_limits.max_element_bytes = 2 << 20;
  Client reader(bounded);
  auto read = reader.XRead("s", 10, absl::ZeroDuration(), "0");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted) << read.status();
  EXPECT_THAT(std::string(read.status().message()),
              ::testing::HasSubstr("a reply element is over 2097152 bytes; set "
                                   "proto-max-bulk-len"));
  EXPECT_TRUE(reader.Ping().ok());
}

TEST(RedisRestartTest, SameClientRecoversAfterServerRestart) {
  REQUIRE_REDIS_SERVER_BINARY();
  ChildRedis server;
  ASSERT_TRUE(server.Start());
  Client client(LocalOptions(server.port()));
  ASSERT_TRUE(client.Command({"SET", "before-restart", "1"}).ok());

  server.Stop();
  ASSERT_TRUE(server.Start());

  // The old connection is dead: the first call may notice that (Unavailable)
  // or, if it redialled already, succeed. The next one must succeed.
  const absl::Status first = client.Ping();
  EXPECT_TRUE(first.ok() || first.code() == absl::StatusCode::kUnavailable) << first;
  const absl::Status second = client.Ping();
  EXPECT_TRUE(second.ok()) << second;
  // It talks to the new server, which started empty.
  auto get = client.Command({"GET", "before-restart"});
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_TRUE(get->is_nil());
}

TEST(RedisRestartTest, CallsFailWhileDownAndSucceedOnceBack) {
  REQUIRE_REDIS_SERVER_BINARY();
  ChildRedis server;
  ASSERT_TRUE(server.Start());
  Client client(LocalOptions(server.port()));
  ASSERT_TRUE(client.Ping().ok());

  server.Stop();
  const absl::Status on_dead_connection = client.Ping();
  EXPECT_EQ(on_dead_connection.code(), absl::StatusCode::kUnavailable) << on_dead_connection;
  EXPECT_FALSE(client.connected());
  const absl::Status redial_refused = client.Ping();
  EXPECT_EQ(redial_refused.code(), absl::StatusCode::kUnavailable) << redial_refused;

  ASSERT_TRUE(server.Start());
  const absl::Status back = client.Ping();
  EXPECT_TRUE(back.ok()) << back;
}

TEST(RedisRestartTest, LargeWriteToADeadServerIsAnErrorNotSigpipe) {
  REQUIRE_REDIS_SERVER_BINARY();
  ChildRedis server;
  ASSERT_TRUE(server.Start());
  Client client(LocalOptions(server.port()));
  ASSERT_TRUE(client.Ping().ok());
  server.Stop();

  // Several write() calls hit the reset connection; without SIGPIPE blocked
  // the test process would die here.
  const std::string big(64 << 20, 'x');
  auto set = client.Command({"SET", "big", big});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kUnavailable) << set.status();
  auto piped = client.Pipeline({{"SET", "big", big}, {"SET", "big2", big}});
  EXPECT_EQ(piped.status().code(), absl::StatusCode::kUnavailable) << piped.status();
}

TEST(RedisAuthTest, PasswordIsCheckedOnConnect) {
  REQUIRE_REDIS_SERVER_BINARY();
  ChildRedis server({"--requirepass", "s3cret"});
  ASSERT_TRUE(server.Start());

  Options wrong = LocalOptions(server.port());
  wrong.password = "not-the-password-42";
  Client wrong_client(wrong);
  const absl::Status refused = wrong_client.Ping();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  EXPECT_THAT(std::string(refused.message()), StartsWith("WRONGPASS"));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("AUTH on connect to 127.0.0.1:" +
                                                                   std::to_string(server.port())));
  EXPECT_THAT(std::string(refused.message()),
              ::testing::Not(::testing::HasSubstr("not-the-password-42")));
  EXPECT_FALSE(wrong_client.connected());

  Client anonymous(LocalOptions(server.port()));
  const absl::Status no_auth = anonymous.Ping();
  EXPECT_EQ(no_auth.code(), absl::StatusCode::kUnauthenticated) << no_auth;
  EXPECT_THAT(std::string(no_auth.message()), StartsWith("NOAUTH"));

  Options right = LocalOptions(server.port());
  right.password = "s3cret";
  EXPECT_TRUE(Client(right).Ping().ok());
  right.user = "default";
  EXPECT_TRUE(Client(right).Ping().ok());
}

}  // namespace
}  // namespace ulticode::redis
