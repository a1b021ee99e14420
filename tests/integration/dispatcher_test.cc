// The outbox dispatcher against real PostgreSQL and Redis: publication,
// wake-up on commit, Redis outages, crash windows, stalled holders, concurrency.
#include "owner/outbox/dispatcher.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/crypto/key_directory.h"
#include "common/ids/uuid.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "gtest/gtest.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/outbox_store.h"
#include "tests/support/audit_events.h"
#include "tests/support/keys.h"
#include "tests/support/pg_query.h"
#include "tests/support/redis_server.h"
#include "tests/support/test_env.h"

namespace ulticode::outbox {
namespace {

using ::ulticode::testing::SampleEvent;

using ::ulticode::testing::WaitFor;

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    options_.pg.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "disptest"));
    auto conn = pg::Connection::Connect(options_.pg);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, Migrations()).ok());
    options_.owner = audit::v1::OWNER_AUTH;
    options_.stream = "test:dispatch:" + ::ulticode::testing::RandomSuffix();
    options_.redis.host = redis.host;
    options_.redis.port = redis.port;
    options_.redis.user = redis.user;
    options_.redis.password = redis.password;
    options_.claim_lease = absl::Seconds(30);
    options_.backoff = {absl::Milliseconds(20), absl::Milliseconds(200)};
    options_.signer = &::ulticode::testing::SharedTestKeys().auth();
    metrics_ = metrics::Metrics::Unexposed("test");
  }

  // A row written straight into the outbox (what the owner's database
  // login can do), its MAC made with `key` unless `mac` is given.
  void InsertRow(const std::string& id, const std::string& type, const std::string& payload,
                 const crypto::SigningKey& key, std::optional<std::string> mac = std::nullopt) {
    if (!mac) mac = RowMac(key, payload).value();
    ASSERT_TRUE(
        conn_
            ->Execute({"insert_row",
                       "INSERT INTO audit_outbox (event_id, event_type, payload, mac, key_id)"
                       " VALUES ($1::uuid, $2, $3, $4, $5)"},
                      {pg::Text(id), pg::Text(type), pg::Bytes(payload), pg::Bytes(*mac),
                       pg::Text(key.key_id())})
            .ok());
  }

  // The event id of an entry's envelope.
  static std::string EventId(const redis::StreamEntry& e) {
    audit::AuditEvent event;
    EXPECT_TRUE(event.ParseFromString(Field(e, "envelope")));
    return event.event_id();
  }

  std::vector<std::string> AppendEvents(int n) {
    std::vector<std::string> ids;
    auto tx = conn_->Begin();
    EXPECT_TRUE(tx.ok());
    for (int i = 0; i < n; ++i) {
      auto e = audit::NewEvent(audit::v1::OWNER_AUTH, "auth.user.created",
                               {"tester", "127.0.0.1", "ua", "", ""}, absl::Now());
      e.mutable_record()->set_action("create_user");
      e.mutable_record()->set_entity_type("user");
      e.mutable_record()->set_entity_id(absl::StrCat("u", i));
      EXPECT_TRUE(Append(*tx, e, ::ulticode::testing::SharedTestKeys().auth()).ok());
      ids.push_back(e.event_id());
    }
    EXPECT_TRUE(tx->Commit().ok());
    return ids;
  }

  int64_t Scalar(const std::string& sql) { return ::ulticode::testing::QueryInt(*conn_, sql); }
  int64_t CountState(const char* state) {
    return Scalar(absl::StrCat("SELECT count(*) FROM audit_outbox WHERE state = '", state, "'"));
  }

  std::vector<redis::StreamEntry> StreamEntries(const redis::Options& ro) {
    redis::Client c(ro);
    auto r = c.Command({"XRANGE", options_.stream, "-", "+"});
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<redis::StreamEntry> out;
    if (!r.ok()) return out;
    for (const auto& e : r->elements()) {
      redis::StreamEntry entry;
      entry.id = e.elements()[0].str();
      const auto& f = e.elements()[1].elements();
      for (size_t i = 0; i + 1 < f.size(); i += 2)
        entry.fields.emplace_back(f[i].str(), f[i + 1].str());
      out.push_back(entry);
    }
    return out;
  }

  static std::string Field(const redis::StreamEntry& e, const std::string& k) {
    for (const auto& [key, value] : e.fields)
      if (key == k) return value;
    return "";
  }

  DispatcherOptions options_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<metrics::Metrics> metrics_;
};

