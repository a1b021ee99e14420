// One confirmation protocol: an outbox row turns CONFIRMED only on a proof
// that its event is in Admin's log, and a row is published again only on
// evidence that its entry was lost (owner/outbox/resend.h). Real
// PostgreSQL and Redis (a private Redis where it is wiped or bounded); the
// log runs in-process (the sequencer and the witness feed, as Admin's log
// job runs them) and the owner witnesses it as its service does.
//
// The re-send rule is checked by a generated test: seeded random sequences
// of publishing, Admin reading and acknowledging, Admin's trimmer, the
// stream guard trimming unread entries and Redis losing the stream, with an
// independent model of which entries are present and acknowledged
// (ULTICODE_RESEND_SEED reproduces a run).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "admin/maintenance/housekeeping.h"
#include "admin/maintenance/stream_guard.h"
#include "admin/migrations.h"
#include "admin/transparency/sequencer.h"
#include "admin/transparency/witness_feed.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/redis/stream_id.h"
#include "common/tlog/note.h"
#include "common/tlog/witnessing.h"
#include "gtest/gtest.h"
#include "owner/outbox/dispatcher.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/outbox_store.h"
#include "owner/outbox/proof_reader.h"
#include "owner/outbox/witness.h"
#include "tests/support/audit_events.h"
#include "tests/support/keys.h"
#include "tests/support/pg_query.h"
#include "tests/support/process.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using ::ulticode::testing::SampleEvent;
using ::ulticode::testing::TestKeys;
using ::ulticode::testing::WaitFor;

const TestKeys& Keys() { return ::ulticode::testing::SharedTestKeys(); }

constexpr char kGroup[] = "admin-audit";

class ConfirmationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    owner_pg_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "cfowner"));
    admin_pg_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "cfadmin"));
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
    stream_ = "test:cf:" + ::ulticode::testing::RandomSuffix();
    metrics_ = metrics::Metrics::Unexposed("test");
    auto signer = tlog::NoteSigner::Create(TestKeys::kLogOrigin, Keys().log());
    ASSERT_TRUE(signer.ok()) << signer.status();
    log_signer_ = std::make_unique<tlog::NoteSigner>(*std::move(signer));
  }

  std::vector<std::string> Append(int n, const std::string& tag = "u") {
    std::vector<std::string> ids;
    auto tx = owner_->Begin();
    EXPECT_TRUE(tx.ok());
    for (int i = 0; i < n; ++i) {
      auto e = SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat(tag, i));
      EXPECT_TRUE(outbox::Append(*tx, e, Keys().auth()).ok());
      ids.push_back(e.event_id());
    }
    EXPECT_TRUE(tx->Commit().ok());
    return ids;
  }

  // Proofs of `ids` that leave the rows' seals as they are.
  static std::vector<outbox::Proved> Proofs(const std::vector<std::string>& ids) {
    std::vector<outbox::Proved> out;
    for (const std::string& id : ids) out.push_back({id, "", ""});
    return out;
  }

  outbox::DispatcherOptions DispatchOptions(const redis::Options& ro) {
    outbox::DispatcherOptions d;
    d.owner = audit::v1::OWNER_AUTH;
    d.stream = stream_;
    d.pg = owner_pg_;
    d.redis = ro;
    d.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    d.poll_interval = absl::Milliseconds(50);
    d.admin_group = kGroup;
    d.signer = &Keys().auth();
    return d;
  }
  admin::inbox::BridgeOptions BridgeOptions(const redis::Options& ro) {
    admin::inbox::BridgeOptions b;
    b.streams = {{audit::v1::OWNER_AUTH, stream_}};
    b.group = kGroup;
    b.consumer_name = "bridge";
    b.block = absl::Milliseconds(50);
    b.pg = admin_pg_;
    b.redis = ro;
    b.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    b.keys = &Keys().directory_file();
    b.write_audit_logs = true;
    return b;
  }

  // The owner's witness of the log and its proof reader, as the owner's
  // service assembles them.
  std::unique_ptr<outbox::Witness> MakeWitness(prometheus::Registry& registry) {
    outbox::WitnessOptions w;
    w.owner = audit::v1::OWNER_AUTH;
    w.audit_stream = stream_;
    auto key = tlog::NoteVerifier::Parse(Keys().LogVerifierKey());
    EXPECT_TRUE(key.ok()) << key.status();
    w.log_keys = {*std::move(key)};
    w.key = &Keys().auth();
    w.keys = &Keys().directory_file();
    auto made = outbox::Witness::Create(std::move(w), registry);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }
  outbox::ProofReaderOptions ReaderOptions(const redis::Options& ro, outbox::Witness* witness) {
    outbox::ProofReaderOptions r;
    r.owner = audit::v1::OWNER_AUTH;
    r.stream = tlog::ProofStreamFor(stream_);
    r.block = absl::Milliseconds(50);
    r.pg = owner_pg_;
    r.redis = ro;
    r.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    r.witness = witness;
    return r;
  }

  // Admin's log job in-process: sequences, signs and feeds the witness.
  class Log {
   public:
    // `proof_stream_bytes`: the proof stream's share (--proof-stream-max-bytes);
    // `checkpoint_interval`: zero signs a checkpoint whenever the log grew.
    Log(ConfirmationTest& t, const redis::Options& ro,
        int64_t proof_stream_bytes = int64_t{64} << 20,
        absl::Duration checkpoint_interval = absl::Milliseconds(50))
        : sequencer_({TestKeys::kLogOrigin, t.log_signer_.get(), 1000, checkpoint_interval}),
          feed_(Feed(t, ro, proof_stream_bytes), t.metrics_->registry()),
          conn_(*pg::Connection::Connect(t.admin_pg_)) {}
    ~Log() { Stop(); }
    absl::Status RunOnce() {
      for (;;) {
        auto run = sequencer_.RunOnce(*conn_);
        if (!run.ok()) return run.status();
        if (run->taken < 1000) break;
      }
      return feed_.RunOnce(*conn_);
    }
    void Start() {
      thread_ = std::thread([this] {
        while (!stop_) {
          (void)RunOnce();
          absl::SleepFor(absl::Milliseconds(50));
        }
      });
    }
    void Stop() {
      stop_ = true;
      if (thread_.joinable()) thread_.join();
    }

   private:
    static admin::transparency::WitnessFeedOptions Feed(ConfirmationTest& t,
                                                        const redis::Options& ro,
                                                        int64_t proof_stream_bytes) {
      admin::transparency::WitnessFeedOptions f;
      f.proof_stream_bytes = proof_stream_bytes;
      f.owners = {{"auth", t.stream_}};
      f.redis = ro;
      f.keys = &Keys().directory_file();
      f.resend = absl::Milliseconds(500);
      return f;
    }
    admin::transparency::Sequencer sequencer_;
    admin::transparency::WitnessFeed feed_;
    std::unique_ptr<pg::Connection> conn_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
  };

  admin::inbox::StreamCursor Cursor() const {
    admin::inbox::StreamCursor cursor;
    cursor.owner = audit::v1::OWNER_AUTH;
    cursor.stream = stream_;
    return cursor;
  }

  // Publishes every due row (as the dispatcher's threads would).
  void PublishAll(outbox::Dispatcher& dispatcher, redis::Client& client) {
    for (;;) {
      auto cycle = dispatcher.RunOnce(*owner_, client);
      ASSERT_TRUE(cycle.ok()) << cycle.status();
      if (cycle->claimed == 0) return;
    }
  }

  int64_t OwnerScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*owner_, sql);
  }
  int64_t AdminScalar(const std::string& sql) {
    return ::ulticode::testing::QueryInt(*admin_, sql);
  }
  // Commits `events` more events, publishes them, and waits until Admin
  // wrote them all (`*total` counts them in).
  void Deliver(int events, int64_t* total, outbox::Dispatcher& dispatcher, redis::Client& client,
               admin::inbox::InboxBridge& bridge, admin::inbox::StreamCursor& cursor) {
    Append(events);
    *total += events;
    PublishAll(dispatcher, client);
    ASSERT_TRUE(WaitFor(
        [&] {
          (void)bridge.RunOnce(*admin_, client, cursor);
          return AdminScalar("SELECT count(*) FROM audit_logs") == *total;
        },
        std::chrono::seconds(30)));
  }

  int64_t Confirmed() {
    return OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'CONFIRMED'");
  }

  pg::ConnectOptions owner_pg_, admin_pg_;
  std::unique_ptr<pg::Connection> owner_, admin_;
  redis::Options redis_;
  std::string stream_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<tlog::NoteSigner> log_signer_;
};

// --- one confirmation protocol -------------------------------------------

TEST_F(ConfirmationTest, ARowIsConfirmedByAProofThatItsEventIsInTheLogAndByNothingElse) {
  Append(5);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)bridge.RunOnce(*admin_, client, cursor);
        return AdminScalar("SELECT count(*) FROM audit_logs") == 5;
      },
      std::chrono::seconds(10)));
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(redis_, witness.get()), metrics_->registry());
  std::string at = "0-0";
  ASSERT_TRUE(reader.RunOnce(*owner_, client, &at).ok());
  EXPECT_EQ(Confirmed(), 0) << "in Admin's inbox and acknowledged, but not yet in the log";

  Log log(*this, redis_);
  ASSERT_TRUE(log.RunOnce().ok());
  ASSERT_TRUE(reader.RunOnce(*owner_, client, &at).ok());
  EXPECT_EQ(Confirmed(), 5);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM log_witnessed"), 1) << "and it cosigned";
}

