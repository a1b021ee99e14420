// Delivery confirmed by the consumer, not by the broker: Admin's receipts
// mark outbox rows CONFIRMED; rows without a receipt are published again;
// a Redis that lost everything loses nothing. Real PostgreSQL and Redis
// (a private Redis where it is wiped).
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "common/audit/receipt.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/outbox/dispatcher.h"
#include "common/outbox/outbox_store.h"
#include "common/outbox/receipt_reader.h"
#include "gtest/gtest.h"
#include "tests/support/audit_events.h"
#include "tests/support/pg_query.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"

namespace ulticode::admin {
const std::vector<migrations::Migration>& Migrations();
}

namespace ulticode {
namespace {

using ::ulticode::testing::SampleEvent;
using ::ulticode::testing::WaitFor;

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
    stream_ = "test:rcpt:" + ::ulticode::testing::RandomSuffix();
    metrics_ = metrics::Metrics::Unexposed("test");
  }

  std::vector<std::string> Append(int n) {
    std::vector<std::string> ids;
    auto tx = owner_->Begin();
    EXPECT_TRUE(tx.ok());
    for (int i = 0; i < n; ++i) {
      auto e = SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i));
      EXPECT_TRUE(outbox::Append(*tx, e).ok());
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
    return b;
  }
  outbox::ReceiptReaderOptions ReaderOptions(const redis::Options& ro) {
    outbox::ReceiptReaderOptions r;
    r.owner = audit::v1::OWNER_AUTH;
    r.stream = audit::ReceiptStreamFor(stream_);
    r.block = absl::Milliseconds(50);
    r.pg = owner_pg_;
    r.redis = ro;
    r.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    return r;
  }

  std::vector<std::string> AllIds() {
    std::vector<std::string> ids;
    pg::Statement st{"ids", "SELECT event_id::text FROM audit_outbox"};
    auto r = owner_->Execute(st);
    EXPECT_TRUE(r.ok()) << r.status();
    for (int i = 0; r.ok() && i < r->rows(); ++i) ids.push_back(r->GetString(i, 0));
    return ids;
  }

  int64_t OwnerScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*owner_, sql);
  }
  int64_t AdminScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*admin_, sql);
  }

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
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client, "d").ok());
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PUBLISHED'"), 3);

  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor;
  cursor.owner = audit::v1::OWNER_AUTH;
  cursor.stream = stream_;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = bridge.RunOnce(*admin_, client, cursor);
        return c.ok() && c->receipted == 3;
      },
      std::chrono::seconds(10)));
  // One receipt entry for the batch, listing exactly the ids taken over.
  auto receipts = client.XRead(audit::ReceiptStreamFor(stream_), 10, absl::ZeroDuration(), "0");
  ASSERT_TRUE(receipts.ok()) << receipts.status();
  ASSERT_EQ(receipts->size(), 1u);
  auto got = audit::DecodeReceipt((*receipts)[0].fields);
  std::sort(got.begin(), got.end());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(got, ids);

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
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client, "d").ok());
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
  ASSERT_TRUE(dispatcher.RunOnce(*owner_, client, "d").ok());
  auto len = client.XInfoStream(stream_);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->length, 4) << "each event published twice";
  // Confirmed rows are never swept again.
  ASSERT_TRUE(outbox::Confirm(*owner_, AllIds()).ok());
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

TEST_F(ReceiptsTest, AReceiptForAClaimedRowWinsOverTheLateSettleOfThatClaim) {
  auto ids = Append(2);
  auto claimed = outbox::Claim(*owner_, "d", absl::Seconds(30), 10);
  ASSERT_TRUE(claimed.ok() && claimed->size() == 2);
  ASSERT_TRUE(outbox::Confirm(*owner_, ids).ok());  // the receipt of an earlier publication
  const auto& a = (*claimed)[0];
  const auto& b = (*claimed)[1];
  auto marked = outbox::MarkPublished(*owner_, {{a.event_id, a.fencing_token, "1-1"}});
  auto retried =
      outbox::Reschedule(*owner_, {{b.event_id, b.fencing_token, absl::Seconds(1)}}, "x");
  ASSERT_TRUE(marked.ok() && retried.ok());
  EXPECT_EQ(*marked, 0);
  EXPECT_EQ(*retried, 0);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'"), 2);
}

TEST_F(ReceiptsTest, AReaderWhoseCursorIsAheadOfARecreatedStreamStartsOver) {
  auto ids = Append(1);
  redis::Client client(redis_);
  ASSERT_TRUE(client.XAddBatch(audit::ReceiptStreamFor(stream_), {audit::EncodeReceipt(ids)}).ok());
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

TEST(ReceiptContractTest, MalformedIdsAreSkippedAndCounted) {
  int rejected = 0;
  auto ids = audit::DecodeReceipt(
      {{"event_ids",
        "01a22b29-6e56-75ff-86a6-5dfe3ebd9b79,nope,01A22B29-6E56-75FF-86A6-5DFE3EBD9B79,"}},
      &rejected);
  EXPECT_EQ(ids, std::vector<std::string>{"01a22b29-6e56-75ff-86a6-5dfe3ebd9b79"});
  EXPECT_EQ(rejected, 2);
  audit::DecodeReceipt({{"something", "else"}}, &rejected);
  EXPECT_EQ(rejected, 1) << "an entry without event_ids is malformed";
  EXPECT_EQ(audit::DecodeReceipt(audit::EncodeReceipt({"a-b"})).size(), 0u);
}

}  // namespace
}  // namespace ulticode
