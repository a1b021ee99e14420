// Bounded and visible (issue 12) against real PostgreSQL and Redis: stream
// trimming never passes an entry a group has not acknowledged; retention
// deletes only what is past its time, in batches, one replica at a time, and
// never audit_logs; the backlog gauges, process and pool metrics say what is
// there.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "admin/maintenance/housekeeping.h"
#include "admin/maintenance/stream_trimmer.h"
#include "admin/migrations.h"
#include "common/metrics/metrics.h"
#include "common/metrics/process_collector.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/redis/stream_id.h"
#include "common/retention/retention.h"
#include "gtest/gtest.h"
#include "owner/outbox/housekeeping.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/outbox_store.h"
#include "prometheus/text_serializer.h"
#include "tests/support/metric_text.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using ::ulticode::testing::QueryInt;
using ::ulticode::testing::WaitFor;

std::string Text(prometheus::Registry& registry) { return testing::MetricText(registry); }
using testing::MetricValue;
double Value(const std::string& text, const std::string& series) {
  return MetricValue(text, series);
}

void Exec(pg::Connection& conn, const std::string& sql) {
  auto r = conn.Execute(pg::Statement{"", sql.c_str()}, {});
  ASSERT_TRUE(r.ok()) << sql << ": " << r.status();
}

// --- streams ---------------------------------------------------------------

class StreamTrimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_REDIS(endpoint);
    options_.host = endpoint.host;
    options_.port = endpoint.port;
    options_.user = endpoint.user;
    options_.password = endpoint.password;
    client_ = std::make_unique<redis::Client>(options_);
    stream_ = "test:trim:" + ::ulticode::testing::RandomSuffix();
    for (int i = 0; i < 10; ++i) {
      auto id = client_->XAddBatch(stream_, {{{"n", absl::StrCat(i)}}});
      ASSERT_TRUE(id.ok()) << id.status();
      ids_.push_back((*id)[0]);
    }
  }
  void TearDown() override {
    if (client_) (void)client_->Command({"DEL", stream_});
  }

  // Group `group` reads `read` entries and acknowledges the first `ack`.
  void Consume(const std::string& group, int read, int ack) {
    auto r = client_->XReadGroup(group, "c", {stream_}, read, absl::ZeroDuration(), ">");
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<std::string> acks(ids_.begin(), ids_.begin() + ack);
    if (!acks.empty()) {
      ASSERT_TRUE(client_->XAck(stream_, group, acks).ok());
    }
  }
  std::vector<std::string> Remaining() {
    auto entries = client_->XRead(stream_, 100, absl::ZeroDuration(), "0");
    std::vector<std::string> out;
    if (entries.ok()) {
      for (const auto& e : *entries) out.push_back(e.id);
    }
    return out;
  }

  redis::Options options_;
  std::unique_ptr<redis::Client> client_;
  std::string stream_;
  std::vector<std::string> ids_;
};

TEST_F(StreamTrimTest, ALaggingGroupKeepsItsEntriesAndAnAcknowledgedPrefixGoes) {
  // No group yet: nobody has read the stream, nothing may go.
  auto untouched = admin::maintenance::TrimStream(*client_, stream_);
  ASSERT_TRUE(untouched.ok()) << untouched.status();
  EXPECT_EQ(untouched->removed, 0);
  ASSERT_TRUE(client_->XGroupCreate(stream_, "fast", "0", false).ok());
  ASSERT_TRUE(client_->XGroupCreate(stream_, "slow", "0", false).ok());
  Consume("fast", 10, 6);  // entries 7..10 delivered, not acknowledged
  Consume("slow", 3, 3);   // read and acknowledged 1..3 only

  auto first = admin::maintenance::TrimStream(*client_, stream_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->removed, 3) << "up to the slow group's last delivered entry";
  EXPECT_EQ(Remaining(), std::vector<std::string>(ids_.begin() + 3, ids_.end()));

  Consume("slow", 10, 10);  // the slow group catches up completely
  auto second = admin::maintenance::TrimStream(*client_, stream_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->min_id, ids_[6]) << "the fast group's oldest pending entry stays";
  EXPECT_EQ(Remaining(), std::vector<std::string>(ids_.begin() + 6, ids_.end()));

  ASSERT_TRUE(client_->XAck(stream_, "fast", {ids_.begin() + 6, ids_.end()}).ok());
  auto third = admin::maintenance::TrimStream(*client_, stream_);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(Remaining().empty()) << "everything acknowledged by every group is gone";
  // New entries after the trim are kept until read.
  ASSERT_TRUE(client_->XAddBatch(stream_, {{{"n", "late"}}}).ok());
  ASSERT_TRUE(admin::maintenance::TrimStream(*client_, stream_).ok());
  EXPECT_EQ(Remaining().size(), 1u);
}

