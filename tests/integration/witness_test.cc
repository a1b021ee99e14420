// The owner as a witness of Admin's transparency log (owner/outbox/
// witness.h) on real PostgreSQL and Redis: it keeps the first checkpoint
// and every one that extends what it holds (log_witnessed), cosigns them on
// `<audit stream>:cosignatures`, and refuses rollbacks, forks, bad
// signatures and malformed entries, counting each by outcome. The log is
// built in memory (common/tlog/merkle.h) and signed with the test log key.
#include "owner/outbox/witness.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/migrations/migrations.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "common/tlog/witnessing.h"
#include "gtest/gtest.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/outbox_store.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "tests/support/audit_events.h"
#include "tests/support/keys.h"
#include "tests/support/pg_query.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using ::ulticode::testing::TestKeys;

const TestKeys& Keys() { return ::ulticode::testing::SharedTestKeys(); }

// Every outcome the witness counts, in the order the tests list them.
const std::vector<std::string>& AllOutcomes() {
  static const std::vector<std::string> outcomes = {
      "accepted", "fork", "rollback", "bad_signature", "malformed", "stale_proof", "state_forged"};
  return outcomes;
}

// n leaf hashes of the leaves "<prefix>-0", "<prefix>-1", ...
std::vector<tlog::Hash> Leaves(const std::string& prefix, int n) {
  std::vector<tlog::Hash> leaves;
  for (int i = 0; i < n; ++i) leaves.push_back(tlog::LeafHash(absl::StrCat(prefix, "-", i)));
  return leaves;
}

// A checkpoint as the log signs it: its text and the signed note.
struct Signed {
  uint64_t size = 0;
  tlog::Hash root{};
  std::string text;
  std::string note;
};

// One cosignature entry the witness sent.
struct Cosigned {
  std::string size;
  std::string line;
};

class WitnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    pg::ConnectOptions owner_pg;
    owner_pg.conninfo = pg.ConnInfo(::ulticode::testing::CreateScratchDatabase(pg, "witness"));
    auto conn = pg::Connection::Connect(owner_pg);
    ASSERT_TRUE(conn.ok()) << conn.status();
    owner_ = std::move(conn).value();
    auto applied = migrations::Apply(*owner_, outbox::Migrations());
    ASSERT_TRUE(applied.ok()) << applied.status();
    redis::Options ro;
    ro.host = redis.host;
    ro.port = redis.port;
    ro.user = redis.user;
    ro.password = redis.password;
    redis_ = std::make_unique<redis::Client>(ro);
    stream_ = "test:witness:" + ::ulticode::testing::RandomSuffix();

    auto log_signer = tlog::NoteSigner::Create(TestKeys::kLogOrigin, Keys().log());
    ASSERT_TRUE(log_signer.ok()) << log_signer.status();
    log_signer_ = std::make_unique<tlog::NoteSigner>(*std::move(log_signer));
    auto log_key = tlog::NoteVerifier::Parse(Keys().LogVerifierKey());
    ASSERT_TRUE(log_key.ok()) << log_key.status();
    auto cosignatures = tlog::CosignatureVerifier::Parse(tlog::FormatVerifierKey(
        "auth", tlog::kCosignatureV1Ed25519, Keys().auth().public_key().raw()));
    ASSERT_TRUE(cosignatures.ok()) << cosignatures.status();
    cosignatures_ = std::make_unique<tlog::CosignatureVerifier>(*std::move(cosignatures));

    outbox::WitnessOptions options;
    options.owner = audit::v1::OWNER_AUTH;
    options.audit_stream = stream_;
    options.log_keys = {*std::move(log_key)};
    options.key = &Keys().auth();
    options.keys = &Keys().directory_file();
    auto witness = outbox::Witness::Create(std::move(options), registry_);
    ASSERT_TRUE(witness.ok()) << witness.status();
    witness_ = *std::move(witness);
  }

  // The checkpoint of the first `size` of `leaves`, signed by `signer`
  // (the log's own signer when null).
  Signed Checkpoint(const std::vector<tlog::Hash>& leaves, uint64_t size,
                    const tlog::NoteSigner* signer = nullptr) {
    Signed s;
    s.size = size;
    s.root = tlog::RootOf(absl::MakeConstSpan(leaves.data(), size));
    s.text = tlog::CheckpointText({TestKeys::kLogOrigin, size, s.root, {}});
    auto note = (signer != nullptr ? signer : log_signer_.get())->Sign(s.text);
    EXPECT_TRUE(note.ok()) << note.status();
    s.note = note.ok() ? *note : "";
    return s;
  }

  // RFC 9162 PROOF(from, D[0:size]) over `leaves`.
  static std::vector<tlog::Hash> Proof(const std::vector<tlog::Hash>& leaves, uint64_t from,
                                       uint64_t size) {
    auto proof = tlog::ConsistencyProof(from, absl::MakeConstSpan(leaves.data(), size));
    EXPECT_TRUE(proof.ok()) << proof.status();
    return proof.ok() ? *proof : std::vector<tlog::Hash>{};
  }

  // The proof stream entry Admin sends for `note`.
  static redis::StreamFields Entry(const std::string& note, uint64_t from,
                                   const std::vector<tlog::Hash>& proof) {
    return {{tlog::kCheckpointField, note},
            {tlog::kFromField, absl::StrCat(from)},
            {tlog::kConsistencyField, tlog::EncodeHashes(proof)}};
  }

  // Puts `fields` on the proof stream as Admin would, and observes it;
  // returns its id.
  std::string Observe(const redis::StreamFields& fields) {
    auto ids = redis_->XAddBatch(tlog::ProofStreamFor(stream_), {fields});
    EXPECT_TRUE(ids.ok()) << ids.status();
    redis::StreamEntry entry{.id = ids.ok() ? ids->at(0) : "", .fields = fields};
    const absl::Status status = witness_->Observe(*owner_, *redis_, entry);
    EXPECT_TRUE(status.ok()) << status;
    return entry.id;
  }
  void ObserveAgain(const std::string& id, const redis::StreamFields& fields) {
    const absl::Status status = witness_->Observe(*owner_, *redis_, {.id = id, .fields = fields});
    EXPECT_TRUE(status.ok()) << status;
  }

  // Observes the checkpoints of `leaves` at `sizes`, the first from 0
  // without a proof, each next one with a proof from the size before it;
  // asserts all were accepted.
  void Accept(const std::vector<tlog::Hash>& leaves, const std::vector<uint64_t>& sizes) {
    uint64_t from = 0;
    for (uint64_t size : sizes) {
      const Signed s = Checkpoint(leaves, size);
      Observe(
          Entry(s.note, from, from == 0 ? std::vector<tlog::Hash>{} : Proof(leaves, from, size)));
      from = size;
    }
    ASSERT_EQ(Outcome("accepted"), static_cast<double>(sizes.size()));
    ASSERT_EQ(Held().first, static_cast<int64_t>(sizes.back()));
  }

  // ulticode_log_witness_checkpoints_total{owner="auth",outcome=...}; -1
  // when the series is missing.
  double Outcome(const std::string& outcome) {
    for (const prometheus::MetricFamily& f : registry_.Collect()) {
      if (f.name != "ulticode_log_witness_checkpoints_total") continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& l : m.label) labels[l.name] = l.value;
        if (labels["owner"] == "auth" && labels["outcome"] == outcome) return m.counter.value;
      }
    }
    return -1;
  }

  // Asserts every outcome counter: those in `expected` at their value, the
  // others at 0.
  void ExpectOutcomes(const std::map<std::string, double>& expected) {
    for (const std::string& outcome : AllOutcomes()) {
      const auto it = expected.find(outcome);
      EXPECT_EQ(Outcome(outcome), it == expected.end() ? 0.0 : it->second) << "outcome " << outcome;
    }
  }

  // ulticode_log_witness_size{owner="auth"}; -1 when missing.
  double SizeGauge() {
    for (const prometheus::MetricFamily& f : registry_.Collect()) {
      if (f.name != "ulticode_log_witness_size") continue;
      for (const prometheus::ClientMetric& m : f.metric) return m.gauge.value;
    }
    return -1;
  }

  // The rows of log_witnessed.
  int64_t HeldRows() {
    return ::ulticode::testing::QueryInt(*owner_, "SELECT count(*) FROM log_witnessed");
  }

  // (size, root) log_witnessed holds for the test log; (-1, {}) when none.
  std::pair<int64_t, tlog::Hash> Held() {
    pg::Statement st{"held", "SELECT size, root FROM log_witnessed WHERE origin = $1"};
    auto r = owner_->Execute(st, {pg::Text(TestKeys::kLogOrigin)});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->rows() != 1) return {-1, tlog::Hash{}};
    auto root = tlog::FromBytes(r->GetBytes(0, 1));
    EXPECT_TRUE(root.ok()) << root.status();
    return {r->GetInt64(0, 0), root.ok() ? *root : tlog::Hash{}};
  }

  std::string QueryText(const std::string& sql) {
    return ::ulticode::testing::QueryText(*owner_, sql);
  }

  // The note log_witnessed holds for the test log.
  std::string HeldNote() {
    return ::ulticode::testing::QueryText(
        *owner_,
        absl::StrCat("SELECT note FROM log_witnessed WHERE origin = '", TestKeys::kLogOrigin, "'"));
  }

  // Every entry on the cosignature stream, oldest first.
  std::vector<Cosigned> Cosignatures() {
    auto entries = redis_->XRead(tlog::CosignatureStreamFor(stream_), 0, absl::ZeroDuration(), "0");
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<Cosigned> out;
    if (!entries.ok()) return out;
    for (const redis::StreamEntry& e : *entries) {
      Cosigned c;
      for (const auto& [k, v] : e.fields) {
        if (k == tlog::kSizeField) c.size = v;
        if (k == tlog::kCosignatureField) c.line = v;
      }
      EXPECT_EQ(e.fields.size(), 2u) << "size and cosignature only";
      out.push_back(std::move(c));
    }
    return out;
  }

  // Asserts `c` is the owner's valid cosignature of `s`, made just now.
  void ExpectCosigns(const Cosigned& c, const Signed& s) {
    EXPECT_EQ(c.size, absl::StrCat(s.size));
    auto time = cosignatures_->Verify(s.text, c.line);
    ASSERT_TRUE(time.ok()) << time.status() << " line: " << c.line;
    const int64_t now = absl::ToUnixSeconds(absl::Now());
    EXPECT_LE(static_cast<int64_t>(*time), now);
    EXPECT_GE(static_cast<int64_t>(*time), now - 60);
  }

  std::unique_ptr<pg::Connection> owner_;
  std::unique_ptr<redis::Client> redis_;
  std::string stream_;
  prometheus::Registry registry_;
  std::unique_ptr<tlog::NoteSigner> log_signer_;
  std::unique_ptr<tlog::CosignatureVerifier> cosignatures_;
  std::unique_ptr<outbox::Witness> witness_;
};

