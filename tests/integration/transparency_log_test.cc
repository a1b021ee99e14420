// Admin's transparency log on real PostgreSQL: the sequencer gives every
// audit row a dense index, stores the subtree hashes and signs checkpoints
// that Go-compatible verifiers accept (common/tlog); two sequencers racing
// while rows arrive still give 0..n-1 exactly once; one leaf per event and
// per index.
#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "admin/migrations.h"
#include "admin/transparency/completeness.h"
#include "admin/transparency/sequencer.h"
#include "common/crypto/crypto.h"
#include "common/ids/uuid.h"
#include "common/metrics/metrics.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"
#include "common/seal/seal.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "common/tlog/stored.h"
#include "gtest/gtest.h"
#include "tests/support/metric_text.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode::admin::transparency {
namespace {

class TransparencyLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    connect_.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "tlog"));
    auto conn = pg::Connection::Connect(connect_);
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(migrations::Apply(*conn_, admin::Migrations()).ok());
    auto key = crypto::SigningKey::Generate();
    ASSERT_TRUE(key.ok());
    key_ = std::make_unique<crypto::SigningKey>(*std::move(key));
    auto signer = tlog::NoteSigner::Create("audit.test/log", *key_);
    ASSERT_TRUE(signer.ok());
    signer_ = std::make_unique<tlog::NoteSigner>(*signer);
  }

  // One audit row, as the writer stores it.
  void Add(pg::Connection& c, int n) {
    const std::string id = ids::NewUuidV7();
    pg::Statement st{"add",
                     "INSERT INTO audit_logs (event_id, owner, event_type, actor, action, "
                     "entity_type, entity_id, occurred_at, envelope, seal, key_id) VALUES "
                     "($1::uuid, 'auth', 'auth.user.created', 'a', 'create_user', 'user', $2, "
                     "now(), $3, $4, 'k1')"};
    auto r = c.Execute(
        st, {pg::Text(id), pg::Text(absl::StrCat("u", n)), pg::Bytes(absl::StrCat("envelope ", n)),
             pg::Bytes(seal::Encode({0, 1, {}, std::string(64, 's')}))});
    ASSERT_TRUE(r.ok()) << r.status();
  }

  // The leaf hashes of audit_logs in index order, recomputed from the rows.
  std::vector<tlog::Hash> Leaves() {
    pg::Statement st{"leaves",
                     "SELECT event_id::text, owner, key_id, seal, envelope FROM log_leaves"
                     " JOIN audit_logs USING (event_id) ORDER BY log_index"};
    auto r = conn_->Execute(st);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<tlog::Hash> out;
    for (int i = 0; i < r->rows(); ++i) {
      out.push_back(tlog::LeafHash(
          tlog::EncodeLeaf({r->GetString(i, 1), r->GetString(i, 0), r->GetString(i, 2),
                            r->GetBytes(i, 3), r->GetBytes(i, 4)})));
    }
    return out;
  }

  tlog::NodeReader Reader() {
    return [this](const tlog::NodeId& id) -> absl::StatusOr<tlog::Hash> {
      pg::Statement st{"node", "SELECT hash FROM log_nodes WHERE level = $1 AND idx = $2"};
      auto r = conn_->Execute(st, {pg::Int(id.level), pg::Int(static_cast<int64_t>(id.index))});
      if (!r.ok()) return r.status();
      if (r->empty()) return absl::NotFoundError("node");
      return tlog::FromBytes(r->GetBytes(0, 0));
    };
  }

  pg::ConnectOptions connect_;
  std::unique_ptr<pg::Connection> conn_;
  std::unique_ptr<crypto::SigningKey> key_;
  std::unique_ptr<tlog::NoteSigner> signer_;
};