TEST_F(StreamTrimTest, GaugesReportLengthLagPendingAndOldestIdle) {
  ASSERT_TRUE(client_->XGroupCreate(stream_, "admin-audit", "0", false).ok());
  Consume("admin-audit", 4, 1);  // 3 pending, 6 unread
  auto metrics = metrics::Metrics::Unexposed("test");
  admin::maintenance::StreamMaintenance streams({{audit::v1::OWNER_AUTH, stream_}}, options_,
                                                metrics->registry());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // some idle time to measure
  ASSERT_TRUE(streams.Sample().ok());
  const std::string text = Text(metrics->registry());
  const std::string labels = "{group=\"admin-audit\",stream=\"" + stream_ + "\"}";
  EXPECT_EQ(Value(text, "ulticode_stream_length{stream=\"" + stream_ + "\"}"), 10) << text;
  EXPECT_EQ(Value(text, "ulticode_stream_group_lag" + labels), 6) << text;
  EXPECT_EQ(Value(text, "ulticode_stream_group_pending" + labels), 3) << text;
  EXPECT_GE(Value(text, "ulticode_stream_group_oldest_pending_idle_seconds" + labels), 0.05)
      << text;
  ASSERT_TRUE(streams.Trim().ok());
  EXPECT_EQ(Remaining().size(), 9u) << "only the acknowledged first entry goes";
}

TEST(StreamIdTest, ComparesNumericallyAndSteps) {
  EXPECT_TRUE(redis::StreamIdLess("9-5", "10-0"));
  EXPECT_TRUE(redis::StreamIdLess("10-2", "10-10"));
  EXPECT_FALSE(redis::StreamIdLess("10-10", "10-2"));
  EXPECT_EQ(redis::NextStreamId("5-3"), "5-4");
  EXPECT_EQ(redis::NextStreamId("0-0"), "0-1");
}

// --- owner: outbox retention and gauges ------------------------------------

class OutboxHousekeepingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    connect_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "housekeep"));
    auto conn = pg::Connection::Connect(connect_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, outbox::Migrations()).ok());
    metrics_ = metrics::Metrics::Unexposed("test");
  }

  // A row in `state`, created `age` ago (confirmed / published then too).
  void Row(const std::string& state, const std::string& age) {
    Exec(*conn_,
         "INSERT INTO audit_outbox (event_id, event_type, payload, mac, key_id, state, created_at,"
         " next_attempt_at, published_at, confirmed_at) VALUES (gen_random_uuid(),"
         " 'auth.user.created', '\\x00', decode(repeat('00', 32), 'hex'), 'k', '" +
             state + "', now() - interval '" + age + "', now() - interval '" + age +
             "', CASE WHEN '" + state + "' IN ('PUBLISHED', 'CONFIRMED') THEN now() - interval '" +
             age + "' END, CASE WHEN '" + state + "' = 'CONFIRMED' THEN now() - interval '" + age +
             "' END)");
  }
  void Key(const std::string& id, const std::string& age) {
    Exec(*conn_,
         "INSERT INTO idempotency_keys (principal, request_id, method, request_sha256,"
         " response, created_at) VALUES ('p', '" +
             id +
             "', 'M', '\\x00', '\\x00', now() -"
             " interval '" +
             age + "')");
  }
  int64_t Count(const std::string& where) {
    return QueryInt(*conn_, "SELECT count(*) FROM audit_outbox WHERE " + where);
  }

  pg::ConnectOptions connect_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

TEST_F(OutboxHousekeepingTest, RetentionDeletesOnlyOldConfirmedRowsAndOldKeysInBatches) {
  for (int i = 0; i < 5; ++i) Row("CONFIRMED", "8 days");
  Row("CONFIRMED", "6 days");
  Row("PUBLISHED", "30 days");  // unconfirmed: work, never deleted
  Row("PENDING", "30 days");
  Row("DEAD", "30 days");  // evidence, never deleted
  Key("old", "25 hours");
  Key("new", "23 hours");
  retention::Retention retention(outbox::RetentionTables({}), /*batch_size=*/2,
                                 metrics_->registry());
  ASSERT_TRUE(retention.RunOnce(*conn_, [] { return false; }).ok());
  EXPECT_EQ(Count("state = 'CONFIRMED'"), 1) << "the 6-day-old row stays (7 d retention)";
  EXPECT_EQ(Count("state <> 'CONFIRMED'"), 3);
  EXPECT_EQ(QueryInt(*conn_, "SELECT count(*) FROM idempotency_keys WHERE request_id = 'new'"), 1);
  EXPECT_EQ(QueryInt(*conn_, "SELECT count(*) FROM idempotency_keys"), 1);
  const std::string text = Text(metrics_->registry());
  EXPECT_EQ(Value(text, "ulticode_retention_deleted_rows_total{table=\"audit_outbox\"}"), 5);
  EXPECT_EQ(Value(text, "ulticode_retention_deleted_rows_total{table=\"idempotency_keys\"}"), 1);
  EXPECT_GT(Value(text, "ulticode_retention_last_run_timestamp_seconds{table=\"audit_outbox\"}"),
            1.7e9);
}