// A cycle's rows go out as one bundle: each entry is the row's exact bytes,
// its seal and the key id, nothing else; the seals share one signature.
TEST_F(DispatcherTest, PublishesTheExactEnvelopesSealedAsOneBundle) {
  auto ids = AppendEvents(3);
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  auto cycle = d.RunOnce(*conn_, client);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->claimed, 3);
  EXPECT_EQ(cycle->published, 3);
  EXPECT_EQ(CountState("PUBLISHED"), 3);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE stream_entry_id IS NULL"), 0);

  auto entries = StreamEntries(options_.redis);
  ASSERT_EQ(entries.size(), 3u);
  const auto& key = ::ulticode::testing::SharedTestKeys().auth();
  std::set<std::string> signatures;
  std::set<uint32_t> indexes;
  for (size_t i = 0; i < 3; ++i) {
    // envelope, seal, key_id, and the personal values the envelope commits
    // to, each opening its commitment.
    EXPECT_EQ(entries[i].fields.size(), 4u);
    EXPECT_EQ(EventId(entries[i]), ids[i]);
    {
      audit::AuditEvent event;
      ASSERT_TRUE(event.ParseFromString(Field(entries[i], "envelope")));
      audit::PersonalValues values;
      ASSERT_TRUE(values.ParseFromString(Field(entries[i], "personal")));
      std::vector<std::string> refused;
      EXPECT_EQ(audit::OpenCommitments(event, values, &refused).size(),
                static_cast<size_t>(event.record().personal_size()));
      EXPECT_TRUE(refused.empty());
      EXPECT_GT(event.record().personal_size(), 0);
    }
    pg::Statement st{"payload", "SELECT payload FROM audit_outbox WHERE event_id = $1::uuid"};
    auto r = conn_->Execute(st, {pg::Text(ids[i])});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(Field(entries[i], "envelope"), r->GetBytes(0, 0));  // byte for byte
    EXPECT_EQ(Field(entries[i], "key_id"), key.key_id());
    seal::Verifier fresh;
    EXPECT_TRUE(fresh.Verify(key.public_key(), r->GetBytes(0, 0), Field(entries[i], "seal")).ok());
    auto decoded = seal::Decode(Field(entries[i], "seal"));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->size, 3u);
    indexes.insert(decoded->index);
    signatures.insert(decoded->signature);
  }
  EXPECT_EQ(indexes, (std::set<uint32_t>{0, 1, 2}));
  EXPECT_EQ(signatures.size(), 1u) << "one signature for the cycle's bundle";
}

