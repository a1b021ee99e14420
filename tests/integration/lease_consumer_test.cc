// The Admin lease consumer against real PostgreSQL: audit rows field by
// field, retries with back-off then DEAD, DEAD at once for invalid events,
// fencing of a stalled worker, heartbeats, and two consumers on one inbox.
#include "admin/consumer/lease_consumer.h"

#include <atomic>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "admin/inbox/inbox_store.h"
#include "admin/migrations.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/seal/seal.h"
#include "gtest/gtest.h"
#include "tests/support/audit_events.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode::admin::consumer {
namespace {

using ::ulticode::testing::SampleEvent;
using ::ulticode::testing::WaitFor;

class LeaseConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    options_.pg.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "leasetest"));
    auto conn = pg::Connection::Connect(options_.pg);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, admin::Migrations()).ok());
    options_.retry_backoff = {absl::Milliseconds(20), absl::Milliseconds(100)};
    options_.loop_backoff = {absl::Milliseconds(20), absl::Milliseconds(100)};
    options_.poll_interval = absl::Milliseconds(50);
    metrics_ = metrics::Metrics::Unexposed("test");
  }

  // Puts events into the inbox the way the bridge does.
  void Receive(const std::vector<audit::AuditEvent>& events) {
    std::vector<inbox::Arrival> arrivals;
    const crypto::SigningKey& key = ::ulticode::testing::SharedTestKeys().auth();
    std::vector<std::string> envelopes;
    for (const auto& e : events) envelopes.push_back(audit::Serialize(e));
    const std::vector<absl::string_view> bundle(envelopes.begin(), envelopes.end());
    const std::vector<std::string> seals = seal::SealBundle(key, bundle).value();
    for (size_t i = 0; i < events.size(); ++i) {
      const audit::AuditEvent& e = events[i];
      inbox::AcceptedEntry a{e.event_id(), e.owner(), e.event_type(), absl::Now(),
                             envelopes[i], seals[i],  key.key_id(),   e,
                             {},           {}};
      arrivals.push_back(inbox::Arrival{"audit:auth", absl::StrCat("1-", arrivals.size()), a});
    }
    auto tx = conn_->Begin();
    ASSERT_TRUE(tx.ok());
    auto r = inbox::InsertIfAbsent(*tx, "audit_logs", arrivals, inbox::InsertAs::kPending);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(tx->Commit().ok());
  }

  std::vector<audit::AuditEvent> Events(int n) {
    std::vector<audit::AuditEvent> out;
    for (int i = 0; i < n; ++i)
      out.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i)));
    return out;
  }

  int64_t Scalar(const std::string& sql) { return ::ulticode::testing::QueryInt(*conn_, sql); }
  std::string Text(const std::string& sql) { return ::ulticode::testing::QueryText(*conn_, sql); }

  std::unique_ptr<pg::Connection> Dial() {
    auto c = pg::Connection::Connect(options_.pg);
    EXPECT_TRUE(c.ok());
    return c.ok() ? std::move(c).value() : nullptr;
  }

  ConsumerOptions options_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