// A proof that arrives while the publishing cycle still holds the row waits
// for its commit, then finds it PUBLISHED.
TEST_F(ConfirmationTest, AProofThatOvertakesThePublishingCycleConfirmsOnceItCommits) {
  auto ids = Append(2);
  auto cycle = owner_->Begin();
  ASSERT_TRUE(cycle.ok());
  auto locked = outbox::LockDue(*cycle, 10);
  ASSERT_TRUE(locked.ok() && locked->size() == 2);
  ASSERT_TRUE(outbox::MarkPublished(*cycle, {{.event_id = ids[0], .stream_entry_id = "1-1"},
                                             {.event_id = ids[1], .stream_entry_id = "1-2"}})
                  .ok());
  auto reader_conn = pg::Connection::Connect(owner_pg_);
  ASSERT_TRUE(reader_conn.ok());
  std::thread proof([&] {
    auto confirmed = outbox::ConfirmLogged(**reader_conn, Proofs(ids));
    ASSERT_TRUE(confirmed.ok()) << confirmed.status();
    EXPECT_EQ(*confirmed, 2) << "waited for the cycle's commit, then found PUBLISHED";
  });
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
  proof.join();
  EXPECT_EQ(Confirmed(), 2);
}

// After a replay (Admin lost the event), a proof confirms the row only once
// it was published again, not while it waits (an attempt whose XADD may
// have landed counts as published).
TEST_F(ConfirmationTest, AProofConfirmsAReplayedRowOnlyOnceItIsPublishedAgain) {
  auto ids = Append(1);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  ASSERT_EQ(*outbox::ConfirmLogged(*owner_, Proofs(ids)), 1);
  auto tx = owner_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_EQ(
      *outbox::ReplayConfirmed(*tx, absl::Now() - absl::Hours(1), absl::Now() + absl::Hours(1)), 1);
  ASSERT_TRUE(tx->Commit().ok());
  EXPECT_EQ(*outbox::ConfirmLogged(*owner_, Proofs(ids)), 0) << "replayed, not yet published";

  PublishAll(dispatcher, client);
  EXPECT_EQ(*outbox::ConfirmLogged(*owner_, Proofs(ids)), 1);
  // Published again with the seal it was first published with: the event's
  // leaf is the same whichever delivery Admin keeps.
  auto entries = client.XRead(stream_, 100, absl::ZeroDuration(), "0");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ(*redis::FieldOf((*entries)[0].fields, audit::kSealField),
            *redis::FieldOf((*entries)[1].fields, audit::kSealField));
}

TEST_F(ConfirmationTest, AReaderWhoseCursorIsAheadOfARecreatedStreamStartsOver) {
  Append(1);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)bridge.RunOnce(*admin_, client, cursor);
        return AdminScalar("SELECT count(*) FROM audit_logs") == 1;
      },
      std::chrono::seconds(10)));
  Log log(*this, redis_);
  ASSERT_TRUE(log.RunOnce().ok());
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(redis_, witness.get()), metrics_->registry());
  // A cursor written by a Redis whose clock was far ahead of this one.
  std::string at = absl::StrCat(absl::ToUnixMillis(absl::Now() + absl::Hours(24)), "-0");
  auto idle = reader.RunOnce(*owner_, client, &at);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(*idle, 0);
  EXPECT_EQ(at, "0-0") << "reset once the stream is seen to be behind it";
  ASSERT_TRUE(reader.RunOnce(*owner_, client, &at).ok());
  EXPECT_EQ(Confirmed(), 1);
}

// The proof stream is Admin's to write; the stream guard holds it to its
// share like the streams the owners write.
TEST_F(ConfirmationTest, TheProofStreamIsHeldToItsShare) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  redis::Options ro = redis_;
  ro.port = own.port();
  redis::Client client(ro);
  const std::string proofs = tlog::ProofStreamFor(stream_);
  const std::string value(16 << 10, 'p');
  for (int i = 0; i < 256; ++i)
    ASSERT_TRUE(client.XAddBatch(proofs, {{{"log_proofs", value}}}).ok());
  constexpr int64_t kShare = 1 << 20;
  admin::maintenance::StreamGuard guard({{audit::v1::OWNER_AUTH, stream_}}, int64_t{64} << 20,
                                        kShare, ro, metrics_->registry());
  ASSERT_TRUE(guard.RunOnce().ok());
  auto bytes = client.Command({"MEMORY", "USAGE", proofs, "SAMPLES", "0"});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_LE(bytes->integer(), kShare);
  EXPECT_GT(*client.XLen(proofs), 0) << "the newest entries are kept";
}