// Whoever holds only the owner's database login can INSERT outbox rows (and
// change their delivery columns, the kept seal among them) but cannot make
// their MACs or seals: a generated mix of rows is sorted exactly.
// Published: genuine; made with a previous key still loaded; made with a
// key of this owner that is not loaded here but carrying a seal of this
// owner's that verifies (a re-send after a rotation). Waiting (PENDING):
// made with a key of this owner's (in the key directory) not loaded here.
// DEAD: a made-up MAC, another row's MAC, a MAC of other bytes, a MAC key
// that is not this owner's, a made-up seal in place of a MAC.
TEST_F(DispatcherTest, OnlyRowsWhoseMacVerifiesArePublished) {
  const uint32_t seed = ::ulticode::testing::SeedFromEnv("ULTICODE_DISPATCH_MAC_SEED", "mac");
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("ULTICODE_DISPATCH_MAC_SEED=", seed));
  const auto& current = ::ulticode::testing::SharedTestKeys().auth();
  const crypto::SigningKey previous = crypto::SigningKey::Generate().value();
  const crypto::SigningKey unloaded = crypto::SigningKey::Generate().value();
  const crypto::SigningKey stranger = crypto::SigningKey::Generate().value();
  // This owner's keys: the current one, the previous one, one not loaded.
  const std::string directory_path =
      ::testing::TempDir() + "/dispatch-keys-" + ::ulticode::testing::RandomSuffix();
  {
    std::ofstream out(directory_path);
    for (const crypto::SigningKey* k : {&current, &previous, &unloaded}) {
      out << "auth " << absl::Base64Escape(k->public_key().raw()) << "\n";
    }
    out << "app " << absl::Base64Escape(stranger.public_key().raw()) << "\n";
  }
  auto directory = crypto::KeyDirectoryFile::Open(directory_path);
  ASSERT_TRUE(directory.ok()) << directory.status();
  options_.keys = directory->get();
  options_.previous_keys = {previous};
  enum Kind {
    kGenuine,
    kPrevious,
    kSealedUnloaded,  // published
    kUnloaded,        // waits
    kMadeUp,
    kOtherRowsMac,
    kOtherBytes,
    kStrangersKey,
    kMadeUpSeal,  // DEAD
    kKinds
  };
  std::map<std::string, Kind> kind_of;
  std::string another_mac;
  for (int i = 0; i < 90; ++i) {
    const Kind kind = static_cast<Kind>(rng() % kKinds);
    const audit::AuditEvent event = SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("m", i));
    const std::string payload = audit::Serialize(event);
    std::optional<std::string> mac;
    const crypto::SigningKey* key = &current;
    std::string made_up(32, '\0');
    for (char& c : made_up) c = static_cast<char>(rng());
    std::string kept_seal, sealed_by;
    switch (kind) {
      case kPrevious:
        key = &previous;
        break;
      case kUnloaded:
        key = &unloaded;
        break;
      case kSealedUnloaded:
        key = &unloaded;
        kept_seal = seal::SealBundle(current, {absl::string_view(payload)}).value()[0];
        sealed_by = current.key_id();
        break;
      case kMadeUp:
        mac = made_up;
        break;
      case kOtherRowsMac:
        mac = another_mac.empty() ? made_up : another_mac;
        break;
      case kOtherBytes:
        mac = RowMac(current, payload + " ").value();
        break;
      case kStrangersKey:
        key = &stranger;
        break;
      case kMadeUpSeal:
        mac = made_up;
        kept_seal = seal::Encode({0, 1, {}, std::string(64, 's')});
        sealed_by = current.key_id();
        break;
      default:
        break;
    }
    InsertRow(event.event_id(), event.event_type(), payload, *key, mac);
    if (!kept_seal.empty()) {
      ASSERT_TRUE(
          conn_
              ->Execute({"kept_seal",
                         "UPDATE audit_outbox SET seal = $2, sealed_by = $3"
                         " WHERE event_id = $1::uuid"},
                        {pg::Text(event.event_id()), pg::Bytes(kept_seal), pg::Text(sealed_by)})
              .ok());
    }
    another_mac = RowMac(current, payload).value();
    kind_of[event.event_id()] = kind;
  }
  options_.batch_size = 1000;
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  ASSERT_TRUE(d.RunOnce(*conn_, client).ok());

  std::set<std::string> published;
  seal::Verifier verifier;
  for (const auto& e : StreamEntries(options_.redis)) {
    published.insert(EventId(e));
    EXPECT_TRUE(verifier.Verify(current.public_key(), Field(e, "envelope"), Field(e, "seal")).ok());
  }
  for (const auto& [id, kind] : kind_of) {
    const std::string state = ::ulticode::testing::QueryText(
        *conn_, absl::StrCat("SELECT state FROM audit_outbox WHERE event_id = '", id, "'"));
    const bool genuine = kind == kGenuine || kind == kPrevious || kind == kSealedUnloaded;
    EXPECT_EQ(published.count(id), genuine ? 1u : 0u) << id << " kind " << kind;
    EXPECT_EQ(state, genuine             ? "PUBLISHED"
                     : kind == kUnloaded ? "PENDING"
                                         : "DEAD")
        << id << " kind " << kind;
  }
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE state = 'DEAD'"
                   " AND last_error NOT LIKE '%MAC does not verify%'"
                   " AND last_error NOT LIKE '%not one of this owner''s keys%'"),
            0);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING'"
                   " AND (last_error NOT LIKE '%is not loaded here%' OR failures <> 1)"),
            0);
}