TEST_F(TransparencyLogTest, EveryRowGetsTheNextIndexAndTheCheckpointSignsTheirTree) {
  for (int i = 0; i < 250; ++i) Add(*conn_, i);
  Sequencer sequencer({"audit.test/log", signer_.get(), 100, absl::ZeroDuration()});
  int64_t size = 0;
  for (int run = 0; run < 3; ++run) {
    auto r = sequencer.RunOnce(*conn_);
    ASSERT_TRUE(r.ok()) << r.status();
    size = r->size;
    EXPECT_TRUE(r->checkpointed);
  }
  EXPECT_EQ(size, 250);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(DISTINCT log_index) FROM log_leaves"), 250);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT max(log_index) FROM log_leaves"), 249);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_queue"), 0);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_checkpoints"), 3);

  const std::vector<tlog::Hash> leaves = Leaves();
  pg::Statement latest{"latest", "SELECT note FROM log_checkpoints ORDER BY size DESC LIMIT 1"};
  auto note = conn_->Execute(latest);
  ASSERT_TRUE(note.ok());
  auto text =
      tlog::OpenNote(note->GetString(0, 0), {*tlog::NoteVerifier::Parse(signer_->VerifierKey())});
  ASSERT_TRUE(text.ok()) << text.status();
  auto checkpoint = tlog::ParseCheckpoint(*text);
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(checkpoint->size, 250u);
  EXPECT_EQ(checkpoint->root, tlog::RootOf(leaves)) << "the checkpoint signs the rows' tree";
  for (uint64_t i : {0, 1, 99, 100, 127, 128, 249}) {
    auto proof = tlog::StoredInclusionProof(i, 250, Reader());
    ASSERT_TRUE(proof.ok()) << proof.status();
    EXPECT_TRUE(tlog::VerifyInclusion(i, 250, leaves[i], *proof, checkpoint->root).ok()) << i;
  }
  // Earlier checkpoints are consistent with the latest.
  pg::Statement first{"first", "SELECT size, root FROM log_checkpoints ORDER BY size LIMIT 1"};
  auto f = conn_->Execute(first);
  ASSERT_TRUE(f.ok());
  const uint64_t m = static_cast<uint64_t>(f->GetInt64(0, 0));
  auto consistency = tlog::StoredConsistencyProof(m, 250, Reader());
  ASSERT_TRUE(consistency.ok());
  EXPECT_TRUE(tlog::VerifyConsistency(m, 250, *tlog::FromBytes(f->GetBytes(0, 1)), checkpoint->root,
                                      *consistency)
                  .ok());

  // One leaf per event and per index (Admin's role may not change them:
  // least_privilege_test); a row rewritten after it was logged no longer
  // matches its leaf.
  for (const char* sql :
       {"INSERT INTO log_leaves SELECT 9999, event_id FROM log_leaves WHERE log_index = 3",
        "INSERT INTO log_leaves VALUES (3, gen_random_uuid())"}) {
    auto twice = conn_->Execute(pg::Statement{"twice", sql});
    EXPECT_FALSE(twice.ok()) << sql;
  }
  ASSERT_TRUE(conn_
                  ->Execute(pg::Statement{"tamper",
                                          "UPDATE audit_logs SET envelope = 'forged' WHERE"
                                          " event_id = (SELECT event_id FROM log_leaves"
                                          " WHERE log_index = 7)"})
                  .ok());
  EXPECT_NE(Leaves()[7], leaves[7]);
  EXPECT_NE(tlog::RootOf(Leaves()), checkpoint->root);
}

// What the queue holds that is not to be sequenced is dropped as it reaches
// the head: an event whose audit row is gone, and an event already a leaf
// whose audit row was inserted again (Admin lost it and its owner sent it
// again), whose proof is asked for again. Neither stops the rows behind it.
TEST_F(TransparencyLogTest, QueuedEventsGoneOrAlreadyLeavesAreDroppedWithoutStoppingTheQueue) {
  for (int i = 0; i < 3; ++i) Add(*conn_, i);
  Sequencer sequencer({"audit.test/log", signer_.get(), 100, absl::Milliseconds(5)});
  ASSERT_TRUE(sequencer.RunOnce(*conn_).ok());
  const std::string again =
      testing::QueryText(*conn_, "SELECT event_id::text FROM log_leaves WHERE log_index = 1");
  auto run = [&](const std::string& sql) {
    ASSERT_TRUE(conn_->ExecuteScript("tamper", sql, absl::Seconds(5)).ok()) << sql;
  };
  // Lost and received again: the same row, inserted anew.
  run(absl::StrCat("CREATE TEMP TABLE kept AS SELECT * FROM audit_logs WHERE event_id = '", again,
                   "'; DELETE FROM audit_logs WHERE event_id = '", again,
                   "'; INSERT INTO audit_logs SELECT * FROM kept"));
  Add(*conn_, 3);  // gone before it was sequenced
  run("DELETE FROM audit_logs WHERE entity_id = 'u3'");
  Add(*conn_, 4);
  ASSERT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_queue"), 3);

  auto result = sequencer.RunOnce(*conn_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->taken, 3);
  EXPECT_EQ(result->sequenced, 1);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_queue"), 0);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_leaves"), 4);
  EXPECT_EQ(testing::QueryText(*conn_,
                               "SELECT a.entity_id FROM log_leaves JOIN audit_logs a"
                               " USING (event_id) WHERE log_index = 3"),
            "u4");
  EXPECT_EQ(testing::QueryText(*conn_,
                               "SELECT event_id::text || ' ' || owner"
                               " FROM log_proof_requests"),
            again + " auth");
}