TEST_F(WitnessTest, TheFirstCheckpointIsKeptAndCosigned) {
  const auto leaves = Leaves("leaf", 5);
  const Signed s = Checkpoint(leaves, 5);
  const redis::StreamFields entry = Entry(s.note, 0, {});
  (Observe(entry));

  ExpectOutcomes({{"accepted", 1}});
  EXPECT_EQ(SizeGauge(), 5.0);
  EXPECT_EQ(HeldRows(), 1);
  const auto [size, root] = Held();
  EXPECT_EQ(size, 5);
  EXPECT_EQ(root, tlog::RootOf(leaves));
  EXPECT_EQ(HeldNote(), s.note) << "the signed note is kept as shown";
  const auto cosigned = Cosignatures();
  ASSERT_EQ(cosigned.size(), 1u);
  ExpectCosigns(cosigned[0], s);
  // A cosignature of another checkpoint does not verify with that line.
  const Signed other = Checkpoint(Leaves("other", 5), 5);
  EXPECT_FALSE(cosignatures_->Verify(other.text, cosigned[0].line).ok());
}

TEST_F(WitnessTest, ALargerCheckpointWithAConsistencyProofIsAccepted) {
  const auto leaves = Leaves("leaf", 9);
  const Signed first = Checkpoint(leaves, 5);
  (Observe(Entry(first.note, 0, {})));
  const Signed second = Checkpoint(leaves, 9);
  (Observe(Entry(second.note, 5, Proof(leaves, 5, 9))));

  ExpectOutcomes({{"accepted", 2}});
  EXPECT_EQ(SizeGauge(), 9.0);
  EXPECT_EQ(HeldRows(), 1);
  const auto [size, root] = Held();
  EXPECT_EQ(size, 9);
  EXPECT_EQ(root, tlog::RootOf(leaves));
  EXPECT_EQ(HeldNote(), second.note);
  const auto cosigned = Cosignatures();
  ASSERT_EQ(cosigned.size(), 2u);
  ExpectCosigns(cosigned[0], first);
  ExpectCosigns(cosigned[1], second);
}

