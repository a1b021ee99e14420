// The Admin inbox bridge against real PostgreSQL and Redis: take-over then
// ack, every crash window, poison, conflicts, concurrent re-delivery, and a
// Redis that lost its data.
#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "admin/migrations.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/audit_events.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode::admin::inbox {
namespace {

using ::ulticode::testing::EntryFields;
using ::ulticode::testing::ReplaceEnvelope;
using ::ulticode::testing::SampleEvent;
using ::ulticode::testing::WaitFor;

class InboxBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    options_.pg.conninfo =
        pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "bridgetest"));
    auto conn = pg::Connection::Connect(options_.pg);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, admin::Migrations()).ok());
    stream_ = "test:audit:auth:" + ::ulticode::testing::RandomSuffix();
    options_.streams = {{audit::v1::OWNER_AUTH, stream_}};
    options_.group = "admin-audit";
    options_.consumer_name = "bridge-a";
    options_.block = absl::Milliseconds(50);
    options_.claim_idle = absl::Seconds(30);
    options_.redis.host = redis.host;
    options_.redis.port = redis.port;
    options_.redis.user = redis.user;
    options_.redis.password = redis.password;
    options_.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    options_.keys = &::ulticode::testing::SharedTestKeys().directory_file();
    metrics_ = metrics::Metrics::Unexposed("test");
    redis_ = std::make_unique<redis::Client>(options_.redis);
  }

  StreamCursor Cursor() {
    StreamCursor c;
    c.owner = audit::v1::OWNER_AUTH;
    c.stream = stream_;
    return c;
  }

  std::string Add(const redis::StreamFields& fields) {
    auto ids = redis_->XAddBatch(stream_, {fields});
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? (*ids)[0] : "";
  }

  int64_t Scalar(const std::string& sql) { return ::ulticode::testing::QueryInt(*conn_, sql); }

  int64_t Pending() {
    auto p = redis_->XPendingSummary(stream_, options_.group);
    return p.ok() ? p->count : -1;
  }

  // Entries pending with `consumer`.
  int64_t HeldBy(const std::string& consumer) {
    auto p = redis_->XPendingSummary(stream_, options_.group);
    if (!p.ok()) return -1;
    for (const auto& [name, n] : p->consumers)
      if (name == consumer) return n;
    return 0;
  }

  // Runs cycles until `done` holds (each cycle blocks at most options_.block).
  bool RunUntil(InboxBridge& bridge, StreamCursor& cursor, const std::function<bool()>& done) {
    return WaitFor(
        [&] {
          auto c = bridge.RunOnce(*conn_, *redis_, cursor);
          return done();
        },
        std::chrono::seconds(10));
  }

  BridgeOptions options_;
  std::string stream_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<redis::Client> redis_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

TEST_F(InboxBridgeTest, TakesOverValidEntriesIntoTheInboxThenAcknowledges) {
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i)));
    Add(EntryFields(events.back()));
  }
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  auto cycle = bridge.RunOnce(*conn_, *redis_, cursor);  // own pending (none)
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM consumer_inbox") == 3; }));
  EXPECT_EQ(Pending(), 0) << "acknowledged after the commit";
  for (const auto& e : events) {
    pg::Statement st{"row",
                     "SELECT payload, payload_sha256 = sha256(payload), status, owner, event_type, "
                     "stream, consumer FROM consumer_inbox WHERE event_id = $1::uuid"};
    auto r = conn_->Execute(st, {pg::Text(e.event_id())});
    ASSERT_TRUE(r.ok() && r->rows() == 1);
    EXPECT_EQ(r->GetBytes(0, 0), audit::Serialize(e)) << "the owner's exact bytes";
    EXPECT_TRUE(r->GetBool(0, 1));
    EXPECT_EQ(r->GetString(0, 2), "PENDING");
    EXPECT_EQ(r->GetString(0, 3), "auth");
    EXPECT_EQ(r->GetString(0, 4), "auth.user.created");
    EXPECT_EQ(r->GetString(0, 5), stream_);
    EXPECT_EQ(r->GetString(0, 6), "audit_logs");
  }
}

