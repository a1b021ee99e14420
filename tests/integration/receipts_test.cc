// Delivery confirmed by the consumer, not by the broker: Admin's receipts
// mark outbox rows CONFIRMED; rows without a receipt are published again;
// a Redis that lost everything loses nothing. Real PostgreSQL and Redis
// (a private Redis where it is wiped).
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "admin/maintenance/housekeeping.h"
#include "admin/migrations.h"
#include "common/audit/receipt.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/outbox/dispatcher.h"
#include "common/outbox/migrations.h"
#include "common/outbox/outbox_store.h"
#include "common/outbox/receipt_reader.h"
#include "gtest/gtest.h"
#include "tests/support/audit_events.h"
#include "tests/support/keys.h"
#include "tests/support/pg_query.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using ::ulticode::testing::SampleEvent;
using ::ulticode::testing::WaitFor;

const ::ulticode::testing::TestKeys& Keys() { return ::ulticode::testing::SharedTestKeys(); }

class ReceiptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    owner_pg_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "rcptowner"));
    admin_pg_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "rcptadmin"));
    auto o = pg::Connection::Connect(owner_pg_);
    auto a = pg::Connection::Connect(admin_pg_);
    ASSERT_TRUE(o.ok() && a.ok());
    owner_ = std::move(o).value();
    admin_ = std::move(a).value();
    ASSERT_TRUE(migrations::Apply(*owner_, outbox::Migrations()).ok());
    ASSERT_TRUE(migrations::Apply(*admin_, admin::Migrations()).ok());
    redis_.host = redis.host;
    redis_.port = redis.port;
    redis_.user = redis.user;
    redis_.password = redis.password;
    stream_ = "test:rcpt:" + ::ulticode::testing::RandomSuffix();
    metrics_ = metrics::Metrics::Unexposed("test");
  }

  std::vector<std::string> Append(int n) {
    std::vector<std::string> ids;
    auto tx = owner_->Begin();
    EXPECT_TRUE(tx.ok());
    for (int i = 0; i < n; ++i) {
      auto e = SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i));
      EXPECT_TRUE(outbox::Append(*tx, e, Keys().auth()).ok());
      ids.push_back(e.event_id());
    }
    EXPECT_TRUE(tx->Commit().ok());
    return ids;
  }

  outbox::DispatcherOptions DispatchOptions(const redis::Options& ro) {
    outbox::DispatcherOptions d;
    d.owner = audit::v1::OWNER_AUTH;
    d.stream = stream_;
    d.pg = owner_pg_;
    d.redis = ro;
    d.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    d.poll_interval = absl::Milliseconds(50);
    return d;
  }
  admin::inbox::BridgeOptions BridgeOptions(const redis::Options& ro) {
    admin::inbox::BridgeOptions b;
    b.streams = {{audit::v1::OWNER_AUTH, stream_}};
    b.consumer_name = "bridge";
    b.block = absl::Milliseconds(50);
    b.pg = admin_pg_;
    b.redis = ro;
    b.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    b.keys = &Keys().directory_file();
    b.receipt_signer = &Keys().admin();
    return b;
  }
  outbox::ReceiptReaderOptions ReaderOptions(const redis::Options& ro) {
    outbox::ReceiptReaderOptions r;
    r.owner = audit::v1::OWNER_AUTH;
    r.audit_stream = stream_;
    r.stream = audit::ReceiptStreamFor(stream_);
    r.keys = &Keys().directory_file();
    r.block = absl::Milliseconds(50);
    r.pg = owner_pg_;
    r.redis = ro;
    r.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    return r;
  }

  // What a true receipt lists for `ids` (all rows when empty): each event
  // with the SHA-256 of the bytes the outbox committed and its latest
  // publication.
  std::vector<audit::ReceiptItem> Items(const std::vector<std::string>& ids = {}) {
    std::vector<audit::ReceiptItem> items;
    pg::Statement st{"items",
                     "SELECT event_id::text, sha256(payload), publication FROM audit_outbox"
                     " WHERE cardinality($1::uuid[]) = 0 OR event_id = ANY($1::uuid[])"
                     " ORDER BY event_id"};
    auto r = owner_->Execute(st, {pg::TextArray(ids)});
    EXPECT_TRUE(r.ok()) << r.status();
    for (int i = 0; r.ok() && i < r->rows(); ++i) {
      items.push_back({r->GetString(i, 0), r->GetBytes(i, 1), r->GetInt64(i, 2)});
    }
    return items;
  }

  // XADDs `fields` to the receipt stream and runs one reader cycle over it.
  outbox::ReceiptCycle ReadReceipt(const redis::StreamFields& fields) {
    redis::Client client(redis_);
    EXPECT_TRUE(client.XAddBatch(audit::ReceiptStreamFor(stream_), {fields}).ok());
    outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
    auto cycle = reader.RunOnce(*owner_, client, &receipt_cursor_);
    EXPECT_TRUE(cycle.ok()) << cycle.status();
    return cycle.ok() ? *cycle : outbox::ReceiptCycle{};
  }

  // Claims and marks every row PUBLISHED (as a dispatcher would).
  void PublishAll() {
    outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
    redis::Client client(redis_);
    ASSERT_TRUE(dispatcher.RunOnce(*owner_, client).ok());
  }

  admin::inbox::StreamCursor Cursor() const {
    admin::inbox::StreamCursor cursor;
    cursor.owner = audit::v1::OWNER_AUTH;
    cursor.stream = stream_;
    return cursor;
  }

  // Runs `bridge` until one batch sent a receipt for `events` events.
  void TakeOver(admin::inbox::InboxBridge& bridge, admin::inbox::StreamCursor& cursor, int events) {
    redis::Client client(redis_);
    ASSERT_TRUE(WaitFor(
        [&] {
          auto c = bridge.RunOnce(*admin_, client, cursor);
          return c.ok() && c->receipted == events;
        },
        std::chrono::seconds(10)));
  }

  // OutboxOperations/Replay of every CONFIRMED row (Admin lost them).
  void ReplayAll() {
    auto tx = owner_->Begin();
    ASSERT_TRUE(tx.ok());
    auto replayed =
        outbox::ReplayConfirmed(*tx, absl::Now() - absl::Hours(1), absl::Now() + absl::Hours(1));
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    ASSERT_GT(*replayed, 0);
    ASSERT_TRUE(tx->Commit().ok());
  }

  int64_t OwnerScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*owner_, sql);
  }
  int64_t AdminScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*admin_, sql);
  }

  std::string receipt_cursor_ = "0-0";  // ReadReceipt's, across calls
  pg::ConnectOptions owner_pg_, admin_pg_;
  std::unique_ptr<pg::Connection> owner_, admin_;
  redis::Options redis_;
  std::string stream_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