TEST_F(WitnessTest, ASmallerTreeAfterALargerOneIsARollback) {
  const auto leaves = Leaves("leaf", 9);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  ASSERT_EQ(Cosignatures().size(), 2u);

  // Validly signed by the log, and a prefix of the same log: still refused.
  const Signed smaller = Checkpoint(leaves, 5);
  (Observe(Entry(smaller.note, 9, {})));

  ExpectOutcomes({{"accepted", 2}, {"rollback", 1}});
  EXPECT_EQ(SizeGauge(), 9.0);
  const auto [size, root] = Held();
  EXPECT_EQ(size, 9);
  EXPECT_EQ(root, tlog::RootOf(leaves));
  EXPECT_EQ(Cosignatures().size(), 2u) << "no cosignature for a rollback";
}

TEST_F(WitnessTest, AnotherRootForTheSameSizeIsAFork) {
  const auto leaves = Leaves("leaf", 9);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));

  const auto forked = Leaves("forked", 9);
  const Signed fork = Checkpoint(forked, 9);
  ASSERT_NE(fork.root, tlog::RootOf(leaves));
  (Observe(Entry(fork.note, 9, {})));

  ExpectOutcomes({{"accepted", 2}, {"fork", 1}});
  const auto [size, root] = Held();
  EXPECT_EQ(size, 9);
  EXPECT_EQ(root, tlog::RootOf(leaves)) << "the first root is kept";
  EXPECT_EQ(Cosignatures().size(), 2u) << "no cosignature for a fork";
}

TEST_F(WitnessTest, ALargerTreeWhoseProofDoesNotExtendTheHeldOneIsAFork) {
  const auto leaves = Leaves("leaf", 5);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5}));

  // Another log of 9 leaves whose first 5 differ; its proof from 5 is
  // right for that log, but not from the root the owner holds.
  const auto forked = Leaves("forked", 9);
  const Signed fork = Checkpoint(forked, 9);
  const auto proof = Proof(forked, 5, 9);
  ASSERT_TRUE(tlog::VerifyConsistency(5, 9, tlog::RootOf(absl::MakeConstSpan(forked.data(), 5)),
                                      fork.root, proof)
                  .ok())
      << "the proof verifies for its own log";
  (Observe(Entry(fork.note, 5, proof)));

  ExpectOutcomes({{"accepted", 1}, {"fork", 1}});
  EXPECT_EQ(SizeGauge(), 5.0);
  const auto [size, root] = Held();
  EXPECT_EQ(size, 5);
  EXPECT_EQ(root, tlog::RootOf(leaves));
  EXPECT_EQ(Cosignatures().size(), 1u) << "no cosignature for a fork";
}

TEST_F(WitnessTest, ANoteNotSignedByTheLogKeyIsABadSignature) {
  const auto leaves = Leaves("leaf", 5);
  // The log's name, another key.
  auto impostor_key = crypto::SigningKey::Generate();
  ASSERT_TRUE(impostor_key.ok()) << impostor_key.status();
  auto impostor = tlog::NoteSigner::Create(TestKeys::kLogOrigin, *impostor_key);
  ASSERT_TRUE(impostor.ok()) << impostor.status();
  const Signed forged = Checkpoint(leaves, 5, &*impostor);
  (Observe(Entry(forged.note, 0, {})));

  ExpectOutcomes({{"bad_signature", 1}});
  EXPECT_EQ(HeldRows(), 0) << "nothing kept";
  EXPECT_TRUE(Cosignatures().empty());

  // The log's own signature on a text whose root line was edited afterwards.
  const Signed real = Checkpoint(leaves, 5);
  auto split = tlog::SplitNoteSignatures(real.note);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->signatures.size(), 1u);
  const tlog::Hash other_root = tlog::RootOf(Leaves("other", 5));
  const std::string edited_text = tlog::CheckpointText({TestKeys::kLogOrigin, 5, other_root, {}});
  ASSERT_NE(edited_text, real.text);
  ASSERT_EQ(edited_text.substr(0, edited_text.find('\n', edited_text.find('\n') + 1)),
            real.text.substr(0, real.text.find('\n', real.text.find('\n') + 1)))
      << "only the root line differs";
  const std::string edited = absl::StrCat(edited_text, "\n", split->signatures[0], "\n");
  (Observe(Entry(edited, 0, {})));

  ExpectOutcomes({{"bad_signature", 2}});
  EXPECT_EQ(HeldRows(), 0) << "nothing kept";
  EXPECT_TRUE(Cosignatures().empty());
}

