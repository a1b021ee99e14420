// common/pg against a real PostgreSQL 15.
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/match.h"
#include "common/pg/connection.h"
#include "common/pg/errors.h"
#include "common/pg/pool.h"
#include "gtest/gtest.h"
#include "tests/support/pg_server.h"
#include "tests/support/test_env.h"

namespace ulticode::pg {
namespace {

using ::ulticode::testing::CreateScratchDatabase;

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    pg_ = pg;
    db_ = CreateScratchDatabase(pg, "pgtest");
    options_.conninfo = pg.ConnInfo(db_);
    auto conn = Connection::Connect(options_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(
        conn_
            ->ExecuteScript("schema",
                            "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, "
                            "blob bytea, at timestamptz);",
                            absl::Seconds(5))
            .ok());
  }

  int64_t Count() {
    auto r = conn_->Execute({"count", "SELECT count(*) FROM items"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->GetInt64(0, 0) : -1;
  }

  std::unique_ptr<Connection> Admin() {
    ConnectOptions o;
    o.conninfo = pg_.ConnInfo(db_);
    auto c = Connection::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(c).value();
  }

  ::ulticode::testing::PgEndpoint pg_;
  std::string db_;
  ConnectOptions options_;
  std::unique_ptr<Connection> conn_;
};

constexpr Statement kInsert{"insert_item",
                            "INSERT INTO items (id, name, blob, at) VALUES ($1, $2, $3, $4)"};

TEST_F(PgTest, ParametersRoundTripBinarySafe) {
  const std::string blob("a\0b'\"\\\r\n", 9);
  const absl::Time at = absl::FromUnixMicros(1'700'000'000'123'456);
  ASSERT_TRUE(
      conn_
          ->Execute(kInsert, {Int(1), Text("Robert'); DROP TABLE items;--"), Bytes(blob), Time(at)})
          .ok());
  auto r = conn_->Execute({"get", "SELECT id, name, blob, at FROM items WHERE id = $1"}, {Int(1)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows(), 1);
  EXPECT_EQ(r->GetInt64(0, 0), 1);
  EXPECT_EQ(r->GetString(0, 1), "Robert'); DROP TABLE items;--");
  EXPECT_EQ(r->GetBytes(0, 2), blob);
  EXPECT_EQ(r->GetTime(0, 3), at);
}

TEST_F(PgTest, EachSqlTextIsPreparedOncePerConnection) {
  const Statement insert{"items.insert", "INSERT INTO items (id, name) VALUES ($1, $2)"};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(conn_->Execute(insert, {Int(i), Text("n")}).ok());
  }
  // The same name with another text is another statement, never confused.
  const Statement other{"items.insert", "SELECT count(*) FROM items WHERE id >= $1"};
  auto r = conn_->Execute(other, {Int(0)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->GetInt64(0, 0), 5);
  const Statement prepared{"prepared", "SELECT count(*) FROM pg_prepared_statements"};
  auto count = conn_->Execute(prepared);
  ASSERT_TRUE(count.ok()) << count.status();
  // insert, other, this one (and statement_timeout's, unprepared).
  EXPECT_EQ(count->GetInt64(0, 0), 3);
}

TEST_F(PgTest, TransactionDestroyedUncommittedRollsBack) {
  {
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    ASSERT_TRUE(tx->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
    // No Commit(): the destructor must roll back.
  }
  EXPECT_EQ(Count(), 0);
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(tx->Execute(kInsert, {Int(2), Text("b"), Null(), Null()}).ok());
  ASSERT_TRUE(tx->Commit().ok());
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgTest, CommitAfterFailedStatementReportsAborted) {
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(tx->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  EXPECT_FALSE(tx->Execute(kInsert, {Int(1), Text("dup"), Null(), Null()}).ok());
  absl::Status s = tx->Commit();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(Count(), 0);
}

TEST_F(PgTest, UniqueViolationMapsToAlreadyExistsAndRetryable) {
  ASSERT_TRUE(conn_->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  auto r = conn_->Execute(kInsert, {Int(1), Text("b"), Null(), Null()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(SqlState(r.status()), "23505");
  EXPECT_TRUE(IsUniqueViolation(r.status()));
  EXPECT_TRUE(IsRetryable(r.status()));
  EXPECT_FALSE(conn_->broken());
}

TEST_F(PgTest, NotNullViolationIsFailedPrecondition) {
  auto r = conn_->Execute(kInsert, {Int(1), Null(), Null(), Null()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(SqlState(r.status()), "23502");
  EXPECT_FALSE(IsRetryable(r.status()));
}

TEST_F(PgTest, SerializationFailureMapsToAborted) {
  ASSERT_TRUE(conn_->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  auto other = Admin();
  auto t1 = conn_->Begin(Isolation::kSerializable);
  auto t2 = other->Begin(Isolation::kSerializable);
  ASSERT_TRUE(t1.ok() && t2.ok());
  constexpr Statement kRead{"read", "SELECT name FROM items WHERE id = 1"};
  constexpr Statement kWrite{"write", "UPDATE items SET name = $1 WHERE id = 1"};
  ASSERT_TRUE(t1->Execute(kRead).ok());
  ASSERT_TRUE(t2->Execute(kRead).ok());
  ASSERT_TRUE(t1->Execute(kWrite, {Text("t1")}).ok());
  ASSERT_TRUE(t1->Commit().ok());
  auto r = t2->Execute(kWrite, {Text("t2")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_EQ(SqlState(r.status()), "40001");
  EXPECT_TRUE(IsRetryable(r.status()));
}

TEST_F(PgTest, StatementTimeoutMapsToDeadlineExceeded) {
  auto r = conn_->Execute({"sleep", "SELECT pg_sleep(5)", absl::Milliseconds(100)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(SqlState(r.status()), "57014");
  // The connection stays usable, and the next statement gets its own timeout.
  auto ok = conn_->Execute({"sleep_short", "SELECT pg_sleep(0.2)", absl::Seconds(2)});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(PgTest, TerminatedBackendIsUnavailableAndPoolRedials) {
  PoolOptions po;
  po.connect = options_;
  po.max_size = 2;
  Pool pool(po);
  int victim_pid;
  {
    auto c = pool.Acquire();
    ASSERT_TRUE(c.ok());
    victim_pid = (*c)->backend_pid();
  }
  auto admin = Admin();
  ASSERT_TRUE(admin->Execute({"kill", "SELECT pg_terminate_backend($1)"}, {Int(victim_pid)}).ok());
  {
    auto c = pool.Acquire();
    ASSERT_TRUE(c.ok());
    ASSERT_EQ((*c)->backend_pid(), victim_pid);  // the idle, now dead, connection
    auto r = (*c)->Execute({"probe", "SELECT 1"});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_TRUE((*c)->broken());
  }
  EXPECT_EQ(pool.stats().dropped, 1);
  auto c = pool.Acquire();
  ASSERT_TRUE(c.ok());
  EXPECT_NE((*c)->backend_pid(), victim_pid);
  auto r = (*c)->Execute({"probe", "SELECT 1"});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(PgTest, ALockWaitEndsAtTheLockTimeoutAsARetryableAbort) {
  ASSERT_TRUE(conn_->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  auto holder = conn_->Begin();  // holds the row, as a frozen replica would
  ASSERT_TRUE(holder.ok());
  ASSERT_TRUE(holder->Execute({"hold", "SELECT 1 FROM items WHERE id = 1 FOR UPDATE"}).ok());
  ConnectOptions o = options_;
  o.lock_timeout = absl::Milliseconds(200);
  auto waiter = Connection::Connect(o);
  ASSERT_TRUE(waiter.ok());
  const absl::Time start = absl::Now();
  auto r = (*waiter)->Execute({"wait", "UPDATE items SET name = 'b' WHERE id = 1"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_TRUE(IsRetryable(r.status()));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << "waited beyond the lock timeout";
}

// Alone, or pipelined behind a deferred statement.
TEST_F(PgTest, ConnectionLostDuringCommitIsOutcomeUnknown) {
  for (const bool deferred : {false, true}) {
    SCOPED_TRACE(deferred ? "pipelined COMMIT" : "COMMIT alone");
    auto conn = Connection::Connect(options_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    auto tx = (*conn)->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(tx->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
    auto admin = Admin();
    ASSERT_TRUE(
        admin->Execute({"kill", "SELECT pg_terminate_backend($1)"}, {Int((*conn)->backend_pid())})
            .ok());
    if (deferred) tx->Defer(kInsert, {Int(2), Text("b"), Null(), Null()});
    absl::Status s = tx->Commit();
    EXPECT_TRUE(IsCommitOutcomeUnknown(s)) << s;
    EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
    EXPECT_FALSE(IsRetryable(s));
    EXPECT_EQ(Count(), 0);
  }
}

// The round trips a connection made while `f` ran: the Sync messages it
// sent, from libpq's protocol trace.
template <typename F>
int RoundTrips(Connection& conn, F&& f) {
  std::FILE* trace = std::tmpfile();
  PQtrace(conn.raw(), trace);
  f();
  PQuntrace(conn.raw());
  std::rewind(trace);
  int syncs = 0;
  char line[4096];
  while (std::fgets(line, sizeof line, trace) != nullptr) {
    const std::string l(line);
    if (l.find("\tF\t") != std::string::npos && l.find("\tSync") != std::string::npos) ++syncs;
  }
  std::fclose(trace);
  return syncs;
}

TEST_F(PgTest, DeferredStatementsGoOutWithTheNextOneInOneRoundTrip) {
  ASSERT_EQ(Count(), 0);  // the session's statement timeout is set
  const int trips = RoundTrips(*conn_, [&] {
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok());
    tx->Defer(kInsert, {Int(1), Text("a"), Null(), Null()});
    tx->Defer(kInsert, {Int(2), Text("b"), Null(), Null()});
    auto seen = tx->Execute({"count_in_tx", "SELECT count(*) FROM items"});
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_EQ(seen->GetInt64(0, 0), 2) << "a later statement sees what was deferred";
    tx->Defer(kInsert, {Int(3), Text("c"), Null(), Null()});
    ASSERT_TRUE(tx->Commit().ok());
  });
  EXPECT_EQ(trips, 2) << "BEGIN, two inserts and the count; then an insert and COMMIT";
  EXPECT_EQ(Count(), 3);
}

TEST_F(PgTest, ATransactionThatSentNothingCostsNoRoundTrip) {
  ASSERT_EQ(Count(), 0);
  EXPECT_EQ(RoundTrips(*conn_, [&] { ASSERT_TRUE(conn_->Begin().ok()); }), 0);
  EXPECT_EQ(RoundTrips(*conn_, [&] { ASSERT_TRUE(conn_->Begin()->Commit().ok()); }), 1);
  EXPECT_EQ(Count(), 0);
}

TEST_F(PgTest, ADeferredStatementsErrorIsReportedAtTheNextStatementNamedAfterIt) {
  ASSERT_TRUE(conn_->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  tx->Defer(kInsert, {Int(1), Text("dup"), Null(), Null()});
  auto r = tx->Execute({"count_in_tx", "SELECT count(*) FROM items"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "insert_item: ")) << r.status();
  EXPECT_EQ(tx->Commit().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Count(), 1);
}

TEST_F(PgTest, ADeferredFailureAtCommitCommitsNothingAndLeavesTheConnectionClean) {
  ASSERT_TRUE(conn_->Execute(kInsert, {Int(1), Text("a"), Null(), Null()}).ok());
  {
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(tx->Execute(kInsert, {Int(2), Text("b"), Null(), Null()}).ok());
    tx->Defer(kInsert, {Int(1), Text("dup"), Null(), Null()});
    const absl::Status s = tx->Commit();
    EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "insert_item: ")) << s;
  }
  EXPECT_EQ(Count(), 1) << "row 2 rolled back with the failed insert";
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  tx->Defer(kInsert, {Int(3), Text("c"), Null(), Null()});
  ASSERT_TRUE(tx->Commit().ok());
  EXPECT_EQ(Count(), 2);
}

TEST_F(PgTest, AStatementPreparedInAPipelineIsPreparedOnce) {
  const Statement fresh{"items.fresh", "INSERT INTO items (id, name) VALUES ($1, 'p')"};
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  tx->Defer(fresh, {Int(1)});
  tx->Defer(fresh, {Int(2)});
  ASSERT_TRUE(tx->Commit().ok());
  ASSERT_TRUE(conn_->Execute(fresh, {Int(3)}).ok());
  auto count = conn_->Execute({"prepared", "SELECT count(*) FROM pg_prepared_statements"});
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(count->GetInt64(0, 0), 2);  // fresh and this one
  EXPECT_EQ(Count(), 3);
}

// With synchronous replication, a COMMIT whose wait for the standby is
// cancelled (pg_cancel_backend, a terminated backend) is committed on the
// primary only: it must not be reported as a success (docs/guarantees.md,
// "Topologies"). A session's own statement timeout does not end that wait.
TEST(PgSyncCommitTest, ACommitWhoseStandbyWaitIsCancelledIsNotASuccess) {
  ::ulticode::testing::PgServer server;
  std::string error;
  ASSERT_TRUE(server.Start(&error)) << error;
  ConnectOptions o;
  o.conninfo = server.endpoint().ConnInfo("postgres");
  auto admin = Connection::Connect(o);
  auto conn = Connection::Connect(o);
  ASSERT_TRUE(admin.ok() && conn.ok());
  ASSERT_TRUE(
      (*admin)
          ->ExecuteScript("table", "CREATE TABLE items (id bigint PRIMARY KEY)", absl::Seconds(10))
          .ok());
  // A synchronous standby that never comes: every commit waits. Set before
  // a restart, so the server is in that state once it accepts connections
  // (a reload reaches the backends and the checkpointer at different times).
  ASSERT_TRUE((*admin)
                  ->ExecuteScript("sync", "ALTER SYSTEM SET synchronous_standby_names = 'nobody'",
                                  absl::Seconds(10))
                  .ok());
  ASSERT_TRUE(server.Crash(&error)) << error;  // stop, and start again
  admin = Connection::Connect(o);
  conn = Connection::Connect(o);
  ASSERT_TRUE(admin.ok() && conn.ok());
  const Statement short_insert{"insert", "INSERT INTO items VALUES (1)", absl::Milliseconds(300)};
  auto tx = (*conn)->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(tx->Execute(short_insert, {}).ok());
  absl::Status committed;
  std::thread commit([&] { committed = tx->Commit(); });
  auto waiting = [&] {
    auto r = (*admin)->Execute(
        {"waiting", "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"});
    return r.ok() && r->GetInt64(0, 0) == 1;
  };
  EXPECT_TRUE(::ulticode::testing::WaitFor(waiting, std::chrono::seconds(10)));
  absl::SleepFor(absl::Seconds(1));  // beyond the session's statement timeout, on purpose
  EXPECT_TRUE(waiting()) << "the statement timeout ended the wait for the standby";
  ASSERT_TRUE((*admin)
                  ->Execute({"cancel",
                             "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                             " WHERE wait_event = 'SyncRep'"})
                  .ok());
  commit.join();
  EXPECT_FALSE(committed.ok()) << "a commit the standby never confirmed was reported as done";
  EXPECT_TRUE(IsCommitOutcomeUnknown(committed)) << committed;
  EXPECT_NE(committed.message().find("synchronous standby"), absl::string_view::npos) << committed;
}

TEST_F(PgTest, PoolServesManyThreadsWithinItsBound) {
  PoolOptions po;
  po.connect = options_;
  po.max_size = 3;
  po.acquire_timeout = absl::Seconds(20);
  Pool pool(po);
  std::atomic<int> errors{0};
  std::atomic<int> concurrent{0};
  std::atomic<int> max_concurrent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto c = pool.Acquire();
        if (!c.ok()) {
          ++errors;
          continue;
        }
        int now = ++concurrent;
        int prev = max_concurrent.load();
        while (now > prev && !max_concurrent.compare_exchange_weak(prev, now)) {
        }
        auto r = (*c)->Execute(kInsert, {Int(t * 1000 + i), Text("x"), Null(), Null()});
        if (!r.ok()) ++errors;
        --concurrent;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_LE(max_concurrent.load(), 3);
  EXPECT_LE(pool.stats().dials, 3);
  EXPECT_EQ(Count(), 200);
}

TEST_F(PgTest, PoolAcquireTimesOutWhenExhausted) {
  PoolOptions po;
  po.connect = options_;
  po.max_size = 1;
  po.acquire_timeout = absl::Milliseconds(100);
  Pool pool(po);
  auto held = pool.Acquire();
  ASSERT_TRUE(held.ok());
  auto second = pool.Acquire();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(PgTest, ListenReceivesNotificationOnCommitOnly) {
  auto listener = Admin();
  ASSERT_TRUE(listener->Listen("items_changed").ok());
  EXPECT_FALSE(listener->Listen("Bad-Channel").ok());
  {
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(tx->Execute({"notify", "SELECT pg_notify('items_changed', 'rolled back')"}).ok());
  }
  auto none = listener->WaitForNotifications(absl::Milliseconds(200));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto tx = conn_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(tx->Execute({"notify", "SELECT pg_notify('items_changed', 'hello')"}).ok());
  ASSERT_TRUE(tx->Commit().ok());
  auto got = listener->WaitForNotifications(absl::Seconds(5));
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].channel, "items_changed");
  EXPECT_EQ((*got)[0].payload, "hello");
}

}  // namespace
}  // namespace ulticode::pg