TEST_F(ReceiptsTest, ReceiptsListWhatTheInboxHoldsAndConfirmTheOutboxRows) {
  auto ids = Append(3);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client).ok());
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PUBLISHED'"), 3);

  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  TakeOver(bridge, cursor, 3);
  // One receipt entry for the batch, listing exactly the ids taken over.
  auto receipts = client.XRead(audit::ReceiptStreamFor(stream_), 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  ASSERT_EQ(receipts->size(), 1u);
  auto got = audit::DecodeReceipt(stream_, (*receipts)[0].fields, Keys().directory());
  ASSERT_TRUE(got.ok()) << got.status();
  std::sort(got->begin(), got->end(),
            [](const auto& a, const auto& b) { return a.event_id < b.event_id; });
  const auto want = Items(ids);
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)[i].event_id, want[i].event_id);
    EXPECT_EQ((*got)[i].payload_sha256, want[i].payload_sha256) << "the bytes Admin holds";
  }

  outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
  std::string at = "0-0";
  auto cycle = reader.RunOnce(*owner_, client, &at);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->confirmed, 3);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'"
                        " AND confirmed_at IS NOT NULL"),
            3);
  // Idempotent: the same receipt again changes nothing.
  std::string again = "0-0";
  auto twice = reader.RunOnce(*owner_, client, &again);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->confirmed, 0);
}