// Every send of proofs fits in half the proof stream's share, so the send
// before it can still sit there unread (the owner cosigns only once it has
// read every part of a send, and the stream guard removes the oldest entries
// of a stream over its share); and sends of that size prove every row, also
// when the log grows while a send is cut short (a newer checkpoint is
// signed before the send's last part went out: the witness holds the cut
// checkpoint, and the rest of its proofs must still reach it). Shares,
// batches and growth are generated (ULTICODE_FEED_SEED reproduces a run);
// the first round always cuts its send and grows the log under it.
TEST_F(ConfirmationTest, EverySendOfProofsFitsHalfItsShareAndProvesEveryRow) {
  const uint32_t seed = ::ulticode::testing::SeedFromEnv("ULTICODE_FEED_SEED", "feed");
  std::mt19937 rng(seed);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(redis_, witness.get()), metrics_->registry());
  const std::string proofs = tlog::ProofStreamFor(stream_);
  std::string read_at = "0-0", sent_at = "0-0";
  int64_t total = 0;
  auto deliver = [&](int events) {
    ASSERT_NO_FATAL_FAILURE(Deliver(events, &total, dispatcher, client, bridge, cursor));
  };
  int grown_under_a_cut_send = 0;
  for (int round = 0; round < 3; ++round) {
    const int64_t share = (int64_t{32} << 10) << (round == 0 ? 0 : rng() % 6);  // 32 KiB .. 1 MiB
    const int events = (round == 0 ? 300 : 1) + static_cast<int>(rng() % 1200);
    SCOPED_TRACE(absl::StrCat("seed ", seed, ", round ", round, ": ", events,
                              " events, a share of ", share, " bytes"));
    deliver(events);
    Log log(*this, redis_, share, absl::ZeroDuration());
    for (int run = 0; run < 400 && Confirmed() < total; ++run) {
      ASSERT_TRUE(log.RunOnce().ok());
      auto sent = client.XRead(proofs, 1000, absl::ZeroDuration(), sent_at);
      ASSERT_TRUE(sent.ok()) << sent.status();
      int64_t bytes = 0;
      for (const redis::StreamEntry& e : *sent) {
        for (const auto& [name, value] : e.fields) bytes += name.size() + value.size();
        sent_at = e.id;
      }
      ASSERT_LE(bytes, share / 2) << "run " << run << " sent " << sent->size() << " entries";
      ASSERT_TRUE(reader.RunOnce(*owner_, client, &read_at).ok());
      if ((round == 0 && run == 0) || (run < 40 && rng() % 4 == 0)) {
        if (AdminScalar("SELECT proving_size FROM log_witnesses") > 0) ++grown_under_a_cut_send;
        deliver(1 + static_cast<int>(rng() % 50));
      }
    }
    ASSERT_EQ(Confirmed(), total);
  }
  EXPECT_GT(grown_under_a_cut_send, 0) << "the log never grew while a send was cut short";
}

// A send of exactly a run's page of proofs (2048) is whole: taken for one
// cut short, it pinned the feed to its checkpoint, sending it again every
// resend interval with log_more while the log grew, and the events after
// it were never proved.
TEST_F(ConfirmationTest, ASendOfExactlyAPageOfProofsIsWhole) {
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(redis_, witness.get()), metrics_->registry());
  int64_t total = 0;
  auto deliver = [&](int events) {
    ASSERT_NO_FATAL_FAILURE(Deliver(events, &total, dispatcher, client, bridge, cursor));
  };
  deliver(2048);
  Log log(*this, redis_, int64_t{64} << 20, absl::ZeroDuration());
  std::string read_at = "0-0";
  ASSERT_TRUE(log.RunOnce().ok());
  ASSERT_TRUE(reader.RunOnce(*owner_, client, &read_at).ok());
  EXPECT_EQ(AdminScalar("SELECT proving_size FROM log_witnesses"), 0)
      << "a whole send taken as cut";
  deliver(10);
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)log.RunOnce();
        (void)reader.RunOnce(*owner_, client, &read_at);
        return Confirmed() == total;
      },
      std::chrono::seconds(20)))
      << Confirmed() << " of " << total << " confirmed";
}

// --- re-sends on evidence of loss only ------------------------------------