// Rows whose queue entry was removed (only a role above Admin's runtime can)
// and rows the sequencer has not reached are found by the completeness
// check: shown once past the bound, and queued again so they become leaves.
TEST_F(TransparencyLogTest, RowsWithoutALeafPastTheBoundAreShownAndQueuedAgain) {
  auto metrics = metrics::Metrics::Unexposed("completeness");
  Completeness completeness(absl::Seconds(60), metrics->registry());
  auto value = [&](const std::string& name) {
    return testing::MetricValue(testing::MetricText(metrics->registry()), name);
  };
  for (int i = 0; i < 5; ++i) Add(*conn_, i);
  Sequencer sequencer({"audit.test/log", signer_.get(), 100, absl::Milliseconds(5)});
  ASSERT_TRUE(sequencer.RunOnce(*conn_).ok());
  for (int i = 5; i < 9; ++i) Add(*conn_, i);
  // Two queue entries gone (the superuser), two still queued; all four
  // committed two minutes ago.
  ASSERT_TRUE(conn_
                  ->ExecuteScript("tamper",
                                  "UPDATE audit_logs SET ingested_at = now() - interval '2 minutes'"
                                  " WHERE entity_id IN ('u5', 'u6', 'u7', 'u8');"
                                  " DELETE FROM log_queue WHERE event_id IN (SELECT event_id"
                                  " FROM audit_logs WHERE entity_id IN ('u5', 'u7'))",
                                  absl::Seconds(5))
                  .ok());
  ASSERT_TRUE(completeness.Check(*conn_).ok());
  EXPECT_EQ(value("ulticode_admin_audit_rows_unlogged"), 4);
  EXPECT_GE(value("ulticode_admin_audit_rows_unlogged_oldest_seconds"), 119);
  EXPECT_EQ(value("ulticode_admin_audit_rows_requeued_total"), 2);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_queue"), 4);
  // A second pass queues nothing twice.
  ASSERT_TRUE(completeness.Check(*conn_).ok());
  EXPECT_EQ(value("ulticode_admin_audit_rows_requeued_total"), 2);
  // A leaf row no checkpoint covers (the runtime role may append one) does
  // not make a row logged, and log_queue_done does not take its entry.
  ASSERT_TRUE(conn_
                  ->ExecuteScript("leaf",
                                  "INSERT INTO log_leaves SELECT 1000, event_id FROM audit_logs"
                                  " WHERE entity_id = 'u6'",
                                  absl::Seconds(5))
                  .ok());
  ASSERT_TRUE(completeness.Check(*conn_).ok());
  EXPECT_EQ(value("ulticode_admin_audit_rows_unlogged"), 4);
  EXPECT_EQ(testing::QueryInt(*conn_,
                              "SELECT count(*) FROM log_queue_done(ARRAY(SELECT event_id FROM"
                              " audit_logs WHERE entity_id = 'u6'))"),
            0);
  ASSERT_TRUE(
      conn_
          ->ExecuteScript("leaf", "DELETE FROM log_leaves WHERE log_index = 1000", absl::Seconds(5))
          .ok());
  // Within the bound, a row waiting for the sequencer is no finding.
  Add(*conn_, 9);
  ASSERT_TRUE(completeness.Check(*conn_).ok());
  EXPECT_EQ(value("ulticode_admin_audit_rows_unlogged"), 4);

  ASSERT_TRUE(sequencer.RunOnce(*conn_).ok());
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_leaves"), 10);
  ASSERT_TRUE(completeness.Check(*conn_).ok());
  EXPECT_EQ(value("ulticode_admin_audit_rows_unlogged"), 0);
  EXPECT_EQ(value("ulticode_admin_audit_rows_unlogged_oldest_seconds"), 0);
}

TEST_F(TransparencyLogTest, TwoSequencersRacingGiveEachRowOneIndexWithoutGaps) {
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    auto c = pg::Connection::Connect(connect_);
    for (int i = 0; i < 400; ++i) Add(**c, i);
    stop = true;
  });
  auto race = [&] {
    auto c = pg::Connection::Connect(connect_);
    Sequencer s({"audit.test/log", signer_.get(), 37, absl::Milliseconds(5)});
    while (!stop) ASSERT_TRUE(s.RunOnce(**c).ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(s.RunOnce(**c).ok());
  };
  std::thread a(race), b(race);
  writer.join();
  a.join();
  b.join();
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(*) FROM log_queue"), 0);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT count(DISTINCT event_id) FROM log_leaves"), 400);
  EXPECT_EQ(testing::QueryInt(*conn_, "SELECT max(log_index) FROM log_leaves"), 399);
  auto root = tlog::StoredRoot(400, Reader());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root, tlog::RootOf(Leaves()));
}

}  // namespace
}  // namespace ulticode::admin::transparency