TEST_F(ReceiptsTest, ADuplicateIsReceiptedAgainButAConflictIsNot) {
  auto e = SampleEvent(audit::v1::OWNER_AUTH, "u1");
  auto forged = e;
  forged.mutable_record()->set_actor("mallory");
  redis::Client client(redis_);
  ASSERT_TRUE(client.XAddBatch(stream_, {::ulticode::testing::EntryFields(e)}).ok());
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor;
  cursor.owner = audit::v1::OWNER_AUTH;
  cursor.stream = stream_;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = bridge.RunOnce(*admin_, client, cursor);
        return c.ok() && c->receipted == 1;
      },
      std::chrono::seconds(10)));
  // A lost receipt is repaired by the owner's re-send: the duplicate is receipted.
  ASSERT_TRUE(client.XAddBatch(stream_, {::ulticode::testing::EntryFields(e)}).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = bridge.RunOnce(*admin_, client, cursor);
        return c.ok() && c->duplicates == 1 && c->receipted == 1;
      },
      std::chrono::seconds(10)));
  // A conflicting copy is not.
  ASSERT_TRUE(client.XAddBatch(stream_, {::ulticode::testing::EntryFields(forged)}).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = bridge.RunOnce(*admin_, client, cursor);
        return c.ok() && c->poison == 1;
      },
      std::chrono::seconds(10)));
  auto receipts = client.XRead(audit::ReceiptStreamFor(stream_), 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(receipts.ok());
  EXPECT_EQ(receipts->size(), 2u);
}

TEST_F(ReceiptsTest, RowsWithoutAReceiptArePublishedAgainAfterTheResendTimeout) {
  Append(2);
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Milliseconds(300);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client).ok());
  auto swept = dispatcher.SweepUnconfirmed(*owner_);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 0) << "not before the timeout";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = dispatcher.SweepUnconfirmed(*owner_);
        return s.ok() && *s == 2;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(
      OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING' AND resends = 1"), 2);
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client).ok());
  auto len = client.XInfoStream(stream_);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->length, 4) << "each event published twice";
  // Confirmed rows are never swept again.
  ASSERT_TRUE(outbox::Confirm(*owner_, Items()).ok());
  absl::SleepFor(absl::Milliseconds(400));  // past the resend timeout on purpose
  auto none = dispatcher.SweepUnconfirmed(*owner_);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
}

TEST_F(ReceiptsTest, RedisLosingEverythingLosesNoEventEndToEnd) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  redis::Options ro = redis_;
  ro.port = own.port();
  ro.command_timeout = absl::Milliseconds(500);
  auto options = DispatchOptions(ro);
  options.resend_timeout = absl::Seconds(1);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  outbox::ReceiptReader reader(ReaderOptions(ro), metrics_->registry());
  dispatcher.Start();
  reader.Start();

  // Admin is down: events are published and sit in the stream; then Redis
  // restarts without persistence and they are gone.
  Append(20);
  ASSERT_TRUE(WaitFor(
      [&] {
        return OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PUBLISHED'") == 20;
      },
      std::chrono::seconds(10)));
  own.Kill();
  ASSERT_TRUE(own.Start());

  // Admin comes up on the empty Redis.
  auto admin_metrics = metrics::Metrics::Unexposed("admin");
  auto bridge_options = BridgeOptions(ro);
  admin::inbox::InboxBridge bridge(bridge_options, admin_metrics->registry());
  admin::consumer::ConsumerOptions co;
  co.pg = admin_pg_;
  co.poll_interval = absl::Milliseconds(50);
  admin::consumer::LeaseConsumer consumer(co, admin_metrics->registry());
  bridge.Start();
  consumer.Start();
  Append(5);  // and life goes on

  ASSERT_TRUE(WaitFor([&] { return AdminScalar("SELECT count(*) FROM audit_logs") == 25; },
                      std::chrono::seconds(20)))
      << "the 20 events Redis lost were published again";
  ASSERT_TRUE(WaitFor(
      [&] {
        return OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'") == 25;
      },
      std::chrono::seconds(20)));
  EXPECT_GE(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE resends > 0"), 20);
  bridge.Stop();
  consumer.Stop();
  reader.Stop();
  dispatcher.Stop();
}

// --- Redis memory: a byte bound, and recovery from maxmemory ---