TEST_F(WitnessTest, AProofFromAnotherSizeIsStaleAndTheHeldCosignatureIsSentAgain) {
  const auto leaves = Leaves("leaf", 12);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  ASSERT_EQ(Cosignatures().size(), 2u);

  // Admin has not seen the cosignature of 9: it proves 12 from 5.
  const Signed newer = Checkpoint(leaves, 12);
  (Observe(Entry(newer.note, 5, Proof(leaves, 5, 12))));

  ExpectOutcomes({{"accepted", 2}, {"stale_proof", 1}});
  EXPECT_EQ(SizeGauge(), 9.0);
  const auto [size, root] = Held();
  EXPECT_EQ(size, 9);
  EXPECT_EQ(root, tlog::RootOf(absl::MakeConstSpan(leaves.data(), 9)));
  const auto cosigned = Cosignatures();
  ASSERT_EQ(cosigned.size(), 3u);
  ExpectCosigns(cosigned[2], Checkpoint(leaves, 9));
  EXPECT_FALSE(cosignatures_->Verify(newer.text, cosigned[2].line).ok()) << "12 is not cosigned";
}

TEST_F(WitnessTest, TheSameCheckpointShownAgainIsCosignedAgain) {
  const auto leaves = Leaves("leaf", 9);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  ASSERT_EQ(Cosignatures().size(), 2u);

  const Signed again = Checkpoint(leaves, 9);
  (Observe(Entry(again.note, 5, Proof(leaves, 5, 9))));

  ExpectOutcomes({{"accepted", 2}});
  const auto [size, root] = Held();
  EXPECT_EQ(size, 9);
  EXPECT_EQ(root, tlog::RootOf(leaves));
  const auto cosigned = Cosignatures();
  ASSERT_EQ(cosigned.size(), 3u);
  ExpectCosigns(cosigned[2], again);
}

TEST_F(WitnessTest, AnEntryWithoutLogFromIsMalformed) {
  const auto leaves = Leaves("leaf", 5);
  const Signed s = Checkpoint(leaves, 5);
  const redis::StreamFields entry = {{tlog::kCheckpointField, s.note},
                                     {tlog::kConsistencyField, tlog::EncodeHashes({})}};
  (Observe(entry));

  ExpectOutcomes({{"malformed", 1}});
  EXPECT_EQ(HeldRows(), 0) << "nothing kept";
  EXPECT_TRUE(Cosignatures().empty());
}

TEST_F(WitnessTest, AnEntryReadBeforeIsIgnoredNotARollback) {
  const auto leaves = Leaves("leaf", 9);
  const Signed five = Checkpoint(leaves, 5);
  const std::string first = Observe(Entry(five.note, 0, {}));
  Observe(Entry(Checkpoint(leaves, 9).note, 5, Proof(leaves, 5, 9)));
  // A restarted reader, or a replica behind, reads the first entry again.
  ObserveAgain(first, Entry(five.note, 0, {}));

  ExpectOutcomes({{"accepted", 2}, {"replayed", 1}});
  EXPECT_EQ(Held().first, 9);
  EXPECT_EQ(Cosignatures().size(), 2u);
}

// The held entry id is a hint the owner's database login can write: moved
// far ahead (the trigger keeps it moving forward only), every rollback would
// pass as "read before". The witness finds the held checkpoint in that entry
// first. (Before: ignored as replayed.)
TEST_F(WitnessTest, AHeldEntryIdMovedAheadDoesNotHideARollback) {
  const auto leaves = Leaves("leaf", 9);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  ASSERT_TRUE(owner_
                  ->Execute(pg::Statement{"forge", "UPDATE log_witnessed SET entry_id = $1"},
                            {pg::Text("99999999999999-0")})
                  .ok());
  ASSERT_EQ(QueryText("SELECT entry_id FROM log_witnessed"), "99999999999999-0");
  Observe(Entry(Checkpoint(leaves, 5).note, 9, {}));

  ExpectOutcomes({{"accepted", 2}, {"rollback", 1}});
  EXPECT_EQ(Held().first, 9);
}