TEST_F(OutboxHousekeepingTest, RetentionLeavesATableToTheReplicaHoldingItsLock) {
  for (int i = 0; i < 3; ++i) Row("CONFIRMED", "8 days");
  auto other = pg::Connection::Connect(connect_);
  ASSERT_TRUE(other.ok());
  auto tx = (*other)->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(tx->Execute(pg::Statement{"hold",
                                        "SELECT pg_advisory_xact_lock(hashtextextended("
                                        "'ulticode.retention.audit_outbox', 0))"},
                          {})
                  .ok());
  retention::Retention retention(outbox::RetentionTables({}), 2, metrics_->registry());
  ASSERT_TRUE(retention.RunOnce(*conn_, [] { return false; }).ok());
  EXPECT_EQ(Count("true"), 3) << "another replica holds the table: nothing deleted here";
  EXPECT_EQ(Value(Text(metrics_->registry()),
                  "ulticode_retention_last_run_timestamp_seconds{table=\"audit_outbox\"}"),
            0);
  ASSERT_TRUE(tx->Rollback().ok());
  ASSERT_TRUE(retention.RunOnce(*conn_, [] { return false; }).ok());
  EXPECT_EQ(Count("true"), 0);
}

// A Replay that re-queues a row while retention is deleting it wins: the
// DELETE waits on the row lock, then re-checks the row as committed (PENDING)
// and leaves it. Deterministic: the Replay holds its lock until retention is
// seen waiting on it.
TEST_F(OutboxHousekeepingTest, RetentionNeverDeletesARowAConcurrentReplayRequeued) {
  Row("CONFIRMED", "8 days");
  auto replay_conn = pg::Connection::Connect(connect_);
  ASSERT_TRUE(replay_conn.ok());
  auto replay = (*replay_conn)->Begin();
  ASSERT_TRUE(replay.ok());
  ASSERT_TRUE(replay
                  ->Execute(pg::Statement{"requeue",
                                          "UPDATE audit_outbox SET state = 'PENDING',"
                                          " next_attempt_at = now(), attempts = 0"
                                          " WHERE state = 'CONFIRMED'"},
                            {})
                  .ok());
  auto retention_conn = pg::Connection::Connect(connect_);
  ASSERT_TRUE(retention_conn.ok());
  const int pid = (*retention_conn)->backend_pid();
  int64_t deleted = -1;
  std::thread retention([&] {
    deleted =
        ::ulticode::testing::QueryInt(**retention_conn, "SELECT outbox_retention(604800, 100)");
  });
  const bool waiting = ::ulticode::testing::WaitFor(
      [&] {
        return QueryInt(*conn_, absl::StrCat("SELECT count(*) FROM pg_stat_activity WHERE pid = ",
                                             pid, " AND wait_event_type = 'Lock'")) == 1;
      },
      std::chrono::seconds(10));
  ASSERT_TRUE(replay->Commit().ok());
  retention.join();
  ASSERT_TRUE(waiting) << "retention never waited on the replayed row";
  EXPECT_EQ(deleted, 0);
  EXPECT_EQ(Count("state = 'PENDING'"), 1) << "the re-queued row was deleted";
}