TEST_F(ReceiptsTest, AReceiptStreamStaysWithinItsByteBudgetDrainingFullBatches) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  redis::Options ro = redis_;
  ro.port = own.port();
  constexpr int kBatches = 25;
  auto dispatch = DispatchOptions(ro);
  dispatch.batch_size = 256;
  Append(256 * kBatches);
  outbox::Dispatcher dispatcher(dispatch, metrics_->registry());
  redis::Client client(ro);
  for (int published = 0; published < 256 * kBatches;) {
    auto cycle = dispatcher.RunOnce(*owner_, client);
    ASSERT_TRUE(cycle.ok()) << cycle.status();
    ASSERT_GT(cycle->published, 0);
    published += cycle->published;
  }
  // Admin drains the backlog in full batches of 256.
  auto bridge_options = BridgeOptions(ro);
  bridge_options.batch_size = 256;
  bridge_options.write_audit_logs = true;
  bridge_options.receipt_stream_bytes = 512 << 10;
  const int64_t max_len = admin::inbox::ReceiptMaxLen(bridge_options);
  ASSERT_LT(max_len, kBatches) << "the backlog must outgrow the budget";
  admin::inbox::InboxBridge bridge(bridge_options, metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)bridge.RunOnce(*admin_, client, cursor);
        return AdminScalar("SELECT count(*) FROM audit_logs") == 256 * kBatches;
      },
      std::chrono::seconds(60)));
  const std::string receipts = audit::ReceiptStreamFor(stream_);
  auto len = client.XInfoStream(receipts);
  ASSERT_TRUE(len.ok()) << len.status();
  auto bytes = client.Command({"MEMORY", "USAGE", receipts, "SAMPLES", "0"});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::printf(
      "[receipts] %d full batches, budget %lld bytes (MAXLEN %lld): %lld receipts kept, "
      "%lld bytes in Redis\n",
      kBatches, static_cast<long long>(bridge_options.receipt_stream_bytes),
      static_cast<long long>(max_len), static_cast<long long>(len->length),
      static_cast<long long>(bytes->integer()));
  EXPECT_LE(len->length, max_len);
  EXPECT_LE(bytes->integer(), bridge_options.receipt_stream_bytes * 11 / 10)
      << "Redis holds more than the budget (plus 10 % for its own structures)";
}