// What the owner witnessed only moves forward, whoever writes the table: a
// smaller tree, another root or note at the same size, and an entry id that
// is not a stream id (or does not fit one) are refused; at the same size an
// entry id that goes back is kept where it was.
TEST_F(WitnessTest, TheWitnessedStateOnlyMovesForward) {
  const auto leaves = Leaves("leaf", 9);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  const std::string entry = QueryText("SELECT entry_id FROM log_witnessed");
  for (const char* set :
       {"size = 5",
        "root = '\\x"
        "0000000000000000000000000000000000000000000000000000000000000000'",
        "note = 'another'", "entry_id = 'tomorrow'", "entry_id = '99999999999999999999-0'"}) {
    const std::string sql = absl::StrCat("UPDATE log_witnessed SET ", set);
    const auto r = owner_->Execute(pg::Statement{"rewind", sql.c_str()}, {});
    ASSERT_FALSE(r.ok()) << set;
    EXPECT_NE(std::string(r.status().message()).find("23514"), std::string::npos) << r.status();
  }
  ASSERT_TRUE(
      owner_->Execute(pg::Statement{"back", "UPDATE log_witnessed SET entry_id = '1-0'"}, {}).ok());
  EXPECT_EQ(QueryText("SELECT entry_id FROM log_witnessed"), entry);
  EXPECT_EQ(Held().first, 9);
}

// The witness's state is its own: whatever another login writes into
// log_witnessed (the runtime login may move it forward, the superuser
// anywhere), the witness judges nothing by it and cosigns nothing, and counts
// it; the state it wrote itself stands. The forgeries are drawn from a seed
// (ULTICODE_WITNESS_STATE_SEED); each round puts the witness's own state back.
TEST_F(WitnessTest, AStateWrittenByAnotherLoginIsNeverCosigned) {
  const uint32_t seed =
      ::ulticode::testing::SeedFromEnv("ULTICODE_WITNESS_STATE_SEED", "witness state");
  std::mt19937 rng(seed);
  const auto leaves = Leaves("leaf", 40);
  const auto fork = Leaves("fork", 40);
  ASSERT_NO_FATAL_FAILURE(Accept(leaves, {5, 9}));
  const std::string own = QueryText("SELECT cosignature FROM log_witnessed");
  const std::string first_line = Cosignatures().at(0).line;
  const Signed held = Checkpoint(leaves, 9);
  auto sql = [&](const std::string& statement) {
    const auto r = owner_->ExecuteScript("forge", statement, absl::Seconds(10));
    ASSERT_TRUE(r.ok()) << statement << ": " << r;
  };
  auto quoted = [](const std::string& s) {
    return "'" + absl::StrReplaceAll(s, {{"'", "''"}}) + "'";
  };
  auto bytes = [](const tlog::Hash& h) {
    return "'\\x" + absl::BytesToHexString(tlog::ToBytes(h)) + "'";
  };
  struct Forgery {
    const char* what;
    std::function<std::string(uint64_t)> set;  // SET clause for a forged size
  };
  const std::vector<Forgery> forgeries = {
      {"a forked checkpoint, its own cosignature line copied",
       [&](uint64_t n) {
         const Signed f = Checkpoint(fork, n);
         return absl::StrCat("size = ", n, ", root = ", bytes(f.root), ", note = ", quoted(f.note),
                             ", cosignature = ", quoted(own));
       }},
      {"a forked checkpoint with the owner's first cosignature line",
       [&](uint64_t n) {
         const Signed f = Checkpoint(fork, n);
         return absl::StrCat("size = ", n, ", root = ", bytes(f.root), ", note = ", quoted(f.note),
                             ", cosignature = ", quoted(first_line));
       }},
      {"the held note and cosignature, a larger size and another root",
       [&](uint64_t n) {
         return absl::StrCat("size = ", n, ", root = ", bytes(Checkpoint(fork, n).root));
       }},
      {"a forked checkpoint, no cosignature",
       [&](uint64_t n) {
         const Signed f = Checkpoint(fork, n);
         return absl::StrCat("size = ", n, ", root = ", bytes(f.root), ", note = ", quoted(f.note),
                             ", cosignature = ''");
       }},
      {"a real checkpoint of the log ahead of the witness, no cosignature",
       [&](uint64_t n) {
         const Signed f = Checkpoint(leaves, n);
         return absl::StrCat("size = ", n, ", root = ", bytes(f.root), ", note = ", quoted(f.note),
                             ", cosignature = ''");
       }},
  };
  double forged = 0;
  for (int round = 0; round < 15; ++round) {
    const Forgery& f = forgeries[round < 5 ? round : rng() % forgeries.size()];
    const uint64_t n = 10 + rng() % 20;
    SCOPED_TRACE(absl::StrCat("seed ", seed, ", round ", round, ": ", f.what, ", size ", n));
    const size_t cosigned = Cosignatures().size();
    ASSERT_NO_FATAL_FAILURE(sql("UPDATE log_witnessed SET " + f.set(n)));  // moves forward
    // The state as the forger wrote it is not the witness's own...
    const auto [size, root] = Held();
    const outbox::WitnessedState state{static_cast<uint64_t>(size), root, HeldNote(),
                                       QueryText("SELECT cosignature FROM log_witnessed")};
    auto verifier = outbox::OwnCosignatureVerifier(audit::v1::OWNER_AUTH, Keys().auth());
    ASSERT_TRUE(verifier.ok()) << verifier.status();
    const auto text = outbox::OwnCheckpointText(*verifier, state);
    EXPECT_TRUE(absl::IsDataLoss(text.status())) << text.status();
    // ...and a checkpoint that extends it, one that extends the real one,
    // and the forged one again are all refused as such, never cosigned.
    const uint64_t next = n + 1 + rng() % 5;
    const bool forked = absl::StrContains(f.what, "forked") || absl::StrContains(f.what, "root");
    const auto& base = forked ? fork : leaves;
    Observe(Entry(Checkpoint(base, next).note, n, Proof(base, n, next)));
    Observe(Entry(Checkpoint(leaves, next).note, 9, Proof(leaves, 9, next)));
    Observe(Entry(Checkpoint(base, n).note, n, {}));
    forged += 3;
    EXPECT_EQ(Outcome("state_forged"), forged);
    EXPECT_EQ(Cosignatures().size(), cosigned) << "a forged state was cosigned";
    EXPECT_EQ(Outcome("accepted"), 2.0);
    // The superuser puts the witness's own state back.
    ASSERT_NO_FATAL_FAILURE(sql(absl::StrCat(
        "SET session_replication_role = replica; UPDATE log_witnessed SET size = 9, root = ",
        bytes(held.root), ", note = ", quoted(held.note), ", cosignature = ", quoted(own),
        "; SET session_replication_role = origin")));
  }
  // Its own state still moves on.
  Observe(Entry(Checkpoint(leaves, 12).note, 9, Proof(leaves, 9, 12)));
  EXPECT_EQ(Outcome("accepted"), 3.0);
  EXPECT_EQ(Held().first, 12);
}