TEST_F(InboxBridgeTest, DirectWriteCommitsInboxRowsProcessedWithTheirAuditRowsInOneTransaction) {
  options_.write_audit_logs = true;
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("d", i)));
    Add(EntryFields(events.back()));
  }
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM audit_logs") == 3; }));
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'PROCESSED'"
                   " AND processed_at IS NOT NULL AND attempts = 0"),
            3)
      << "no lease consumer ran: the bridge settled them";
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs a JOIN consumer_inbox i USING (event_id)"
                   " WHERE sha256(a.envelope) = i.payload_sha256 AND i.payload IS NULL"
                   " AND i.seal IS NULL AND a.ingested_at = i.processed_at"),
            3)
      << "the exact bytes, stored once (audit_logs; the inbox keeps their SHA-256), written in "
         "the inbox row's transaction (same now())";
  // A re-delivery of the first event in a later batch: absorbed, no new row.
  Add(EntryFields(events[0]));
  int duplicates = 0;
  for (int i = 0; i < 100 && duplicates == 0; ++i) {
    auto c = bridge.RunOnce(*conn_, *redis_, cursor);
    ASSERT_TRUE(c.ok()) << c.status();
    duplicates += c->duplicates;
  }
  ASSERT_EQ(duplicates, 1);
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 3);
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 3);
}

TEST_F(InboxBridgeTest, DirectWriteThatPostgresRefusesFallsBackToPendingForTheLeaseConsumer) {
  options_.write_audit_logs = true;
  // A real refusal from PostgreSQL for one event, whatever the cause.
  ASSERT_TRUE(conn_
                  ->Execute(pg::Statement{"refuse_fn",
                                          "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE "
                                          "plpgsql AS $$ BEGIN IF NEW.subject = 'refused' "
                                          "THEN RAISE EXCEPTION 'refused'; END IF; "
                                          "RETURN NEW; END $$"},
                            {})
                  .ok());
  ASSERT_TRUE(conn_
                  ->Execute(pg::Statement{"refuse_trg",
                                          "CREATE TRIGGER refuse BEFORE INSERT ON audit_logs "
                                          "FOR EACH ROW EXECUTE FUNCTION refuse()"},
                            {})
                  .ok());
  const audit::AuditEvent refused = SampleEvent(audit::v1::OWNER_AUTH, "refused");
  Add(EntryFields(refused));
  Add(EntryFields(SampleEvent(audit::v1::OWNER_AUTH, "fine")));
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM consumer_inbox") == 2; }));
  EXPECT_EQ(Pending(), 0) << "the inbox insert committed: acknowledged";
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'PENDING'"), 2)
      << "the whole batch went to the lease consumer";
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 0) << "nothing half-written";

  consumer::ConsumerOptions c;
  c.pg = options_.pg;
  c.use_notify = false;
  c.poll_interval = absl::Milliseconds(20);
  c.max_attempts = 2;
  c.retry_backoff = {absl::Milliseconds(10), absl::Milliseconds(20)};
  consumer::LeaseConsumer lease(c, metrics_->registry());
  lease.Start();
  EXPECT_TRUE(WaitFor(
      [&] {
        return Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD'") == 1 &&
               Scalar("SELECT count(*) FROM audit_logs") == 1;
      },
      std::chrono::seconds(10)))
      << "the good event is written by the consumer; the refused one goes DEAD";
  lease.Stop();
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD' AND event_id = '" +
                   refused.event_id() + "'::uuid AND last_error LIKE '%refused%'"),
            1);
}