TEST_F(ReceiptsTest, ARedisAtItsMemoryLimitLosesNothingAndThePipelineRecoversByItself) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  redis::Options ro = redis_;
  ro.port = own.port();
  redis::Client client(ro);
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "maxmemory", "3mb"}).ok());
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  auto dispatch = DispatchOptions(ro);
  dispatch.resend_timeout = absl::Seconds(1);
  outbox::Dispatcher dispatcher(dispatch, metrics_->registry());
  outbox::ReceiptReader reader(ReaderOptions(ro), metrics_->registry());
  // Admin ran once (its consumer group exists: Redis refuses XGROUP CREATE
  // at its limit, docs/operating.md), then went down.
  auto admin_metrics = metrics::Metrics::Unexposed("admin");
  auto bridge_options = BridgeOptions(ro);
  bridge_options.write_audit_logs = true;
  admin::inbox::InboxBridge bridge(bridge_options, admin_metrics->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(bridge.RunOnce(*admin_, client, cursor).ok());
  dispatcher.Start();
  reader.Start();

  // Admin is down; owners publish until Redis refuses (OOM).
  int64_t appended = 0;
  const bool refused = WaitFor(
      [&] {
        Append(200);
        appended += 200;
        return OwnerScalar("SELECT count(*) FROM audit_outbox WHERE last_error LIKE '%OOM%'") > 0;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(refused) << "Redis never refused a write";
  Append(100);  // and business goes on
  appended += 100;
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox"), appended) << "rows kept";
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"), 0);

  // Admin comes up: reads, acknowledges and trims (none of it refused), so
  // memory frees and the refused rows go through.
  admin::maintenance::StreamMaintenance streams({{audit::v1::OWNER_AUTH, stream_}},
                                                admin::inbox::ReceiptMaxLen(bridge_options), ro,
                                                admin_metrics->registry());
  bridge.Start();
  std::atomic<bool> stop{false};
  std::thread trimmer([&] {
    while (!stop) {
      (void)streams.Trim();
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  const bool recovered = WaitFor(
      [&] {
        return AdminScalar("SELECT count(*) FROM audit_logs") == appended &&
               OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'") ==
                   appended;
      },
      std::chrono::seconds(90));
  stop = true;
  trimmer.join();
  bridge.Stop();
  reader.Stop();
  dispatcher.Stop();
  EXPECT_TRUE(recovered) << "audit rows " << AdminScalar("SELECT count(*) FROM audit_logs")
                         << " of " << appended;
  EXPECT_EQ(AdminScalar("SELECT count(DISTINCT event_id) FROM audit_logs"), appended);
}

TEST_F(ReceiptsTest, AReceiptThatOvertakesThePublishingCycleConfirmsOnceItCommits) {
  auto ids = Append(2);
  // The dispatcher's cycle: rows locked, XADDed (Admin already answered),
  // marked PUBLISHED, not committed yet.
  auto cycle = owner_->Begin();
  ASSERT_TRUE(cycle.ok());
  auto locked = outbox::LockDue(*cycle, 10);
  ASSERT_TRUE(locked.ok() && locked->size() == 2);
  ASSERT_TRUE(outbox::MarkPublished(*cycle, {{ids[0], "1-1"}, {ids[1], "1-2"}}).ok());
  auto reader_conn = pg::Connection::Connect(owner_pg_);
  ASSERT_TRUE(reader_conn.ok());
  std::thread receipt([&] {
    auto confirmed = outbox::Confirm(**reader_conn, Items(ids));
    ASSERT_TRUE(confirmed.ok()) << confirmed.status();
    EXPECT_EQ(*confirmed, 2) << "waited for the cycle's commit, then found PUBLISHED";
  });
  // The receipt is blocked on the cycle's row locks until it commits (seen
  // from a third session: owner_ is inside the cycle's transaction).
  auto observer = pg::Connection::Connect(owner_pg_);
  ASSERT_TRUE(observer.ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        return ::ulticode::testing::QueryInt(
                   **observer,
                   "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                   "AND datname = current_database()") == 1;
      },
      std::chrono::seconds(10)));
  ASSERT_TRUE(cycle->Commit().ok());
  receipt.join();
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'"), 2);
}

TEST_F(ReceiptsTest, AReaderWhoseCursorIsAheadOfARecreatedStreamStartsOver) {
  Append(1);
  PublishAll();
  redis::Client client(redis_);
  ASSERT_TRUE(client
                  .XAddBatch(audit::ReceiptStreamFor(stream_),
                             {audit::EncodeReceipt(stream_, Items(), Keys().admin()).value()})
                  .ok());
  outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
  // A cursor written by a Redis whose clock was far ahead of this one.
  std::string cursor = absl::StrCat(absl::ToUnixMillis(absl::Now() + absl::Hours(24)), "-0");
  auto idle = reader.RunOnce(*owner_, client, &cursor);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->receipts, 0);
  EXPECT_EQ(cursor, "0-0") << "reset once the stream is seen to be behind it";
  auto read = reader.RunOnce(*owner_, client, &cursor);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->confirmed, 1);
}

// --- forged receipts: a writer of the receipt stream without Admin's key ---

TEST_F(ReceiptsTest, ForgedReceiptsConfirmNothing) {
  Append(3);
  PublishAll();
  const auto items = Items();
  const crypto::SigningKey stranger = *crypto::SigningKey::Generate();
  struct Case {
    const char* what;
    redis::StreamFields fields;
  };
  std::vector<Case> cases;
  // The pre-signing format: a bare list of ids.
  cases.push_back({"unsigned", {{"event_ids", items[0].event_id}}});
  {
    auto f = audit::EncodeReceipt(stream_, items, Keys().admin()).value();
    f.pop_back();  // no signature
    cases.push_back({"no signature", f});
  }
  // A stranger's key claiming Admin's key id.
  auto claimed = audit::EncodeReceipt(stream_, items, stranger).value();
  claimed[1].second = Keys().admin().key_id();
  cases.push_back({"bad signature", claimed});
  cases.push_back({"unknown key", audit::EncodeReceipt(stream_, items, stranger).value()});
  // An owner's key is valid, but not for receipts.
  cases.push_back({"owner's key", audit::EncodeReceipt(stream_, items, Keys().auth()).value()});
  // A true receipt of another stream, replayed here.
  cases.push_back(
      {"other stream", audit::EncodeReceipt("audit:app", items, Keys().admin()).value()});
  // A true receipt with one more id appended after signing.
  auto grown = audit::EncodeReceipt(stream_, {items[0]}, Keys().admin()).value();
  grown[0].second += "," + items[1].event_id + ":" + std::string(64, '0');
  cases.push_back({"altered", grown});
  for (const Case& c : cases) {
    const outbox::ReceiptCycle cycle = ReadReceipt(c.fields);
    EXPECT_EQ(cycle.rejected, 1) << c.what;
    EXPECT_EQ(cycle.confirmed, 0) << c.what;
    EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'"), 0)
        << c.what;
  }
  // The true receipt still confirms.
  EXPECT_EQ(ReadReceipt(audit::EncodeReceipt(stream_, items, Keys().admin()).value()).confirmed, 3);
}

TEST_F(ReceiptsTest, ATrueReceiptConfirmsOnlyPublishedRowsWithTheReceiptedBytes) {
  const auto published = Append(2);
  PublishAll();
  const auto never_published = Append(1);  // PENDING, never claimed
  auto items = Items();
  ASSERT_EQ(items.size(), 3u);
  // A receipt (signed by Admin's key, e.g. leaked) for bytes the outbox did
  // not commit, and for a row that was never handed to Redis.
  std::vector<audit::ReceiptItem> lies;
  for (auto item : items) {
    if (item.event_id == published[0]) item.payload_sha256 = crypto::Sha256("other bytes");
    lies.push_back(item);
  }
  const outbox::ReceiptCycle cycle =
      ReadReceipt(audit::EncodeReceipt(stream_, lies, Keys().admin()).value());
  EXPECT_EQ(cycle.rejected, 0);
  EXPECT_EQ(cycle.confirmed, 1) << "only the published row with matching bytes";
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED' AND "
                        "event_id = '" +
                        published[1] + "'"),
            1);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING' AND "
                        "event_id = '" +
                        never_published[0] + "'"),
            1);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PUBLISHED' AND "
                        "event_id = '" +
                        published[0] + "'"),
            1);
}