TEST_F(LeaseConsumerTest, WritesOneAuditRowPerEventFieldByFieldAndMarksProcessed) {
  auto e = SampleEvent(audit::v1::OWNER_AUTH, "u42");
  e.mutable_record()->set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  (*e.mutable_record()->mutable_old_value()->mutable_fields())["disabled"].set_bool_value(false);
  Receive({e});
  LeaseConsumer consumer(options_, metrics_->registry());
  auto cycle = consumer.RunOnce(*conn_, "w1");
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->claimed, 1);
  EXPECT_EQ(cycle->processed, 1);
  EXPECT_EQ(cycle->written, 1);

  pg::Statement st{"row",
                   "SELECT owner, event_type, actor, subject, action, entity_type, entity_id,"
                   " old_value::text, new_value::text, client_ip, user_agent, request_id, trace_id,"
                   " (extract(epoch FROM occurred_at) * 1000000)::bigint, envelope"
                   " FROM audit_logs WHERE event_id = $1::uuid"};
  auto r = conn_->Execute(st, {pg::Text(e.event_id())});
  ASSERT_TRUE(r.ok() && r->rows() == 1) << (r.ok() ? "" : r.status().ToString());
  EXPECT_EQ(r->GetString(0, 0), "auth");
  EXPECT_EQ(r->GetString(0, 1), "auth.user.created");
  EXPECT_EQ(r->GetString(0, 2), "tester");
  EXPECT_EQ(r->GetString(0, 3), "u42");
  EXPECT_EQ(r->GetString(0, 4), "create_user");
  EXPECT_EQ(r->GetString(0, 5), "user");
  EXPECT_EQ(r->GetString(0, 6), "u42");
  EXPECT_EQ(r->GetString(0, 7), R"({"disabled": false})");
  EXPECT_EQ(r->GetString(0, 8), R"({"name": "name-u42"})");
  EXPECT_EQ(r->GetString(0, 9), "10.0.0.1");
  EXPECT_EQ(r->GetString(0, 10), "test-agent");
  EXPECT_EQ(r->GetString(0, 11), "req-1");
  EXPECT_EQ(r->GetString(0, 12), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(r->GetInt64(0, 13),
            e.occurred_at().seconds() * 1000000 + e.occurred_at().nanos() / 1000);
  EXPECT_EQ(r->GetBytes(0, 14), audit::Serialize(e));
  EXPECT_EQ(Text("SELECT status FROM consumer_inbox"), "PROCESSED");
  EXPECT_EQ(Scalar("SELECT count(*) FROM consumer_inbox WHERE processed_at IS NOT NULL"
                   " AND lease_owner IS NULL"),
            1);
}

TEST_F(LeaseConsumerTest, AFailingHandlerRetriesWithBackoffThenGoesDeadAtTheLimit) {
  auto events = Events(3);
  const std::string bad = events[1].event_id();
  Receive(events);
  options_.max_attempts = 3;
  ConsumerHooks hooks;
  hooks.handle = [&](const audit::AuditEvent& e) {
    return e.event_id() == bad ? absl::UnavailableError("downstream said no") : absl::OkStatus();
  };
  LeaseConsumer consumer(options_, metrics_->registry(), hooks);
  auto first = consumer.RunOnce(*conn_, "w1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->processed, 2) << "one bad event does not hold the others back";
  EXPECT_EQ(first->retried, 1);
  const std::string where = absl::StrCat(" FROM consumer_inbox WHERE event_id = '", bad, "'");
  EXPECT_EQ(Text("SELECT status" + where), "PENDING");
  EXPECT_EQ(Scalar("SELECT attempts" + where), 1);
  EXPECT_EQ(Scalar("SELECT (next_retry_at > now())::int" + where), 1) << "backed off";
  EXPECT_NE(Text("SELECT last_error" + where).find("downstream said no"), std::string::npos);
  EXPECT_EQ(Scalar("SELECT (first_failed_at IS NOT NULL)::int" + where), 1);

  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_TRUE(consumer.RunOnce(*conn_, "w1").ok());
        return Text("SELECT status" + where) == "DEAD";
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(Scalar("SELECT attempts" + where), 3) << "DEAD exactly at the limit";
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 2);
}

TEST_F(LeaseConsumerTest, AnEventThatFailsValidationGoesDeadAtOnce) {
  auto good = Events(1);
  Receive(good);
  // Bytes that passed the bridge but break the contract (e.g. an older
  // bridge, or a row written by hand): retrying cannot fix them.
  auto broken = SampleEvent(audit::v1::OWNER_AUTH, "x");
  broken.mutable_record()->clear_action();
  pg::Statement ins{"ins",
                    "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload,"
                    " payload_sha256, stream, stream_entry_id)"
                    " VALUES ('audit_logs', $1::uuid, 'auth', 'auth.user.created', $2,"
                    " sha256($2), 'audit:auth', '9-9')"};
  ASSERT_TRUE(
      conn_->Execute(ins, {pg::Text(broken.event_id()), pg::Bytes(audit::Serialize(broken))}).ok());
  LeaseConsumer consumer(options_, metrics_->registry());
  auto cycle = consumer.RunOnce(*conn_, "w1");
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->dead, 1);
  EXPECT_EQ(cycle->processed, 1);
  const std::string where =
      absl::StrCat(" FROM consumer_inbox WHERE event_id = '", broken.event_id(), "'");
  EXPECT_EQ(Text("SELECT status" + where), "DEAD");
  EXPECT_EQ(Scalar("SELECT attempts" + where), 1);
  EXPECT_NE(Text("SELECT last_error" + where).find("action"), std::string::npos);
}