// Admin is frozen: what sits unread in the stream is never published again,
// however long it waits; once Admin acknowledged it and it stays unproved
// for the resend timeout, it is.
TEST_F(ConfirmationTest, AnUnreadEntryIsNeverSentAgainAnAcknowledgedUnprovedOneIs) {
  Append(10);
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Milliseconds(200);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);
  ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "$", /*mkstream=*/true).ok());
  PublishAll(dispatcher, client);
  const absl::Time until = absl::Now() + absl::Seconds(1);
  while (absl::Now() < until) {
    auto swept = dispatcher.SweepUnconfirmed(*owner_, client);
    ASSERT_TRUE(swept.ok()) << swept.status();
    ASSERT_EQ(*swept, 0) << "an entry Admin has not read yet was sent again";
    absl::SleepFor(absl::Milliseconds(50));
  }
  // Admin reads and acknowledges them, and proves nothing.
  admin::inbox::InboxBridge bridge(BridgeOptions(redis_), metrics_->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(bridge.RunOnce(*admin_, client, cursor).ok());
  auto right_after = dispatcher.SweepUnconfirmed(*owner_, client);
  ASSERT_TRUE(right_after.ok());
  EXPECT_EQ(*right_after, 0) << "acknowledged just now";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = dispatcher.SweepUnconfirmed(*owner_, client);
        return s.ok() && *s == 10;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE resends = 1"), 10);
}

// A stream re-created while the owner watches it (Redis lost its data and
// Admin's new group read past the old ids): every row published before is
// lost, whatever the new group acknowledged.
TEST_F(ConfirmationTest, AStreamRecreatedUnderTheOwnersEyesLosesNothing) {
  Append(10, "old");
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Hours(1);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  ASSERT_EQ(*dispatcher.SweepUnconfirmed(*owner_, client), 0);
  ASSERT_TRUE(client.Command({"DEL", stream_}).ok());
  Append(2, "new");
  PublishAll(dispatcher, client);
  ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "$").ok());  // past every entry
  auto swept = dispatcher.SweepUnconfirmed(*owner_, client);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 10);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING'"), 10);
}

// Admin re-created its group on an empty Redis (XGROUP CREATE ... MKSTREAM)
// before the owner looked: a stream nothing was ever written to holds none
// of what was published.
TEST_F(ConfirmationTest, AStreamAdminRecreatedEmptyLosesNothing) {
  Append(10);
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Hours(1);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  ASSERT_TRUE(client.Command({"DEL", stream_}).ok());
  ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "0", /*mkstream=*/true).ok());
  auto swept = dispatcher.SweepUnconfirmed(*owner_, client);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(*swept, 10);
}

// A Redis whose clock is behind the one that wrote the entries: the owner's
// rows are above the new stream's newest id, and go again once they have
// waited the resend timeout (the new group's position says nothing of them).
TEST_F(ConfirmationTest, EntriesAboveTheStreamsNewestIdGoAgainAfterTheTimeout) {
  Append(4);
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Milliseconds(300);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);
  PublishAll(dispatcher, client);
  ASSERT_TRUE(client.Command({"DEL", stream_}).ok());
  ASSERT_TRUE(client.Command({"XADD", stream_, "1-1", "k", "v"}).ok());  // an old clock
  ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "$").ok());
  auto early = dispatcher.SweepUnconfirmed(*owner_, client);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(*early, 0) << "not before the resend timeout";
  // Each row's wait runs from its own publication (published_at is the
  // clock at its UPDATE), so a sweep at the boundary may take some of them.
  int64_t sent_again = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = dispatcher.SweepUnconfirmed(*owner_, client);
        if (s.ok()) sent_again += *s;
        return sent_again >= 4;
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(sent_again, 4);
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING'"), 4);
}

// The sweep counts a row lost only if it was published before the sweep
// began to look: one published since (by another thread or replica) may be
// in a stream the look did not see, and is not sent twice.
TEST_F(ConfirmationTest, ARowPublishedAfterTheLookBeganIsNotCountedLost) {
  Append(3);
  outbox::Dispatcher dispatcher(DispatchOptions(redis_), metrics_->registry());
  redis::Client client(redis_);
  auto before = outbox::DatabaseClock(*owner_);
  ASSERT_TRUE(before.ok()) << before.status();
  PublishAll(dispatcher, client);
  outbox::LossEvidence everything;
  everything.lost_through = outbox::kMaxStreamId;
  EXPECT_EQ(*outbox::RequeueLost(*owner_, everything, *before, 100), 0);
  auto after = outbox::DatabaseClock(*owner_);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*outbox::RequeueLost(*owner_, everything, *after, 100), 3);
}