// --- rolling upgrade: replicas of two releases side by side ---

// A dispatcher and a lease consumer of the previous release (their list of
// event types lacks auth.role.assigned, added by the current one) run beside
// current ones under load; every event reaches audit_logs exactly once and
// nothing is DEAD on either side.
TEST_F(ReceiptsTest, AnOlderReplicaBesideACurrentOneDeliversEveryEventOnce) {
  const audit::KnownEventTypes previous_release = [](audit::Owner o, absl::string_view type) {
    return type != "auth.role.assigned" && audit::IsKnownEventType(o, type);
  };
  auto old_metrics = metrics::Metrics::Unexposed("old");
  auto admin_metrics = metrics::Metrics::Unexposed("admin");
  auto dispatch = DispatchOptions(redis_);
  dispatch.resend_timeout = absl::Seconds(2);
  auto old_dispatch = dispatch;
  old_dispatch.known_event_types = previous_release;
  outbox::Dispatcher current(dispatch, metrics_->registry());
  outbox::Dispatcher previous(old_dispatch, old_metrics->registry());
  outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
  // Every event through the lease consumers (the bridge writes no audit rows).
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), admin_metrics->registry());
  admin::consumer::ConsumerOptions consumer;
  consumer.pg = admin_pg_;
  consumer.poll_interval = absl::Milliseconds(50);
  consumer.instance_id = "current";
  auto old_consumer = consumer;
  old_consumer.instance_id = "previous";
  old_consumer.known_event_types = previous_release;
  admin::consumer::LeaseConsumer consumer_current(consumer, admin_metrics->registry());
  admin::consumer::LeaseConsumer consumer_previous(old_consumer, old_metrics->registry());
  current.Start();
  previous.Start();
  reader.Start();
  bridge.Start();
  consumer_current.Start();
  consumer_previous.Start();

  constexpr int kRounds = 30, kPerRound = 10;
  for (int round = 0; round < kRounds; ++round) {
    auto tx = owner_->Begin();
    ASSERT_TRUE(tx.ok());
    for (int i = 0; i < kPerRound; ++i) {
      auto e = SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", round, "-", i));
      if (i % 2 == 1) {  // the type only the current release knows
        e.set_event_type("auth.role.assigned");
        e.mutable_record()->set_action("assign_role");
      }
      ASSERT_TRUE(outbox::Append(*tx, e, Keys().auth()).ok());
    }
    ASSERT_TRUE(tx->Commit().ok());
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int64_t n = kRounds * kPerRound;
  EXPECT_TRUE(WaitFor(
      [&] {
        return AdminScalar("SELECT count(*) FROM audit_logs") == n &&
               OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'") == n;
      },
      std::chrono::seconds(60)))
      << "audit rows " << AdminScalar("SELECT count(*) FROM audit_logs") << " of " << n;
  consumer_previous.Stop();
  consumer_current.Stop();
  bridge.Stop();
  reader.Stop();
  previous.Stop();
  current.Stop();
  EXPECT_EQ(AdminScalar("SELECT count(DISTINCT event_id) FROM audit_logs"), n);
  EXPECT_EQ(AdminScalar("SELECT count(*) FROM consumer_inbox WHERE status = 'DEAD'"), 0);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"), 0);
  EXPECT_EQ(AdminScalar("SELECT count(*) FROM poison_events"), 0);
}