TEST_F(InboxBridgeTest, CrashBeforeTheInboxInsertLeavesEntriesPendingForAnotherBridge) {
  for (int i = 0; i < 4; ++i)
    Add(EntryFields(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i))));
  BridgeHooks crash;
  crash.before_insert = [](const auto&) { return absl::AbortedError("crash before insert"); };
  InboxBridge crashing(options_, metrics_->registry(), crash);
  StreamCursor a = Cursor();
  ASSERT_TRUE(WaitFor([&] { return !crashing.RunOnce(*conn_, *redis_, a).ok(); },
                      std::chrono::seconds(10)));
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 0);
  EXPECT_EQ(Pending(), 4) << "nothing acknowledged";

  auto metrics_b = metrics::Metrics::Unexposed("b");
  BridgeOptions b_options = options_;
  b_options.consumer_name = "bridge-b";
  b_options.claim_idle = absl::Milliseconds(200);
  b_options.claim_interval = absl::Milliseconds(50);
  InboxBridge survivor(b_options, metrics_b->registry());
  StreamCursor b = Cursor();
  ASSERT_TRUE(
      RunUntil(survivor, b, [&] { return Scalar("SELECT count(*) FROM consumer_inbox") == 4; }));
  ASSERT_TRUE(WaitFor([&] { return Pending() == 0; }, std::chrono::seconds(5)));
}

// --- a replica frozen inside its inbox transaction ---

// Replica A reads `events` entries and freezes inside its inbox transaction
// (rows inserted, uncommitted) until `thaw`; its session uses `a_pg`.
class FrozenReplica {
 public:
  FrozenReplica(const BridgeOptions& options, const pg::ConnectOptions& a_pg,
                prometheus::Registry& registry)
      : bridge_(options, registry, Hooks()), redis_(options.redis), options_(options) {
    auto c = pg::Connection::Connect(a_pg);
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) conn_ = std::move(c).value();
  }
  ~FrozenReplica() { (void)Thaw(); }

  // Starts A's cycle; true once A is frozen holding its batch.
  bool Freeze() {
    thread_ = std::thread([this] {
      StreamCursor cursor;
      cursor.owner = audit::v1::OWNER_AUTH;
      cursor.stream = options_.streams[0].second;
      late_ = bridge_.RunOnce(*conn_, redis_, cursor).status();
    });
    return WaitFor([&] { return frozen_.load(); }, std::chrono::seconds(10));
  }
  // Wakes A up; returns how its cycle ended.
  absl::Status Thaw() {
    thawed_ = true;
    if (thread_.joinable()) thread_.join();
    return late_;
  }

 private:
  BridgeHooks Hooks() {
    BridgeHooks h;
    h.before_commit = [this](const auto&) {
      frozen_ = true;
      while (!thawed_.load()) absl::SleepFor(absl::Milliseconds(10));
      return absl::OkStatus();
    };
    return h;
  }

  InboxBridge bridge_;
  redis::Client redis_;
  BridgeOptions options_;
  std::unique_ptr<pg::Connection> conn_;
  std::thread thread_;
  std::atomic<bool> frozen_{false}, thawed_{false};
  absl::Status late_;
};

TEST_F(InboxBridgeTest, AReplicaFrozenInItsInboxTransactionNeverKeepsNewEntriesWaiting) {
  options_.write_audit_logs = true;  // the common path: audit rows in the inbox transaction
  for (int i = 0; i < 4; ++i)
    Add(EntryFields(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("held", i))));
  FrozenReplica a(options_, options_.pg, metrics_->registry());  // no idle limit: frozen for good
  ASSERT_TRUE(a.Freeze());

  // Replica B takes A's entries over; its inserts wait on A's uncommitted
  // rows until its lock timeout, every time.
  auto metrics_b = metrics::Metrics::Unexposed("b");
  BridgeOptions b_options = options_;
  b_options.consumer_name = "bridge-b";
  b_options.claim_idle = absl::Milliseconds(200);
  b_options.claim_interval = absl::Milliseconds(50);
  pg::ConnectOptions b_pg = options_.pg;
  b_pg.lock_timeout = absl::Milliseconds(300);
  auto b_conn = pg::Connection::Connect(b_pg);
  ASSERT_TRUE(b_conn.ok()) << b_conn.status();
  InboxBridge b(b_options, metrics_b->registry());
  StreamCursor cursor = Cursor();
  redis::Client b_redis(options_.redis);
  auto b_until = [&](const std::function<bool()>& done) {
    return WaitFor(
        [&] {
          if ((*b_conn)->broken()) *b_conn = std::move(pg::Connection::Connect(b_pg).value());
          (void)b.RunOnce(**b_conn, b_redis, cursor);
          return done();
        },
        std::chrono::seconds(15));
  };
  ASSERT_TRUE(b_until([&] { return HeldBy("bridge-b") == 4; })) << "B took A's entries over";
  for (int i = 0; i < 3; ++i)
    Add(EntryFields(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("new", i))));
  EXPECT_TRUE(b_until([&] { return Scalar("SELECT count(*) FROM audit_logs") == 3; }))
      << "the new entries waited behind a batch that cannot settle";

  // A wakes up and commits; B then settles the rest as duplicates.
  EXPECT_TRUE(a.Thaw().ok());
  EXPECT_TRUE(b_until([&] { return Pending() == 0; }));
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 7);
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 7);
}