// The generated check of the rule. Each step is one of: the owner commits
// and publishes; Admin reads (pending) or acknowledges what it read, in
// order; Admin's trimmer removes what was acknowledged; the stream guard
// removes the oldest entries, read or not; Redis loses the stream (and the
// owner looks before anything is published again, then Admin re-creates its
// group: a stream re-created unseen is the resend timeout's,
// AStreamRecreatedUnderTheOwnersEyes and RedisLosingEverything); and the
// owner sweeps. Admin's group exists from the start, as Admin creates it
// before its stream guard can trim anything. The model knows which entries are in the stream and
// which the group acknowledged; after each sweep, the rows sent again must be exactly the PUBLISHED
// rows whose entries are gone unacknowledged (or gone with the stream).
TEST_F(ConfirmationTest, GeneratedHistoriesResendExactlyWhatWasLost) {
  const uint32_t seed = ::ulticode::testing::SeedFromEnv("ULTICODE_RESEND_SEED", "resend");
  std::mt19937 rng(seed);
  auto options = DispatchOptions(redis_);
  options.resend_timeout = absl::Hours(1);  // the "unproved" rule stays out
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  redis::Client client(redis_);

  using Id = std::pair<uint64_t, uint64_t>;
  auto text = [](const Id& id) { return absl::StrCat(id.first, "-", id.second); };
  auto id_of = [](const std::string& id) { return *redis::ParseStreamId(id); };
  struct Entry {
    std::string event_id;
    bool read = false, acked = false;
  };
  std::map<Id, Entry> present;                  // the stream, by id
  std::map<std::string, std::string> entry_of;  // PUBLISHED rows -> their entries
  std::set<std::string> wiped;                  // rows whose entries went with the stream
  // Entries trimmed while pending (read, not acknowledged): in the group's
  // pending list until Admin's bridge acknowledges them as vanished
  // (XAUTOCLAIM's deleted ids).
  std::set<Id> stale;
  std::optional<Id> last_delivered;  // by the group since it was created
  // The rule's definition of acknowledged: at or below the group's
  // last-delivered-id and below its smallest pending id. (An entry removed
  // unread that the group then read past looks acknowledged: the resend
  // timeout sends it again, as for one Admin refused.)
  auto looks_acked = [&](const Id& id) {
    std::optional<Id> smallest_pending;
    for (const auto& [pid, e] : present) {
      if (e.read && !e.acked) {
        smallest_pending = pid;
        break;
      }
    }
    if (!stale.empty() && (!smallest_pending || *stale.begin() < *smallest_pending))
      smallest_pending = *stale.begin();
    return last_delivered && id <= *last_delivered && (!smallest_pending || id < *smallest_pending);
  };
  auto publish = [&](int n) {
    if (n > 0) Append(n, absl::StrCat("g", rng()));
    PublishAll(dispatcher, client);
    pg::Statement st{"published",
                     "SELECT event_id::text, stream_entry_id FROM audit_outbox"
                     " WHERE state = 'PUBLISHED'"};
    auto r = owner_->Execute(st, {});
    ASSERT_TRUE(r.ok()) << r.status();
    for (int i = 0; i < r->rows(); ++i) {
      const std::string event = r->GetString(i, 0), entry = r->GetString(i, 1);
      if (entry_of[event] == entry) continue;
      entry_of[event] = entry;
      present[id_of(entry)] = Entry{event};
    }
  };
  auto remove = [&](auto it) {
    if (it->second.read && !it->second.acked) stale.insert(it->first);
    return present.erase(it);
  };
  // Admin's group exists before anything is trimmed: Admin creates it
  // (from 0) before its stream guard runs.
  ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "0").ok());
  int steps = 0, resent = 0, lost = 0;
  std::string trace;  // one letter a step: the history that failed
  auto sweep = [&](int step) {
    std::set<std::string> want;  // before the sweep: what was lost
    for (const auto& [event, entry] : entry_of) {
      const Id id = id_of(entry);
      if (wiped.count(event) != 0 || (present.count(id) == 0 && !looks_acked(id)))
        want.insert(event);
    }
    auto swept = dispatcher.SweepUnconfirmed(*owner_, client);
    ASSERT_TRUE(swept.ok()) << swept.status();
    pg::Statement st{"pending", "SELECT event_id::text FROM audit_outbox WHERE state = 'PENDING'"};
    auto r = owner_->Execute(st, {});
    ASSERT_TRUE(r.ok()) << r.status();
    std::set<std::string> sent;
    for (int i = 0; i < r->rows(); ++i) sent.insert(r->GetString(i, 0));
    ASSERT_EQ(sent, want) << "step " << step << " (seed " << seed << "): sent " << sent.size()
                          << ", lost " << want.size() << "; steps so far: " << trace;
    resent += static_cast<int>(sent.size());
    lost += static_cast<int>(want.size());
    for (const std::string& e : sent) entry_of.erase(e);
    wiped.clear();
    ASSERT_NO_FATAL_FAILURE(publish(0));
  };
  for (int step = 0; step < 60; ++step, ++steps) {
    int op = static_cast<int>(rng() % 7);
    if (present.empty()) op = 0;
    trace += "PRATGWS"[op];
    if (op == 0) {
      ASSERT_NO_FATAL_FAILURE(publish(1 + static_cast<int>(rng() % 12)));
    } else if (op == 1) {  // Admin reads up to k new entries, in order
      const int k = 1 + static_cast<int>(rng() % 8);
      auto got = client.XReadGroup(kGroup, "bridge", {stream_}, k, absl::ZeroDuration());
      ASSERT_TRUE(got.ok()) << got.status();
      for (const auto& s : *got) {
        for (const auto& e : s.entries) {
          present.at(id_of(e.id)).read = true;
          last_delivered = id_of(e.id);
        }
      }
    } else if (op == 2) {  // ... acknowledges what it read, in order
      std::vector<std::string> ids;
      if (rng() % 2 == 0) {  // ... and what vanished while pending
        for (const Id& id : stale) ids.push_back(text(id));
        stale.clear();
      }
      for (auto& [id, e] : present) {
        if (!e.read || e.acked) continue;
        if (rng() % 3 == 0) break;
        e.acked = true;
        ids.push_back(text(id));
      }
      if (!ids.empty()) {
        ASSERT_TRUE(client.XAck(stream_, kGroup, ids).ok());
      }
    } else if (op == 3) {  // Admin's trimmer: below the first unacknowledged
      auto first = std::find_if(present.begin(), present.end(),
                                [](const auto& p) { return !p.second.acked; });
      Id bound = first != present.end() ? first->first : present.rbegin()->first;
      if (first == present.end()) ++bound.second;                   // all acknowledged
      if (!stale.empty()) bound = std::min(bound, *stale.begin());  // still pending
      ASSERT_TRUE(client.Command({"XTRIM", stream_, "MINID", text(bound)}).ok());
      for (auto it = present.begin(); it != present.end() && it->first < bound;) it = remove(it);
    } else if (op == 4) {  // the stream guard: the oldest m, read or not
      const size_t m = 1 + rng() % std::max<size_t>(1, present.size());
      ASSERT_TRUE(
          client.Command({"XTRIM", stream_, "MAXLEN", absl::StrCat(present.size() - m)}).ok());
      for (size_t i = 0; i < m; ++i) remove(present.begin());
    } else if (op == 5 && rng() % 4 == 0) {  // Redis loses the stream; the owner looks
      ASSERT_TRUE(client.Command({"DEL", stream_}).ok());
      for (const auto& [event, entry] : entry_of) wiped.insert(event);
      present.clear();
      stale.clear();
      last_delivered.reset();
      ASSERT_NO_FATAL_FAILURE(sweep(step));
      // Admin re-creates its group on the empty Redis (MKSTREAM, from 0).
      ASSERT_TRUE(client.XGroupCreate(stream_, kGroup, "0").ok());
    } else {  // the owner sweeps
      ASSERT_NO_FATAL_FAILURE(sweep(step));
    }
  }
  std::printf("[resend] %d steps, %d rows sent again, each one lost\n", steps, resent);
  EXPECT_EQ(resent, lost);
  EXPECT_GT(lost, 0) << "a history that lost nothing proves nothing";
}