// A row published again goes with the seal it was first published with (so
// the event's leaf is the same whichever delivery Admin keeps); a kept seal
// that no longer verifies (altered through the database login) is replaced
// by a fresh one.
TEST_F(DispatcherTest, ARowPublishedAgainKeepsItsSealUnlessItWasAltered) {
  const std::string id = AppendEvents(1)[0];
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  ASSERT_TRUE(d.RunOnce(*conn_, client).ok());
  const std::string again = "UPDATE audit_outbox SET state = 'PENDING', next_attempt_at = now()";
  ASSERT_TRUE(conn_->ExecuteScript("again", again, absl::Seconds(5)).ok());
  ASSERT_TRUE(d.RunOnce(*conn_, client).ok());
  ASSERT_TRUE(conn_
                  ->ExecuteScript("alter",
                                  again + ", seal = set_byte(seal, length(seal) - 1,"
                                          " get_byte(seal, length(seal) - 1) # 1)",
                                  absl::Seconds(5))
                  .ok());
  ASSERT_TRUE(d.RunOnce(*conn_, client).ok());

  auto entries = StreamEntries(options_.redis);
  ASSERT_EQ(entries.size(), 3u);
  const auto& key = ::ulticode::testing::SharedTestKeys().auth();
  EXPECT_EQ(Field(entries[0], "seal"), Field(entries[1], "seal")) << "published again as it was";
  seal::Verifier fresh;
  EXPECT_TRUE(
      fresh.Verify(key.public_key(), Field(entries[2], "envelope"), Field(entries[2], "seal")).ok())
      << "an altered seal is replaced by one that verifies";
  EXPECT_EQ(
      ::ulticode::testing::QueryText(
          *conn_, "SELECT encode(seal, 'hex') FROM audit_outbox WHERE event_id = '" + id + "'"),
      absl::BytesToHexString(Field(entries[2], "seal")));
}

TEST_F(DispatcherTest, AWakeFromACommitPublishesWithinSecondsDespiteAMinutePollInterval) {
  options_.poll_interval = absl::Minutes(1);
  Dispatcher d(options_, metrics_->registry());
  d.Start();
  AppendEvents(1);
  d.Wake();
  ASSERT_TRUE(WaitFor([&] { return CountState("PUBLISHED") == 1; }, std::chrono::seconds(5)));
  // The system is idle now; only a wake-up can start a cycle before a
  // minute passes.
  const absl::Time start = absl::Now();
  AppendEvents(1);
  d.Wake();
  ASSERT_TRUE(WaitFor([&] { return CountState("PUBLISHED") == 2; }, std::chrono::seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  d.Stop();
}

TEST_F(DispatcherTest, RedisDownRecordsRetriesThenPublishesEverythingWhenBack) {
  ::ulticode::testing::RedisServer own;
  ASSERT_TRUE(own.Start());
  options_.redis.port = own.port();
  own.Kill();
  auto ids = AppendEvents(5);
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  auto cycle = d.RunOnce(*conn_, client);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->rescheduled, 5);
  EXPECT_EQ(CountState("PENDING"), 5);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE failures = 1 AND attempts = 1 AND "
                   "last_error LIKE '%publish to%' AND next_attempt_at > created_at"),
            5);

  ASSERT_TRUE(own.Start());
  d.Start();
  ASSERT_TRUE(WaitFor([&] { return CountState("PUBLISHED") == 5; }, std::chrono::seconds(15)));
  d.Stop();
  std::set<std::string> published;
  for (const auto& e : StreamEntries(options_.redis)) published.insert(EventId(e));
  EXPECT_EQ(published, std::set<std::string>(ids.begin(), ids.end()));
}

TEST_F(DispatcherTest, CrashAfterXaddBeforeCommitRollsBackAndRepublishesAtOnce) {
  FaultHooks crash;
  crash.after_publish = [](const std::vector<ClaimedRow>&) {
    return absl::AbortedError("injected crash after XADD");
  };
  auto ids = AppendEvents(1);
  redis::Client client(options_.redis);
  {
    Dispatcher crashing(options_, metrics_->registry(), crash);
    auto cycle = crashing.RunOnce(*conn_, client);
    ASSERT_FALSE(cycle.ok());
  }
  EXPECT_EQ(StreamEntries(options_.redis).size(), 1u);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE state = 'PENDING' AND attempts = 0 "
                   "AND next_attempt_at <= now()"),
            1)
      << "the cycle's transaction rolled back: nothing recorded, due at once";
  Dispatcher healthy(options_, metrics_->registry());
  auto again = healthy.RunOnce(*conn_, client);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->published, 1);
  auto entries = StreamEntries(options_.redis);
  ASSERT_EQ(entries.size(), 2u);  // the expected duplicate; the inbox dedups
  EXPECT_EQ(EventId(entries[0]), ids[0]);
  EXPECT_EQ(EventId(entries[1]), ids[0]);
  EXPECT_EQ(Scalar("SELECT attempts FROM audit_outbox WHERE state = 'PUBLISHED'"), 1);
}