TEST_F(WitnessTest, ACheckpointOfAnotherOriginSignedWithTheLogKeyIsAFork) {
  const auto leaves = Leaves("leaf", 5);
  const tlog::Hash root = tlog::RootOf(leaves);
  const std::string note =
      log_signer_->Sign(tlog::CheckpointText({"another.log/audit", 5, root, {}})).value();
  Observe(Entry(note, 0, {}));

  ExpectOutcomes({{"fork", 1}});
  EXPECT_EQ(HeldRows(), 0) << "nothing kept";
  EXPECT_TRUE(Cosignatures().empty());
}

// Rows of this owner's outbox whose events the proofs show in the log, in
// a leaf whose seal verifies with this owner's key, turn CONFIRMED (keeping
// the leaf's seal); a row whose proof does not verify, or whose leaf holds
// a seal of another party's key or a seal that does not verify, stays as it
// was.
TEST_F(WitnessTest, InclusionProofsConfirmTheRowsTheyProve) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto tx = owner_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status();
    const audit::AuditEvent event =
        ::ulticode::testing::SampleEvent(audit::v1::OWNER_AUTH, absl::StrCat("u", i));
    ASSERT_TRUE(outbox::Append(*tx, event, Keys().auth()).ok());
    ASSERT_TRUE(tx->Commit().ok());
    ids.push_back(event.event_id());
  }
  // Handed to the publisher (what the dispatcher does before its XADD).
  ASSERT_TRUE(owner_
                  ->ExecuteScript("test.publish",
                                  "UPDATE audit_outbox SET publication = 1, state = 'PUBLISHED'",
                                  absl::Seconds(10))
                  .ok());
  auto rows = outbox::PayloadsOf(*owner_, ids);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  // As the dispatcher sealed them: one bundle; the third leaf holds a seal
  // by App's key, the fourth one with a flipped signature bit.
  std::vector<absl::string_view> payloads;
  for (const auto& row : *rows) payloads.push_back(row.payload);
  std::vector<std::string> seals = seal::SealBundle(Keys().auth(), payloads).value();
  std::vector<std::string> key_ids(4, Keys().auth().key_id());
  seals[2] = seal::SealBundle(Keys().app(), {payloads[2]}).value()[0];
  key_ids[2] = Keys().app().key_id();
  seals[3].back() = static_cast<char>(seals[3].back() ^ 1);
  // The log: three other leaves, then the four events at 3..6.
  std::vector<tlog::Hash> leaves = Leaves("other", 3);
  std::vector<std::string> logged;
  for (size_t i = 0; i < rows->size(); ++i) {
    const outbox::OutboxPayload& row = (*rows)[i];
    leaves.push_back(tlog::LeafHash(
        tlog::EncodeLeaf({"auth", row.event_id, key_ids[i], seals[i], row.payload})));
    logged.push_back(row.event_id);
  }
  const Signed s = Checkpoint(leaves, 7);
  std::vector<tlog::LeafProof> proofs;
  for (uint64_t i = 0; i < 4; ++i) {
    // The second row's proof is for the wrong index: it proves nothing.
    proofs.push_back({logged[i], i == 1 ? 2 : 3 + i, tlog::InclusionProof(3 + i, leaves).value(),
                      key_ids[i], seals[i]});
  }
  // Row 0 kept the seal of a publication Admin did not keep.
  ASSERT_TRUE(owner_
                  ->Execute({"test.other_seal",
                             "UPDATE audit_outbox SET seal = $2, sealed_by = $3"
                             " WHERE event_id = $1::uuid"},
                            {pg::Text(logged[0]),
                             pg::Bytes(seal::SealBundle(Keys().auth(), {payloads[0]}).value()[0]),
                             pg::Text(key_ids[0])})
                  .ok());
  redis::StreamFields entry = Entry(s.note, 0, {});
  entry.emplace_back(tlog::kProofsField, tlog::EncodeProofs(proofs));
  Observe(entry);

  ExpectOutcomes({{"accepted", 1}});
  auto state = [&](size_t i) {
    return QueryText(
        absl::StrCat("SELECT state FROM audit_outbox WHERE event_id = '", logged[i], "'"));
  };
  EXPECT_EQ(state(0), "CONFIRMED");
  EXPECT_EQ(QueryText(absl::StrCat(
                "SELECT encode(seal, 'hex') FROM audit_outbox WHERE event_id = '", logged[0], "'")),
            absl::BytesToHexString(seals[0]))
      << "the row keeps the seal its leaf holds, not the one it had";
  EXPECT_EQ(state(1), "PUBLISHED");
  EXPECT_EQ(state(2), "PUBLISHED") << "a seal of another party's key";
  EXPECT_EQ(state(3), "PUBLISHED") << "a seal that does not verify";
  EXPECT_EQ(Cosignatures().size(), 1u);
}