TEST_F(OutboxHousekeepingTest, GaugesCountEachStateAndTheOldestAges) {
  Row("PENDING", "90 seconds");
  Row("PENDING", "10 seconds");
  Row("PUBLISHED", "300 seconds");
  Row("DEAD", "1 day");
  for (int i = 0; i < 3; ++i) Row("CONFIRMED", "1 hour");
  Exec(*conn_, "ANALYZE audit_outbox");  // the CONFIRMED estimate comes from the row estimate
  outbox::OutboxGauges gauges(audit::v1::OWNER_AUTH, metrics_->registry());
  ASSERT_TRUE(gauges.Sample(*conn_).ok());
  const std::string text = Text(metrics_->registry());
  auto rows = [&](const char* state) {
    return Value(text, absl::StrCat("ulticode_outbox_rows{owner=\"auth\",state=\"", state, "\"}"));
  };
  EXPECT_EQ(rows("PENDING"), 2) << text;
  EXPECT_EQ(rows("PUBLISHED"), 1);
  EXPECT_EQ(rows("DEAD"), 1);
  EXPECT_EQ(rows("CONFIRMED"), 3);
  const double pending_age =
      Value(text, "ulticode_outbox_oldest_pending_age_seconds{owner=\"auth\"}");
  EXPECT_GE(pending_age, 90);
  EXPECT_LT(pending_age, 150);
  const double unconfirmed_age =
      Value(text, "ulticode_outbox_oldest_unconfirmed_age_seconds{owner=\"auth\"}");
  EXPECT_GE(unconfirmed_age, 300);
  EXPECT_LT(unconfirmed_age, 360);
}

// --- Admin: inbox retention and gauges ------------------------------------

class InboxHousekeepingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    connect_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "inboxkeep"));
    auto conn = pg::Connection::Connect(connect_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, admin::Migrations()).ok());
    metrics_ = metrics::Metrics::Unexposed("test");
  }
  // An inbox row in `status`, received `age` ago (processed, leased or
  // failed then too).
  void Row(const std::string& status, const std::string& age) {
    const std::string at = "now() - interval '" + age + "'";
    Exec(*conn_,
         "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload,"
         " payload_sha256, stream, stream_entry_id, status, received_at, next_retry_at,"
         " processed_at, leased_at, first_failed_at) VALUES ('audit_logs', gen_random_uuid(),"
         " 'auth', 'auth.user.created', '\\x00', '\\x00', 's', '1-1', '" +
             status + "', " + at + ", " + at + ", CASE WHEN '" + status + "' = 'PROCESSED' THEN " +
             at + " END, CASE WHEN '" + status + "' = 'PROCESSING' THEN " + at +
             " END, CASE WHEN '" + status + "' = 'PENDING' THEN " + at + " END)");
  }
  void Poison(const std::string& age) {
    Exec(*conn_,
         "INSERT INTO poison_events (consumer, stream, stream_entry_id, reason, detail,"
         " fields, received_at) VALUES ('audit_logs', 's', gen_random_uuid()::text,"
         " 'too_large', 'd', '[]', now() - interval '" +
             age + "')");
  }
  int64_t Count(const std::string& sql) { return QueryInt(*conn_, sql); }

  pg::ConnectOptions connect_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