// --- receipts are bound to a publication ---

TEST_F(ReceiptsTest, AReceiptFromBeforeAReplayDoesNotConfirmAfterAFailedPublication) {
  Append(1);
  PublishAll();
  redis::Client client(redis_);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  TakeOver(bridge, cursor, 1);
  outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
  std::string live = "0-0";
  ASSERT_EQ(reader.RunOnce(*owner_, client, &live)->confirmed, 1);

  ReplayAll();  // Admin lost the event
  // Its next publication fails (Redis refuses: no entry is written).
  redis::Options down = redis_;
  down.port = ::ulticode::testing::FreePort();
  outbox::Dispatcher failing(DispatchOptions(down), metrics_->registry());
  redis::Client down_client(down);
  auto failed = failing.RunOnce(*owner_, down_client);
  ASSERT_TRUE(failed.ok()) << failed.status();
  ASSERT_EQ(failed->rescheduled, 1);

  // A reader that is behind now reads the receipt of the first publication.
  std::string behind = "0-0";
  auto stale = reader.RunOnce(*owner_, client, &behind);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->receipts, 1);
  EXPECT_EQ(stale->confirmed, 0) << "a receipt from before the replay confirmed a row that was "
                                    "never published again";
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING'"), 1);
}

TEST_F(ReceiptsTest, AGenuineReceiptRepostedAfterAReplayConfirmsNothing) {
  Append(1);
  PublishAll();
  redis::Client client(redis_);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  TakeOver(bridge, cursor, 1);
  auto first = client.XRead(audit::ReceiptStreamFor(stream_), 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(first.ok() && first->size() == 1u);
  const redis::StreamFields old_receipt = (*first)[0].fields;
  outbox::ReceiptReader reader(ReaderOptions(redis_), metrics_->registry());
  std::string at = "0-0";
  ASSERT_EQ(reader.RunOnce(*owner_, client, &at)->confirmed, 1);

  // Admin lost the event; replayed and published again, not yet receipted.
  ReplayAll();
  PublishAll();
  ASSERT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PUBLISHED'"), 1);

  // Anyone who can write the receipt stream re-posts the old, genuine receipt.
  ASSERT_TRUE(client.XAddBatch(audit::ReceiptStreamFor(stream_), {old_receipt}).ok());
  auto reposted = reader.RunOnce(*owner_, client, &at);
  ASSERT_TRUE(reposted.ok()) << reposted.status();
  EXPECT_EQ(reposted->receipts, 1);
  EXPECT_EQ(reposted->confirmed, 0) << "the old receipt confirmed the new publication";

  // The receipt of the new publication does.
  TakeOver(bridge, cursor, 1);
  EXPECT_EQ(reader.RunOnce(*owner_, client, &at)->confirmed, 1);
}

TEST_F(ReceiptsTest, AReceiptNamingNoOrAnUncommittedPublicationConfirmsNothing) {
  Append(1);
  PublishAll();
  auto items = Items();
  ASSERT_EQ(items.size(), 1u);
  ASSERT_EQ(items[0].publication, 1);
  auto none = items;
  none[0].publication = 0;  // a previous release's receipt
  EXPECT_EQ(ReadReceipt(audit::EncodeReceipt(stream_, none, Keys().admin()).value()).confirmed, 0);
  auto ahead = items;
  ahead[0].publication = 2;  // an XADD whose cycle rolled back
  EXPECT_EQ(ReadReceipt(audit::EncodeReceipt(stream_, ahead, Keys().admin()).value()).confirmed, 0);
  EXPECT_EQ(ReadReceipt(audit::EncodeReceipt(stream_, items, Keys().admin()).value()).confirmed, 1);
}

TEST(ReceiptContractTest, PublicationsRoundTripAndMalformedOnesAreRefused) {
  const auto& keys = ::ulticode::testing::SharedTestKeys();
  const std::string id = "01a22b29-6e56-75ff-86a6-5dfe3ebd9b79";
  auto fields = audit::EncodeReceipt(
                    "s", {{id, crypto::Sha256("x"), 7}, {id, crypto::Sha256("x"), 0}}, keys.admin())
                    .value();
  auto decoded = audit::DecodeReceipt("s", fields, keys.directory());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[0].publication, 7);
  EXPECT_EQ((*decoded)[1].publication, 0) << "an item without one";
  const std::string sha = absl::BytesToHexString(crypto::Sha256("x"));
  for (const char* publication : {"0", "01", "-1", "+1", "x", "", "99999999999999999999", "1:2"}) {
    const std::string events = absl::StrCat(id, ":", sha, ":", publication);
    auto bad = fields;
    bad[0].second = events;
    bad[2].second = keys.admin().Sign(absl::StrCat("ulticode.receipt.v1\ns\n", events)).value();
    EXPECT_EQ(audit::DecodeReceipt("s", bad, keys.directory()).status().code(),
              absl::StatusCode::kInvalidArgument)
        << publication;
  }
  EXPECT_EQ(audit::PublicationOf({{"publication", "12"}}), 12);
  EXPECT_EQ(audit::PublicationOf({}), 0);
  for (const char* v : {"0", "012", "-3", "1e3", " 1", "9223372036854775808"}) {
    EXPECT_EQ(audit::PublicationOf({{"publication", v}}), 0) << v;
  }
  EXPECT_EQ(audit::PublicationOf({{"publication", "1"}, {"publication", "2"}}), 0) << "twice";
}

TEST(ReceiptContractTest, MalformedSignedItemsRefuseTheWholeReceipt) {
  const auto& keys = ::ulticode::testing::SharedTestKeys();
  auto good =
      audit::EncodeReceipt("s", {{"01a22b29-6e56-75ff-86a6-5dfe3ebd9b79", crypto::Sha256("x")}},
                           keys.admin())
          .value();
  ASSERT_TRUE(audit::DecodeReceipt("s", good, keys.directory()).ok());
  for (const char* events : {"01A22B29-6E56-75FF-86A6-5DFE3EBD9B79:00", "nope",
                             "01a22b29-6e56-75ff-86a6-5dfe3ebd9b79"}) {
    auto bad = good;
    bad[0].second = events;
    bad[2].second = keys.admin().Sign(absl::StrCat("ulticode.receipt.v1\ns\n", events)).value();
    auto decoded = audit::DecodeReceipt("s", bad, keys.directory());
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument) << events;
  }
  auto twice = good;
  twice.push_back(good[0]);
  EXPECT_EQ(audit::DecodeReceipt("s", twice, keys.directory()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ulticode