TEST_F(InboxBridgeTest, AFrozenReplicaStallsTheOtherOnlyUntilItsIdleInTransactionTimeout) {
  options_.write_audit_logs = true;  // the common path: audit rows in the inbox transaction
  for (int i = 0; i < 4; ++i)
    Add(EntryFields(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("held", i))));
  pg::ConnectOptions a_pg = options_.pg;
  a_pg.idle_in_transaction_timeout = absl::Seconds(1);
  FrozenReplica a(options_, a_pg, metrics_->registry());
  ASSERT_TRUE(a.Freeze());
  const absl::Time frozen = absl::Now();

  auto metrics_b = metrics::Metrics::Unexposed("b");
  BridgeOptions b_options = options_;
  b_options.consumer_name = "bridge-b";
  b_options.claim_idle = absl::Milliseconds(200);
  b_options.claim_interval = absl::Milliseconds(50);
  pg::ConnectOptions b_pg = options_.pg;
  b_pg.lock_timeout = absl::Milliseconds(300);
  auto b_conn = pg::Connection::Connect(b_pg);
  ASSERT_TRUE(b_conn.ok());
  InboxBridge b(b_options, metrics_b->registry());
  StreamCursor cursor = Cursor();
  redis::Client b_redis(options_.redis);
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)b.RunOnce(**b_conn, b_redis, cursor);
        return Scalar("SELECT count(*) FROM audit_logs") == 4 && Pending() == 0;
      },
      std::chrono::seconds(15)))
      << "the frozen replica's rows were never released";
  const absl::Duration stall = absl::Now() - frozen;
  std::printf(
      "[frozen replica] idle_in_transaction_timeout=1s claim_idle=200ms "
      "lock_timeout=300ms: the other replica drained after %s\n",
      absl::FormatDuration(stall).c_str());
  EXPECT_LT(stall, absl::Seconds(5));

  // The late wake-up changes nothing: its session is gone, its commit fails.
  const absl::Status late = a.Thaw();
  EXPECT_FALSE(late.ok()) << "the frozen replica committed after PostgreSQL ended its session";
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 4);
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 4);
  EXPECT_EQ(Pending(), 0);
}

TEST_F(InboxBridgeTest, CrashAfterCommitBeforeAckIsADuplicateOnRedeliveryAndOneAuditRow) {
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i)));
    Add(EntryFields(events.back()));
  }
  BridgeHooks crash;
  crash.after_commit = [](const auto&) { return absl::AbortedError("crash before XACK"); };
  InboxBridge crashing(options_, metrics_->registry(), crash);
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(WaitFor([&] { return !crashing.RunOnce(*conn_, *redis_, cursor).ok(); },
                      std::chrono::seconds(10)));
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 3) << "committed";
  EXPECT_EQ(Pending(), 3) << "but not acknowledged";

  // The restarted process (same consumer name) re-reads its pending list.
  auto metrics2 = metrics::Metrics::Unexposed("restarted");
  InboxBridge restarted(options_, metrics2->registry());
  StreamCursor fresh = Cursor();
  auto cycle = restarted.RunOnce(*conn_, *redis_, fresh);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->read, 3);
  EXPECT_EQ(cycle->inserted, 0);
  EXPECT_EQ(cycle->duplicates, 3);
  EXPECT_EQ(cycle->poison, 0);
  EXPECT_EQ(cycle->acked, 3);
  EXPECT_EQ(Pending(), 0);

  consumer::ConsumerOptions co;
  co.pg = options_.pg;
  consumer::LeaseConsumer lease(co, metrics2->registry());
  auto done = lease.RunOnce(*conn_, "w");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 3);
}