TEST_F(InboxHousekeepingTest, RetentionDeletesOldProcessedRowsAndPoisonNeverAuditLogs) {
  for (int i = 0; i < 3; ++i) Row("PROCESSED", "31 days");
  Row("PROCESSED", "29 days");
  Row("PENDING", "60 days");
  Row("DEAD", "60 days");
  Poison("91 days");
  Poison("89 days");
  Exec(*conn_,
       "INSERT INTO audit_logs (event_id, owner, event_type, actor, action, entity_type,"
       " entity_id, occurred_at, envelope, seal, key_id, ingested_at) VALUES"
       " (gen_random_uuid(), 'auth', 'auth.user.created', 'a', 'create', 'user', 'u',"
       " now() - interval '10 years', '\\x00',"
       " decode('01' || '00000000' || '00000001' || repeat('73', 64), 'hex'), 'k1',"
       " now() - interval '10 years')");
  retention::Retention retention(admin::maintenance::RetentionTables({}), 2, metrics_->registry());
  ASSERT_TRUE(retention.RunOnce(*conn_, [] { return false; }).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM consumer_inbox WHERE status = 'PROCESSED'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM consumer_inbox WHERE status <> 'PROCESSED'"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM poison_events"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM audit_logs"), 1) << "audit_logs is never deleted";
}

// The Admin runtime role may call poison_retention with any arguments:
// unresolved poison (evidence nobody has looked at) still outlives the alert.
TEST_F(InboxHousekeepingTest, NoCallerDeletesUnresolvedPoisonBeforeThirtyDays) {
  Poison("2 days");
  Poison("31 days");
  Poison("2 days");
  Exec(*conn_,
       "UPDATE poison_events SET resolved_at = now() WHERE id = (SELECT max(id) FROM"
       " poison_events)");
  EXPECT_EQ(Count("SELECT poison_retention(0, 100)"), 2) << "the resolved one and the 31-day one";
  EXPECT_EQ(Count("SELECT count(*) FROM poison_events WHERE resolved_at IS NULL"), 1);
}

TEST_F(InboxHousekeepingTest, GaugesCountEachStatusTheOldestAgesAndThePoison) {
  Row("PENDING", "120 seconds");
  Row("PENDING", "5 seconds");
  Row("PROCESSING", "40 seconds");
  Row("DEAD", "1 day");
  Poison("1 hour");
  admin::maintenance::InboxGauges gauges("audit_logs", metrics_->registry());
  ASSERT_TRUE(gauges.Sample(*conn_).ok());
  const std::string text = Text(metrics_->registry());
  EXPECT_EQ(Value(text, "ulticode_inbox_rows{status=\"PENDING\"}"), 2) << text;
  EXPECT_EQ(Value(text, "ulticode_inbox_rows{status=\"PROCESSING\"}"), 1);
  EXPECT_EQ(Value(text, "ulticode_inbox_rows{status=\"DEAD\"}"), 1);
  EXPECT_EQ(Value(text, "ulticode_poison_entries"), 1);
  const double pending = Value(text, "ulticode_inbox_oldest_pending_age_seconds");
  EXPECT_GE(pending, 120);
  EXPECT_LT(pending, 180);
  EXPECT_GE(Value(text, "ulticode_inbox_oldest_lease_age_seconds"), 40);
  EXPECT_GE(Value(text, "ulticode_inbox_oldest_retry_age_seconds"), 120);
}

TEST(InboxRetentionRuleTest, AnInboxRetentionShorterThanEveryResendIsRefused) {
  admin::maintenance::AdminHousekeepingOptions options;
  options.inbox_retention = absl::Hours(47);
  absl::Status s = admin::maintenance::CheckRetention(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--inbox-retention=47h"), std::string::npos) << s;
  options.inbox_retention = absl::Hours(48);
  EXPECT_TRUE(admin::maintenance::CheckRetention(options).ok());
}

// --- process and pool ------------------------------------------------------

TEST(ProcessCollectorTest, ReportsThisProcess) {
  std::vector<std::string> keep(2000, "x");  // some memory in use
  auto families = metrics::ProcessCollector().Collect();
  std::map<std::string, double> v;
  for (const auto& f : families) {
    v[f.name] = f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                          : f.metric[0].gauge.value;
  }
  EXPECT_GT(v["process_resident_memory_bytes"], 1 << 20);
  EXPECT_GE(v["process_virtual_memory_bytes"], v["process_resident_memory_bytes"]);
  EXPECT_GT(v["process_cpu_seconds_total"], 0);
  EXPECT_GE(v["process_open_fds"], 3);
  EXPECT_GT(v["process_max_fds"], v["process_open_fds"]);
  EXPECT_GE(v["process_threads"], 1);
  const double now = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_LE(v["process_start_time_seconds"], now + 1);
  EXPECT_GT(v["process_start_time_seconds"], now - 3600) << "this test started recently";
}

TEST(PoolMetricsTest, InUseIdleWaitersAndAcquireTime) {
  ULTI_REQUIRE_PG(pg);
  auto metrics = metrics::Metrics::Unexposed("test");
  pg::PoolOptions options;
  options.connect.conninfo = pg.ConnInfo("postgres");
  options.max_size = 1;
  options.acquire_timeout = absl::Seconds(10);
  options.registry = &metrics->registry();
  options.name = "test";
  pg::Pool pool(options);
  std::optional<pg::PooledConnection> held;
  {
    auto c = pool.Acquire();
    ASSERT_TRUE(c.ok()) << c.status();
    held.emplace(std::move(c).value());
  }
  std::thread waiter([&] { EXPECT_TRUE(pool.Acquire().ok()); });
  EXPECT_TRUE(WaitFor(
      [&] {
        return Value(Text(metrics->registry()), "ulticode_pg_pool_waiters{pool=\"test\"}") == 1;
      },
      std::chrono::seconds(5)));
  const std::string busy = Text(metrics->registry());
  EXPECT_EQ(Value(busy, "ulticode_pg_pool_connections{pool=\"test\",state=\"in_use\"}"), 1);
  EXPECT_EQ(Value(busy, "ulticode_pg_pool_max_connections{pool=\"test\"}"), 1);
  held.reset();
  waiter.join();
  const std::string done = Text(metrics->registry());
  EXPECT_EQ(Value(done, "ulticode_pg_pool_waiters{pool=\"test\"}"), 0);
  EXPECT_EQ(Value(done, "ulticode_pg_pool_connections{pool=\"test\",state=\"idle\"}"), 1);
  EXPECT_EQ(Value(done, "ulticode_pg_pool_acquire_seconds_count{pool=\"test\"}"), 2);
}

}  // namespace
}  // namespace ulticode