// Rolling upgrade: an event of a type this binary does not know yet (a newer
// owner release wrote it, a newer bridge took it on the fallback path) is
// left PENDING for a consumer that knows it: never DEAD, no attempt spent.
TEST_F(LeaseConsumerTest, AnEventNewerThanThisBinaryIsLeftForANewerConsumerNotDead) {
  auto newer = SampleEvent(audit::v1::OWNER_AUTH, "x");
  newer.set_event_type("auth.user.teleported");  // unknown to this build
  ASSERT_TRUE(audit::IsNewerThanKnown(audit::Validate(newer))) << audit::Validate(newer);
  pg::Statement ins{"ins",
                    "INSERT INTO consumer_inbox (consumer, event_id, owner, event_type, payload,"
                    " payload_sha256, stream, stream_entry_id)"
                    " VALUES ('audit_logs', $1::uuid, 'auth', 'auth.user.teleported', $2,"
                    " sha256($2), 'audit:auth', '9-9')"};
  ASSERT_TRUE(
      conn_->Execute(ins, {pg::Text(newer.event_id()), pg::Bytes(audit::Serialize(newer))}).ok());
  options_.max_attempts = 1;  // even at the limit
  LeaseConsumer consumer(options_, metrics_->registry());
  auto cycle = consumer.RunOnce(*conn_, "w1");
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->dead, 0);
  EXPECT_EQ(cycle->postponed, 1);
  const std::string where =
      absl::StrCat(" FROM consumer_inbox WHERE event_id = '", newer.event_id(), "'");
  EXPECT_EQ(Text("SELECT status" + where), "PENDING");
  EXPECT_EQ(Scalar("SELECT attempts" + where), 0);
  EXPECT_EQ(Scalar("SELECT (next_retry_at > now() + interval '1 second')::int" + where), 1);
  // Due again: this consumer leaves it to another (a newer one) for good.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(conn_->Execute({"due", "UPDATE consumer_inbox SET next_retry_at = now()"}).ok());
    auto again = consumer.RunOnce(*conn_, "w1");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->claimed, 0);
  }
  EXPECT_EQ(Text("SELECT status" + where), "PENDING");
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 0);
}

TEST_F(LeaseConsumerTest, AStalledWorkerWhoseLeaseWasTakenOverCannotCommitLate) {
  Receive(Events(1));
  options_.lease = absl::Milliseconds(300);
  options_.heartbeat_interval = absl::ZeroDuration();  // a stalled process sends none
  // The stale worker claims, then stalls (a long GC pause, a partition).
  absl::Notification stale_claimed, release_stale;
  ConsumerHooks stall;
  stall.after_claim = [&](const auto&) {
    stale_claimed.Notify();
    release_stale.WaitForNotification();
  };
  LeaseConsumer stale(options_, metrics_->registry(), stall);
  absl::StatusOr<ConsumerCycle> stale_cycle;
  auto stale_conn = Dial();
  std::thread stale_thread([&] { stale_cycle = stale.RunOnce(*stale_conn, "stale"); });
  stale_claimed.WaitForNotification();

  // Once the lease expires a fresh worker takes the row over, and is itself
  // still working on it when the stale worker wakes up.
  absl::Notification fresh_claimed, release_fresh;
  ConsumerHooks hold;
  hold.after_claim = [&](const auto&) {
    fresh_claimed.Notify();
    release_fresh.WaitForNotification();
  };
  auto m2 = metrics::Metrics::Unexposed("fresh");
  LeaseConsumer fresh(options_, m2->registry(), hold);
  absl::StatusOr<ConsumerCycle> fresh_cycle;
  auto fresh_conn = Dial();
  std::thread fresh_thread([&] {
    WaitFor(
        [&] {
          fresh_cycle = fresh.RunOnce(*fresh_conn, "fresh");
          return !fresh_cycle.ok() || fresh_cycle->claimed > 0;
        },
        std::chrono::seconds(10));
  });
  ASSERT_TRUE(fresh_claimed.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the expired lease was never taken over";

  release_stale.Notify();
  stale_thread.join();
  ASSERT_TRUE(stale_cycle.ok()) << stale_cycle.status();
  EXPECT_EQ(stale_cycle->processed, 0);
  EXPECT_EQ(stale_cycle->written, 0);
  EXPECT_EQ(stale_cycle->fenced, 1) << "the stale commit was fenced off";
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 0) << "nothing committed late";
  EXPECT_EQ(Text("SELECT status FROM consumer_inbox"), "PROCESSING") << "still the fresh worker's";

  release_fresh.Notify();
  fresh_thread.join();
  ASSERT_TRUE(fresh_cycle.ok()) << fresh_cycle.status();
  EXPECT_EQ(fresh_cycle->processed, 1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 1);
  EXPECT_EQ(Text("SELECT status FROM consumer_inbox"), "PROCESSED");
  EXPECT_EQ(Scalar("SELECT attempts FROM consumer_inbox"), 2);
}