TEST_F(InboxBridgeTest, EveryPoisonReasonIsStoredCountedAndAcknowledgedWithoutBlockingValidOnes) {
  const absl::Time now = absl::Now();
  auto base = [&](int i) { return SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("p", i), now); };
  const auto& keys = ::ulticode::testing::SharedTestKeys();
  const crypto::SigningKey stranger = *crypto::SigningKey::Generate();
  std::vector<std::pair<std::string, redis::StreamFields>> cases;
  // Entry fields: envelope, seal, key_id (testing::EntryFields).
  {
    auto f = EntryFields(base(1));
    f.erase(f.begin());  // envelope
    cases.push_back({"missing_field", f});
  }
  {
    auto f = EntryFields(base(2));
    f.push_back(f[2]);  // key_id twice
    cases.push_back({"duplicate_field", f});
  }
  {
    auto e = base(3);
    e.set_event_id("not-a-uuid");
    e.mutable_record()->set_audit_id("not-a-uuid");
    cases.push_back({"bad_event_id", EntryFields(e)});
  }
  {
    auto e = base(4);
    e.set_event_type("auth.user.exploded");
    cases.push_back({"unknown_event_type", EntryFields(e)});
  }
  {
    auto e = base(5);
    e.set_schema_version(audit::kSchemaVersion + 1);
    cases.push_back({"unsupported_schema_version", EntryFields(e)});
  }
  {
    auto f = EntryFields(base(6));
    ReplaceEnvelope(f, std::string("\xff\xff\xff garbage", 12), keys.auth());
    cases.push_back({"envelope_unparseable", f});
  }
  {
    auto e = base(8);
    e.mutable_record()->set_audit_id(SampleEvent(audit::v1::OWNER_AUTH, "x").event_id());
    cases.push_back({"audit_id_mismatch", EntryFields(e)});
  }
  {
    // An App event injected into Auth's stream, sealed with Auth's key.
    auto e = SampleEvent(audit::v1::OWNER_APP, "p9", now);
    cases.push_back({"envelope_owner_mismatch", EntryFields(e, &keys.auth())});
  }
  {
    auto e = base(10);
    e.mutable_occurred_at()->set_seconds(absl::ToUnixSeconds(now + absl::Hours(48)));
    cases.push_back({"bad_timestamp", EntryFields(e)});
  }
  {
    auto e = base(11);
    e.mutable_record()->clear_actor();
    cases.push_back({"invalid_record", EntryFields(e)});
  }
  {
    auto f = EntryFields(base(12));
    f.pop_back();  // key_id
    cases.push_back({"missing_signature", f});
  }
  {
    auto f = EntryFields(base(13), &stranger);
    cases.push_back({"unknown_key", f});
  }
  {
    auto f = EntryFields(base(14), &keys.app());
    cases.push_back({"key_owner_mismatch", f});
  }
  {
    // A forger's copy: a fresh event id and actor, the owner's old seal.
    auto e = base(15);
    auto f = EntryFields(e);
    const std::string sealed = f[1].second;
    e.set_event_id(SampleEvent(audit::v1::OWNER_AUTH, "y").event_id());
    e.mutable_record()->set_audit_id(e.event_id());
    e.mutable_record()->set_actor("mallory");
    f = EntryFields(e);
    f[1].second = sealed;
    cases.push_back({"bad_signature", f});
  }
  std::map<std::string, std::string> reason_by_entry;
  for (const auto& [reason, fields] : cases) reason_by_entry[Add(fields)] = reason;
  auto good = base(99);
  Add(EntryFields(good));

  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(RunUntil(bridge, cursor, [&] {
    return Scalar("SELECT count(*) FROM poison_events") == static_cast<int64_t>(cases.size()) &&
           Scalar("SELECT count(*) FROM consumer_inbox") == 1;
  }));
  EXPECT_EQ(Pending(), 0) << "poison is acknowledged, never left blocking";
  pg::Statement st{"poison",
                   "SELECT stream_entry_id, reason, detail, stream, jsonb_array_length(fields) "
                   "FROM poison_events"};
  auto r = conn_->Execute(st);
  ASSERT_TRUE(r.ok());
  std::set<std::string> reasons;
  for (int i = 0; i < r->rows(); ++i) {
    const std::string entry = r->GetString(i, 0);
    EXPECT_EQ(r->GetString(i, 1), reason_by_entry[entry]) << "entry " << entry;
    EXPECT_FALSE(r->GetString(i, 2).empty());
    EXPECT_EQ(r->GetString(i, 3), stream_);
    int64_t sent = 0;  // the entry's fields, as written
    for (const auto& [reason, fields] : cases) {
      if (reason == r->GetString(i, 1)) sent = static_cast<int64_t>(fields.size());
    }
    EXPECT_EQ(r->GetInt64(i, 4), sent) << "raw fields kept";
    reasons.insert(r->GetString(i, 1));
  }
  EXPECT_EQ(reasons.size(), cases.size()) << "each case has its own reason";
  // The poison metric counts them by reason.
  auto families = metrics_->registry().Collect();
  double poison_total = 0;
  for (const auto& f : families) {
    if (f.name != "ulticode_inbox_poison_total") continue;
    for (const auto& m : f.metric) poison_total += m.counter.value;
  }
  EXPECT_EQ(poison_total, static_cast<double>(cases.size()));
}