TEST_F(DispatcherTest, RowsHeldByAStalledDispatcherAreSkippedThenReleasedByPostgres) {
  AppendEvents(3);
  // A dispatcher that froze mid-cycle: its transaction holds two rows.
  pg::ConnectOptions stalled_options = options_.pg;
  stalled_options.idle_in_transaction_timeout = absl::Milliseconds(300);
  auto stalled = pg::Connection::Connect(stalled_options);
  ASSERT_TRUE(stalled.ok()) << stalled.status();
  auto held_tx = (*stalled)->Begin();
  ASSERT_TRUE(held_tx.ok());
  auto held = LockDue(*held_tx, 2);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), 2u);

  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  auto first = d.RunOnce(*conn_, client);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->published, 1) << "held rows are skipped, not waited for";
  // PostgreSQL ends the idle session; its locks go with it.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = d.RunOnce(*conn_, client);
        return c.ok() && CountState("PUBLISHED") == 3;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(StreamEntries(options_.redis).size(), 3u);
  EXPECT_FALSE(held_tx->Commit().ok()) << "the stalled holder can no longer commit";
}

TEST_F(DispatcherTest, TwoDispatchersOnSeparateConnectionsNeverPublishARowTwice) {
  auto ids = AppendEvents(600);
  options_.batch_size = 25;
  options_.threads = 2;
  Dispatcher a(options_, metrics_->registry());
  Dispatcher b(options_, metrics_->registry());
  a.Start();
  b.Start();
  ASSERT_TRUE(WaitFor([&] { return CountState("PUBLISHED") == 600; }, std::chrono::seconds(30)));
  a.Stop();
  b.Stop();
  auto entries = StreamEntries(options_.redis);
  std::set<std::string> unique;
  for (const auto& e : entries) unique.insert(EventId(e));
  EXPECT_EQ(entries.size(), 600u);
  EXPECT_EQ(unique.size(), 600u);
}

// Rolling upgrade: a row of an event type this binary does not know was
// written by a newer release of this owner; its sealed bytes are published
// untouched (Admin decides), never DEAD.
TEST_F(DispatcherTest, AnEventNewerThanThisBinaryIsPublishedUntouchedNotDead) {
  auto newer = SampleEvent(audit::v1::OWNER_AUTH, "x");
  newer.set_event_type("auth.user.teleported");  // unknown to this build
  const std::string payload = audit::Serialize(newer);
  InsertRow(newer.event_id(), "auth.user.teleported", payload,
            ::ulticode::testing::SharedTestKeys().auth());
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  auto cycle = d.RunOnce(*conn_, client);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->dead, 0);
  EXPECT_EQ(cycle->published, 1);
  EXPECT_EQ(CountState("PUBLISHED"), 1);
  auto entries = StreamEntries(options_.redis);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(Field(entries[0], "envelope"), payload);
}

TEST_F(DispatcherTest, PermanentFailuresGoDeadAtOnceWithTheirReason) {
  options_.max_event_bytes = 64;
  AppendEvents(1);
  InsertRow(ids::NewUuidV7(), "auth.user.created", std::string("\xff\x00\xff", 3),
            ::ulticode::testing::SharedTestKeys().auth());
  Dispatcher d(options_, metrics_->registry());
  redis::Client client(options_.redis);
  auto cycle = d.RunOnce(*conn_, client);
  ASSERT_TRUE(cycle.ok()) << cycle.status();
  EXPECT_EQ(cycle->dead, 2);
  EXPECT_EQ(CountState("DEAD"), 2);
  EXPECT_EQ(
      Scalar("SELECT count(*) FROM audit_outbox WHERE last_error LIKE '%over the limit of 64%' "
             "AND attempts = 1 AND failures = 0"),
      1);
  EXPECT_EQ(Scalar("SELECT count(*) FROM audit_outbox WHERE last_error LIKE '%not a serialized%'"),
            1);
  EXPECT_TRUE(StreamEntries(options_.redis).empty());
}

TEST_F(DispatcherTest, StopReturnsPromptlyWhileIdle) {
  options_.poll_interval = absl::Minutes(10);
  Dispatcher d(options_, metrics_->registry());
  d.Start();
  AppendEvents(1);
  ASSERT_TRUE(WaitFor([&] { return CountState("PUBLISHED") == 1; }, std::chrono::seconds(5)));
  const absl::Time start = absl::Now();
  d.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

}  // namespace
}  // namespace ulticode::outbox