TEST_F(LeaseConsumerTest, TheHeartbeatKeepsTheLeaseThroughLongWork) {
  Receive(Events(1));
  options_.threads = 1;
  options_.lease = absl::Seconds(1);
  options_.heartbeat_interval = absl::Milliseconds(100);
  absl::Notification claimed, finish;
  ConsumerHooks slow;
  slow.after_claim = [&](const auto&) {
    claimed.Notify();
    finish.WaitForNotification();
  };
  LeaseConsumer busy(options_, metrics_->registry(), slow);
  busy.Start();
  claimed.WaitForNotification();
  // Several lease lengths pass while the work is in hand; another worker
  // keeps trying and never gets the row.
  auto m2 = metrics::Metrics::Unexposed("other");
  LeaseConsumer other(options_, m2->registry());
  const absl::Time until = absl::Now() + 3 * options_.lease;
  while (absl::Now() < until) {
    auto c = other.RunOnce(*conn_, "other");
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->claimed, 0) << "lease lapsed despite the heartbeat";
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(Scalar("SELECT (lease_expires_at > now())::int FROM consumer_inbox"), 1);
  finish.Notify();
  ASSERT_TRUE(WaitFor([&] { return Text("SELECT status FROM consumer_inbox") == "PROCESSED"; },
                      std::chrono::seconds(10)));
  busy.Stop();
  EXPECT_EQ(Scalar("SELECT attempts FROM consumer_inbox"), 1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_logs"), 1);
}

TEST_F(LeaseConsumerTest, TwoConsumersOnOneInboxNeverProcessTheSameRowConcurrently) {
  constexpr int kRows = 600;
  options_.threads = 2;
  options_.batch_size = 25;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<int> overlaps{0};
  ConsumerHooks watch;
  watch.after_claim = [&](const std::vector<LeasedRow>& rows) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& r : rows) {
      if (!in_flight.insert(r.event_id).second) ++overlaps;
    }
  };
  watch.handle = [&](const audit::AuditEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    in_flight.erase(e.event_id());
    return absl::OkStatus();
  };
  auto m2 = metrics::Metrics::Unexposed("b");
  LeaseConsumer a(options_, metrics_->registry(), watch), b(options_, m2->registry(), watch);
  a.Start();
  b.Start();
  std::vector<audit::AuditEvent> events;
  for (int i = 0; i < kRows; ++i)
    events.push_back(SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i)));
  for (int i = 0; i < kRows; i += 50) Receive({events.begin() + i, events.begin() + i + 50});
  ASSERT_TRUE(WaitFor([&] { return Scalar("SELECT count(*) FROM audit_logs") == kRows; },
                      std::chrono::seconds(30)));
  a.Stop();
  b.Stop();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(
      Scalar("SELECT count(*) FROM consumer_inbox WHERE status = 'PROCESSED' AND attempts = 1"),
      kRows)
      << "every row claimed exactly once";
  EXPECT_EQ(Scalar("SELECT count(DISTINCT lease_owner) FROM consumer_inbox"), 0);
}

}  // namespace
}  // namespace ulticode::admin::consumer