TEST_F(InboxBridgeTest, ADuplicateIdWithDifferentBytesIsAConflictAndNeverOverwrites) {
  auto original = SampleEvent(audit::v1::OWNER_AUTH, "u1");
  auto forged = original;
  forged.mutable_record()->set_actor("mallory");
  Add(EntryFields(original));
  const std::string forged_entry = Add(EntryFields(forged));
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM poison_events") == 1; }));
  pg::Statement st{"payload", "SELECT payload FROM consumer_inbox WHERE event_id = $1::uuid"};
  auto r = conn_->Execute(st, {pg::Text(original.event_id())});
  ASSERT_TRUE(r.ok() && r->rows() == 1);
  EXPECT_EQ(r->GetBytes(0, 0), audit::Serialize(original)) << "the first bytes are kept";
  pg::Statement p{"poison", "SELECT reason, stream_entry_id, event_id FROM poison_events"};
  auto pr = conn_->Execute(p);
  ASSERT_TRUE(pr.ok() && pr->rows() == 1);
  EXPECT_EQ(pr->GetString(0, 0), "conflict");
  EXPECT_EQ(pr->GetString(0, 1), forged_entry);
  EXPECT_EQ(pr->GetString(0, 2), original.event_id());

  // Also across batches: the forgery arriving later is a conflict too.
  const std::string later = Add(EntryFields(forged));
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM poison_events") == 2; }));
  EXPECT_EQ(Pending(), 0);
}