TEST_F(WitnessTest, OnlyTheLastEntryOfACheckpointIsCosigned) {
  const auto leaves = Leaves("leaf", 5);
  const Signed s = Checkpoint(leaves, 5);
  redis::StreamFields first = Entry(s.note, 0, {});
  first.emplace_back(tlog::kMoreField, "1");
  Observe(first);
  EXPECT_TRUE(Cosignatures().empty()) << "more proofs of this checkpoint follow";
  Observe(Entry(s.note, 0, {}));
  EXPECT_EQ(Cosignatures().size(), 1u);
  ExpectOutcomes({{"accepted", 1}});
}

TEST_F(WitnessTest, ASendIsCosignedOnlyOnceEveryPartArrived) {
  const auto leaves = Leaves("leaf", 5);
  const Signed s = Checkpoint(leaves, 5);
  auto part = [&](const char* i_n) {
    redis::StreamFields fields = Entry(s.note, 0, {});
    fields.emplace_back(tlog::kPartField, i_n);
    return fields;
  };
  Observe(part("2/2"));  // part 1 of this send was lost
  EXPECT_TRUE(Cosignatures().empty());
  Observe(part("1/2"));
  EXPECT_TRUE(Cosignatures().empty()) << "part 2 of this send has not come again";
  Observe(part("2/2"));
  EXPECT_EQ(Cosignatures().size(), 1u);
}

TEST_F(WitnessTest, AFirstCheckpointIsTakenOnlyFromAnEntryThatProvesFromZero) {
  const auto leaves = Leaves("leaf", 9);
  // An entry of a log this owner was told to forget: it proves from 5.
  Observe(Entry(Checkpoint(leaves, 9).note, 5, Proof(leaves, 5, 9)));
  ExpectOutcomes({{"stale_proof", 1}});
  EXPECT_EQ(HeldRows(), 0);
  EXPECT_TRUE(Cosignatures().empty());
  Observe(Entry(Checkpoint(leaves, 9).note, 0, {}));
  ExpectOutcomes({{"stale_proof", 1}, {"accepted", 1}});
  EXPECT_EQ(Held().first, 9);
}

}  // namespace
}  // namespace ulticode