// --- end to end -----------------------------------------------------------

TEST_F(ConfirmationTest, RedisLosingEverythingLosesNoEventEndToEnd) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  redis::Options ro = redis_;
  ro.port = own.port();
  ro.command_timeout = absl::Milliseconds(500);
  auto options = DispatchOptions(ro);
  options.resend_timeout = absl::Seconds(1);
  outbox::Dispatcher dispatcher(options, metrics_->registry());
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(ro, witness.get()), metrics_->registry());
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
  admin::inbox::InboxBridge bridge(BridgeOptions(ro), admin_metrics->registry());
  Log log(*this, ro);
  bridge.Start();
  log.Start();
  Append(5);  // and life goes on

  ASSERT_TRUE(WaitFor([&] { return AdminScalar("SELECT count(*) FROM audit_logs") == 25; },
                      std::chrono::seconds(20)))
      << "the 20 events Redis lost were published again";
  ASSERT_TRUE(WaitFor([&] { return Confirmed() == 25; }, std::chrono::seconds(20)));
  EXPECT_GE(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE resends > 0"), 20);
  bridge.Stop();
  log.Stop();
  reader.Stop();
  dispatcher.Stop();
}

TEST_F(ConfirmationTest, ARedisAtItsMemoryLimitLosesNothingAndThePipelineRecoversByItself) {
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
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(ro, witness.get()), metrics_->registry());
  // Admin ran once (its consumer group exists: Redis refuses XGROUP CREATE
  // at its limit, docs/operating.md), then went down.
  auto admin_metrics = metrics::Metrics::Unexposed("admin");
  admin::inbox::InboxBridge bridge(BridgeOptions(ro), admin_metrics->registry());
  admin::inbox::StreamCursor cursor = Cursor();
  ASSERT_TRUE(bridge.RunOnce(*admin_, client, cursor).ok());
  dispatcher.Start();
  reader.Start();

  // Admin is down; owners publish until Redis refuses (OOM).
  int64_t appended = 0;
  const bool refused = WaitFor(
      [&] {
        Append(200);
        dispatcher.Wake();  // as an owner's commit does
        appended += 200;
        return OwnerScalar("SELECT count(*) FROM audit_outbox WHERE last_error LIKE '%OOM%'") > 0;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(refused) << "Redis never refused a write";
  Append(100);  // and business goes on
  dispatcher.Wake();
  appended += 100;
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox"), appended) << "rows kept";
  EXPECT_EQ(OwnerScalar("SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"), 0);

  // Admin comes up: reads, acknowledges and trims (none of it refused), so
  // memory frees and the refused rows go through; its log proves them, and
  // its stream guard holds the proof stream to a share of the little memory
  // there is (a proof trimmed unread: the row is sent and proved again).
  admin::maintenance::StreamMaintenance streams({{audit::v1::OWNER_AUTH, stream_}}, ro,
                                                admin_metrics->registry());
  constexpr int64_t kProofShare = int64_t{512} << 10;
  admin::maintenance::StreamGuard guard({{audit::v1::OWNER_AUTH, stream_}}, int64_t{1} << 20,
                                        kProofShare, ro, admin_metrics->registry());
  Log log(*this, ro, kProofShare);
  bridge.Start();
  log.Start();
  std::atomic<bool> stop{false};
  std::thread trimmer([&] {
    while (!stop) {
      (void)streams.Trim();
      (void)guard.RunOnce();
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  const bool recovered = WaitFor(
      [&] {
        return AdminScalar("SELECT count(*) FROM audit_logs") == appended &&
               Confirmed() == appended;
      },
      std::chrono::seconds(90));
  stop = true;
  trimmer.join();
  bridge.Stop();
  log.Stop();
  reader.Stop();
  dispatcher.Stop();
  EXPECT_TRUE(recovered) << "audit rows " << AdminScalar("SELECT count(*) FROM audit_logs")
                         << " of " << appended << ", confirmed " << Confirmed();
  EXPECT_EQ(AdminScalar("SELECT count(DISTINCT event_id) FROM audit_logs"), appended);
}

// --- rolling upgrade: replicas of two releases side by side ---

// A dispatcher and a lease consumer of the previous release (their list of
// event types lacks auth.role.assigned, added by the current one) run beside
// current ones under load; every event reaches audit_logs exactly once, is
// confirmed on proof, and nothing is DEAD on either side.
TEST_F(ConfirmationTest, AnOlderReplicaBesideACurrentOneDeliversEveryEventOnce) {
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
  auto witness = MakeWitness(metrics_->registry());
  outbox::ProofReader reader(ReaderOptions(redis_, witness.get()), metrics_->registry());
  // Every event through the lease consumers (the bridge writes no audit rows).
  auto bridge_options = BridgeOptions(redis_);
  bridge_options.write_audit_logs = false;
  admin::inbox::InboxBridge bridge(bridge_options, admin_metrics->registry());
  admin::consumer::ConsumerOptions consumer;
  consumer.pg = admin_pg_;
  consumer.poll_interval = absl::Milliseconds(50);
  consumer.instance_id = "current";
  auto old_consumer = consumer;
  old_consumer.instance_id = "previous";
  old_consumer.known_event_types = previous_release;
  admin::consumer::LeaseConsumer consumer_current(consumer, admin_metrics->registry());
  admin::consumer::LeaseConsumer consumer_previous(old_consumer, old_metrics->registry());
  Log log(*this, redis_);
  current.Start();
  previous.Start();
  reader.Start();
  bridge.Start();
  consumer_current.Start();
  consumer_previous.Start();
  log.Start();

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
      [&] { return AdminScalar("SELECT count(*) FROM audit_logs") == n && Confirmed() == n; },
      std::chrono::seconds(60)))
      << "audit rows " << AdminScalar("SELECT count(*) FROM audit_logs") << " of " << n;
  log.Stop();
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

}  // namespace
}  // namespace ulticode