// A compromised App key signs an app event under an id Auth handed to its
// callers, and it reaches Admin first. Auth's real event is then refused
// with a reason of its own (the alert UlticodeEventIdTakeover fires on it),
// naming the owner that holds the id; it is never taken for a plain
// conflict of Auth's own. (Before: reason "conflict".)
TEST_F(InboxBridgeTest, AnEventIdTakenByAnotherOwnerIsRefusedWithItsOwnReason) {
  auto real = SampleEvent(audit::v1::OWNER_AUTH, "u1");
  auto squatter = SampleEvent(audit::v1::OWNER_APP, "p1");
  squatter.set_event_id(real.event_id());
  squatter.mutable_record()->set_audit_id(real.event_id());
  const std::string app_stream = "test:audit:app:" + ::ulticode::testing::RandomSuffix();
  ASSERT_TRUE(redis_->XAddBatch(app_stream, {EntryFields(squatter)}).ok());
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor app;
  app.owner = audit::v1::OWNER_APP;
  app.stream = app_stream;
  ASSERT_TRUE(
      RunUntil(bridge, app, [&] { return Scalar("SELECT count(*) FROM consumer_inbox") == 1; }));

  const std::string entry = Add(EntryFields(real));
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM poison_events") == 1; }));
  pg::Statement p{"poison", "SELECT reason, detail, stream_entry_id, event_id FROM poison_events"};
  auto pr = conn_->Execute(p);
  ASSERT_TRUE(pr.ok() && pr->rows() == 1);
  EXPECT_EQ(pr->GetString(0, 0), "event_id_of_another_owner");
  EXPECT_EQ(pr->GetString(0, 1), "event id already taken over from owner app; kept the first");
  EXPECT_EQ(pr->GetString(0, 2), entry);
  EXPECT_EQ(pr->GetString(0, 3), real.event_id());
  EXPECT_EQ(Pending(), 0);
  (void)redis_->Command({"DEL", app_stream});
}

// A forgery of an event the inbox already holds, delivered twice in one
// batch: the first copy conflicts with the inbox, and its repeat is a
// conflict too (never taken), both acknowledged.
TEST_F(InboxBridgeTest, RepeatsOfAConflictingEventInOneBatchAreAllConflicts) {
  auto original = SampleEvent(audit::v1::OWNER_AUTH, "u1");
  auto forged = original;
  forged.mutable_record()->set_actor("mallory");
  Add(EntryFields(original));
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  ASSERT_TRUE(
      RunUntil(bridge, cursor, [&] { return Scalar("SELECT count(*) FROM consumer_inbox") == 1; }));
  const std::string first = Add(EntryFields(forged));
  const std::string repeat = Add(EntryFields(forged));
  auto cycle = bridge.RunOnce(*conn_, *redis_, cursor);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->read, 2);
  EXPECT_EQ(cycle->poison, 2);
  EXPECT_EQ(cycle->duplicates, 0);
  EXPECT_EQ(cycle->acked, 2);
  pg::Statement p{"poison", "SELECT reason, stream_entry_id FROM poison_events ORDER BY id"};
  auto pr = conn_->Execute(p);
  ASSERT_TRUE(pr.ok() && pr->rows() == 2);
  EXPECT_EQ(pr->GetString(0, 0), "conflict");
  EXPECT_EQ(pr->GetString(1, 0), "conflict");
  EXPECT_EQ(std::set<std::string>({pr->GetString(0, 1), pr->GetString(1, 1)}),
            std::set<std::string>({first, repeat}));
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 1);
  EXPECT_EQ(Pending(), 0);
}

TEST_F(InboxBridgeTest, TheSameEventDeliveredManyTimesToTwoBridgesYieldsOneAuditRowEach) {
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < 20; ++i)
    events.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i)));
  std::vector<redis::StreamFields> entries;
  for (int copy = 0; copy < 10; ++copy) {
    for (const auto& e : events) entries.push_back(EntryFields(e));
  }
  ASSERT_TRUE(redis_->XAddBatch(stream_, entries).ok());

  std::atomic<int> inserted{0}, duplicates{0};
  auto run = [&](const std::string& name) {
    BridgeOptions o = options_;
    o.consumer_name = name;
    o.batch_size = 7;  // many small, interleaved batches
    auto m = metrics::Metrics::Unexposed(name);
    InboxBridge bridge(o, m->registry());
    auto conn = pg::Connection::Connect(o.pg);
    ASSERT_TRUE(conn.ok());
    redis::Client client(o.redis);
    StreamCursor cursor = Cursor();
    for (int idle = 0; idle < 3;) {
      auto c = bridge.RunOnce(**conn, client, cursor);
      ASSERT_TRUE(c.ok()) << c.status();
      inserted += c->inserted;
      duplicates += c->duplicates;
      idle = c->read == 0 ? idle + 1 : 0;
    }
  };
  std::thread a(run, "bridge-a"), b(run, "bridge-b");
  a.join();
  b.join();
  EXPECT_EQ(inserted.load(), 20);
  EXPECT_EQ(duplicates.load(), 180);
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox"), 20);
  EXPECT_EQ(Scalar("SELECT count(*) FROM poison_events"), 0);
  EXPECT_EQ(Pending(), 0);

  consumer::ConsumerOptions co;
  co.pg = options_.pg;
  consumer::LeaseConsumer lease(co, metrics_->registry());
  ASSERT_TRUE(lease.RunOnce(*conn_, "w").ok());
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 20);
}

// Redis restarted without its data on a host whose clock is behind hands
// out stream ids it handed out before. A poison entry under a repeated id
// with other fields is another entry: stored, not dropped as a re-delivery;
// a true re-delivery (same id, same fields) is still stored once.
TEST_F(InboxBridgeTest, APoisonEntryUnderARepeatedStreamIdIsStoredNotDropped) {
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  auto poison_count = [&] { return Scalar("SELECT count(*) FROM poison_events"); };
  ASSERT_TRUE(redis_->Command({"XADD", stream_, "5-0", "garbage", "one"}).ok());
  ASSERT_TRUE(RunUntil(bridge, cursor, [&] { return poison_count() == 1; }));

  ASSERT_TRUE(redis_->Command({"DEL", stream_}).ok());  // Redis lost its data
  ASSERT_TRUE(redis_->Command({"XADD", stream_, "5-0", "garbage", "two"}).ok());
  ASSERT_TRUE(RunUntil(bridge, cursor, [&] { return poison_count() == 2 && Pending() == 0; }))
      << "the second entry under id 5-0 was dropped as a re-delivery";

  // The same entry again (same id, same fields): a re-delivery, stored once.
  ASSERT_TRUE(redis_->Command({"DEL", stream_}).ok());
  ASSERT_TRUE(redis_->Command({"XADD", stream_, "5-0", "garbage", "two"}).ok());
  ASSERT_TRUE(RunUntil(bridge, cursor, [&] { return Pending() == 0 && cursor.group_ready; }));
  auto cycle = bridge.RunOnce(*conn_, *redis_, cursor);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(poison_count(), 2);
}

TEST_F(InboxBridgeTest, AGroupLostWithRedisDataIsRecreatedAndReadingResumes) {
  InboxBridge bridge(options_, metrics_->registry());
  StreamCursor cursor = Cursor();
  auto first = bridge.RunOnce(*conn_, *redis_, cursor);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->group_created, 1) << "created with MKSTREAM at start";

  ASSERT_TRUE(redis_->Command({"DEL", stream_}).ok());  // Redis lost the stream and its group
  auto lost = bridge.RunOnce(*conn_, *redis_, cursor);
  EXPECT_FALSE(lost.ok()) << "NOGROUP reported, not hidden";

  auto again = bridge.RunOnce(*conn_, *redis_, cursor);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->group_created, 1) << "re-created with MKSTREAM";

  auto e = SampleEvent(audit::v1::OWNER_AUTH, "after-loss");
  Add(EntryFields(e));
  ASSERT_TRUE(RunUntil(bridge, cursor, [&] {
    return Scalar(absl::StrCat("SELECT count(*) FROM consumer_inbox WHERE event_id = '",
                               e.event_id(), "'")) == 1;
  }));
  EXPECT_EQ(Pending(), 0);
}

}  // namespace
}  // namespace ulticode::admin::inbox
