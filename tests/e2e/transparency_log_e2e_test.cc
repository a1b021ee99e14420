// Admin's audit_logs as a transparency log, end to end on the three real
// binaries with real PostgreSQL and Redis: Admin sequences and signs
// checkpoints; AuditLogService serves proofs that verify against them; an
// auditor's `ulticode-verify export` and `check` (public keys only) pass on
// the untouched log, and name the first break of every tampering done
// directly in Admin's database as its superuser: a changed envelope, a
// deleted row (with and without renumbering the rest), an inserted row,
// two swapped rows, a rewritten tree hash, an edited checkpoint, a leaf
// signed by a key not in the directory, and (last, it is not undone) the
// newest rows truncated and a smaller checkpoint re-signed with the log's
// own key, which only a checkpoint held from before exposes: the auditor's,
// and live the owners', who witness the log: both cosign its checkpoints,
// and both refuse the shorter history as a rollback.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/pg/params.h"
#include "common/seal/seal.h"
#include "common/server/error_details.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode {
namespace {

namespace v1 = admin::v1;
using ::testing::HasSubstr;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::QueryText;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

constexpr int kUsers = 12;  // 2 events each (Auth and App)

class TransparencyLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pg = testing::PgFromEnv();
    auto redis = testing::RedisFromEnv();
    if (!pg || !redis) return;
    testing::MeshOptions options;
    options.prefix = "tlog";
    options.admin_args = {"--log-checkpoint-interval=100ms", "--log-sequence-interval=50ms"};
    // Rows Admin acknowledged and did not prove are published again after 2 s
    // (AnOwnerConfirmsARowOnlyOnProofThatItsEventIsInTheLog).
    options.auth_args = {"--dispatch-resend-timeout=2s"};
    options.app_args = options.auth_args;
    mesh_ = new Mesh(*pg, *redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(Service::kAdmin);
    db_ = pg::Connection::Connect(o).value().release();
    for (int i = 0; i < kUsers; ++i) {
      MutateBoth(i);
      // Several checkpoints, so the log's history has steps to compare.
      if (i % 4 == 3) WaitUntilSigned(2 * (i + 1));
    }
    WaitUntilSigned(2 * kUsers);
    dir_ = mesh_->keys().dir();
    testing::TokenSpec spec;
    spec.subject = "auditor";
    spec.roles = {"audit.reader"};
    ASSERT_TRUE(
        crypto::WriteSecretFile(dir_ + "/auditor.token", testing::SharedTestTokens().Mint(spec))
            .ok());
  }

  // An owner's cosignature/v1 verifier key: the owner's key, named as it.
  static std::string WitnessKey(const std::string& owner, const crypto::SigningKey& key) {
    return tlog::FormatVerifierKey(owner, tlog::kCosignatureV1Ed25519, key.public_key().raw());
  }

  static void TearDownTestSuite() {
    delete db_;
    delete mesh_;
  }

  void SetUp() override {
    if (mesh_ == nullptr) {
      if (testing::InCi()) FAIL() << "PostgreSQL and Redis are required in CI";
      GTEST_SKIP() << "no test PostgreSQL/Redis";
    }
  }

  static void As(grpc::ClientContext* ctx, const std::string& role) {
    testing::Authorize(ctx, "alice", {role});
  }

  static void MutateBoth(int i) {
    ASSERT_TRUE(testing::CreateUser(*mesh_, absl::StrCat("user", i)).ok());
    ASSERT_TRUE(testing::CreateProblem(*mesh_, i).ok());
  }

  static std::unique_ptr<v1::AuditLogService::Stub> Log() {
    return v1::AuditLogService::NewStub(mesh_->Channel(Service::kAdmin, 0));
  }

  static v1::SignedCheckpoint Latest() {
    grpc::ClientContext ctx;
    As(&ctx, "audit.reader");
    v1::SignedCheckpoint c;
    (void)Log()->GetCheckpoint(&ctx, v1::GetCheckpointRequest(), &c);
    return c;
  }

  // Until `rows` audit rows are in audit_logs, all of them in a checkpoint.
  static void WaitUntilSigned(int rows) {
    ASSERT_TRUE(WaitFor(
        [&] {
          const int64_t n = QueryInt(*db_, "SELECT count(*) FROM audit_logs");
          return n >= rows && Latest().tree_size() == static_cast<uint64_t>(n);
        },
        std::chrono::seconds(60)))
        << "signed " << Latest().tree_size() << " of " << rows;
  }

  // One or more statements, without parameters.
  static void Sql(const std::string& sql) {
    const absl::Status s = db_->ExecuteScript("test.sql", sql, absl::Seconds(30));
    EXPECT_TRUE(s.ok()) << sql << ": " << s;
  }
  // Tampering as the superuser, with the index-final trigger off.
  static void Tamper(const std::string& sql) {
    Sql(absl::StrCat("SET session_replication_role = replica; ", sql,
                     "; SET session_replication_role = origin"));
  }

  static std::string Verify(const std::string& args) {
    return absl::StrCat(testing::BinDir(), "/tools/verify/ulticode-verify ", args);
  }

  // Exports the log as it is now into a fresh directory.
  static std::string Export() {
    static int n = 0;
    const std::string out = absl::StrCat(dir_, "/export-", ++n);
    const auto r = testing::RunCommand(
        Verify(absl::StrCat("export --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0),
                            " --token-file=", dir_, "/auditor.token --out=", out)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }

  // --witness-addresses for both owners.
  static std::string AskTheOwners() {
    return absl::StrCat("--witness-addresses=auth=127.0.0.1:", mesh_->grpc_port(Service::kAuth, 0),
                        ",app=127.0.0.1:", mesh_->grpc_port(Service::kApp, 0),
                        " --token-file=", dir_, "/auditor.token");
  }

  static testing::CommandResult Check(const std::string& export_dir,
                                      const std::string& extra = "") {
    return testing::RunCommand(
        Verify(absl::StrCat("check --dir=", export_dir, " --log-keys-file=", dir_,
                            "/log.vkey --witness-keys-file=", mesh_->keys().WitnessKeysFile(),
                            " --owner-keys-file=", mesh_->keys().public_keys_file(), " ", extra)));
  }

  // The first break `check` reports for the log as it is now.
  static std::string FirstBreak() {
    const auto r = Check(Export());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    return r.output;
  }

  // A copy of leaf `of`'s event under the id `event_id`.
  static std::string ForgedEnvelope(int of, const std::string& event_id) {
    audit::v1::AuditEvent event;
    EXPECT_TRUE(event.ParseFromString(Envelope(of)));
    event.set_event_id(event_id);
    event.mutable_record()->set_audit_id(event_id);
    return event.SerializeAsString();
  }

  static std::string Envelope(int index) {
    std::string bytes;
    EXPECT_TRUE(absl::Base64Unescape(
        QueryText(*db_, absl::StrCat("SELECT encode(envelope, 'base64') FROM audit_logs"
                                     " WHERE ",
                                     At(index))),
        &bytes));
    return bytes;
  }

  // "event_id = <the event of leaf `index`>".
  static std::string SealOf(const crypto::SigningKey& key, const std::string& envelope) {
    return seal::SealBundle(key, {absl::string_view(envelope)}).value()[0];
  }

  static std::string At(int index) {
    return absl::StrCat("event_id = (SELECT event_id FROM log_leaves WHERE log_index = ", index,
                        ")");
  }

  // Inserts a copy of row `of` as event `event_id` with `envelope` sealed by
  // `key`, and its leaf at log index `index`.
  static void InsertForged(int of, int index, const std::string& event_id,
                           const std::string& envelope, const crypto::SigningKey& key) {
    const std::string sql = absl::StrCat(
        "INSERT INTO audit_logs SELECT (jsonb_populate_record(a, jsonb_build_object("
        "'event_id', $1::text, 'envelope', '\\x' || encode($2::bytea, 'hex'),"
        " 'seal', '\\x' || encode($3::bytea, 'hex'), 'key_id', $4::text))).*"
        " FROM audit_logs a WHERE ",
        At(of));
    Sql("SET session_replication_role = replica");
    auto r = db_->Execute(pg::Statement{"test.forge", sql.c_str(), absl::Seconds(30)},
                          {pg::Text(event_id), pg::Bytes(envelope),
                           pg::Bytes(SealOf(key, envelope)), pg::Text(key.key_id())});
    Sql("SET session_replication_role = origin");
    ASSERT_TRUE(r.ok()) << r.status();
    Sql(absl::StrCat("INSERT INTO log_leaves VALUES (", index, ", '", event_id, "')"));
  }

  // Moves every index >= from by `delta` (out of the way first: the
  // unique index holds at every row).
  static void Shift(int from, int delta) {
    Sql(absl::StrCat("UPDATE log_leaves SET log_index = log_index + 1000000 WHERE log_index >= ",
                     from, "; UPDATE log_leaves SET log_index = log_index - 1000000 + ", delta,
                     " WHERE log_index >= 1000000"));
  }

  static Mesh* mesh_;
  static pg::Connection* db_;
  static std::string dir_;
};

Mesh* TransparencyLogTest::mesh_ = nullptr;
pg::Connection* TransparencyLogTest::db_ = nullptr;
std::string TransparencyLogTest::dir_;

TEST_F(TransparencyLogTest, TheUntouchedLogVerifiesWithPublicKeysOnly) {
  // The witness policy (both owners) holds once they cosigned the latest.
  ASSERT_TRUE(WaitFor([] { return Latest().cosignatures_size() == 2; }, std::chrono::seconds(10)));
  const v1::SignedCheckpoint latest = Latest();
  const auto r = Check(Export());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("OK: ", latest.tree_size(), " leaves")));
  EXPECT_GE(QueryInt(*db_, "SELECT count(*) FROM log_checkpoints"), 3);
}

TEST_F(TransparencyLogTest, BothOwnersCosignTheLatestCheckpoint) {
  v1::SignedCheckpoint latest;
  ASSERT_TRUE(WaitFor(
      [&] {
        latest = Latest();
        return latest.cosignatures_size() == 2;
      },
      std::chrono::seconds(10)))
      << latest.DebugString() << mesh_->Output(Service::kAdmin, 0);
  auto split = tlog::SplitNoteSignatures(latest.checkpoint());
  ASSERT_TRUE(split.ok());
  const std::vector<std::pair<std::string, const crypto::SigningKey*>> owners = {
      {"app", &mesh_->keys().app()}, {"auth", &mesh_->keys().auth()}};
  for (int i = 0; i < 2; ++i) {
    auto witness = tlog::CosignatureVerifier::Parse(WitnessKey(owners[i].first, *owners[i].second));
    ASSERT_TRUE(witness.ok());
    EXPECT_TRUE(witness->Verify(split->text, latest.cosignatures(i)).ok())
        << latest.cosignatures(i);
  }
  // The owners keep what they accepted.
  for (Service s : {Service::kAuth, Service::kApp}) {
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(s);
    auto owner = pg::Connection::Connect(o).value();
    EXPECT_EQ(QueryInt(*owner, "SELECT size FROM log_witnessed"),
              static_cast<int64_t>(latest.tree_size()));
  }
  // The newest checkpoint both owners cosigned, asked for as such.
  grpc::ClientContext wctx;
  As(&wctx, "audit.reader");
  v1::GetCheckpointRequest witnessed;
  witnessed.mutable_newest_witnessed();
  v1::SignedCheckpoint w;
  ASSERT_TRUE(Log()->GetCheckpoint(&wctx, witnessed, &w).ok());
  EXPECT_EQ(w.tree_size(), latest.tree_size());
  EXPECT_EQ(w.cosignatures_size(), 2);
  const auto r = Check(Export());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("checkpoints, [1-9][0-9]* cosignatures verified"));
  // Asked directly, each owner serves the checkpoint it holds, cosigned;
  // the export is the history both hold.
  const auto asked = Check(Export(), AskTheOwners());
  EXPECT_EQ(asked.exit_code, 0) << asked.output;
  EXPECT_THAT(asked.output, HasSubstr("the export is the history 2 witnesses hold"));
  // Asking needs the token, and names an owner it cannot reach.
  const auto no_token = Check(Export(), absl::StrCat("--witness-addresses=auth=127.0.0.1:",
                                                     mesh_->grpc_port(Service::kAuth, 0)));
  EXPECT_EQ(no_token.exit_code, 2) << no_token.output;
  EXPECT_THAT(no_token.output, HasSubstr("--token-file"));
  const auto unreachable = Check(
      Export(),
      absl::StrCat("--witness-addresses=auth=127.0.0.1:1 --token-file=", dir_, "/auditor.token"));
  EXPECT_EQ(unreachable.exit_code, 2) << unreachable.output;
  EXPECT_THAT(unreachable.output, HasSubstr("witness auth at 127.0.0.1:1"));
}

TEST_F(TransparencyLogTest, ProofsFromTheRpcsVerifyAgainstTheSignedCheckpoint) {
  const v1::SignedCheckpoint latest = Latest();
  auto verifier = tlog::NoteVerifier::Parse(mesh_->keys().LogVerifierKey());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto text = tlog::OpenNote(latest.checkpoint(), {*verifier});
  ASSERT_TRUE(text.ok()) << text.status();
  auto checkpoint = tlog::ParseCheckpoint(*text);
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(checkpoint->origin, testing::TestKeys::kLogOrigin);
  EXPECT_EQ(checkpoint->size, latest.tree_size());

  // Every leaf: its entry, and its inclusion proof by index and by event id.
  const std::string event_id =
      QueryText(*db_, "SELECT event_id::text FROM log_leaves WHERE log_index = 5");
  v1::ListLogEntriesRequest lreq;
  lreq.set_page_size(1000);
  std::vector<v1::LogEntry> entries;
  for (int pages = 0; pages < 100; ++pages) {
    grpc::ClientContext lc;
    As(&lc, "audit.reader");
    v1::ListLogEntriesResponse page;
    ASSERT_TRUE(Log()->ListLogEntries(&lc, lreq, &page).ok());
    entries.insert(entries.end(), page.log_entries().begin(), page.log_entries().end());
    if (page.next_page_token().empty()) break;
    lreq.set_page_token(page.next_page_token());
  }
  ASSERT_EQ(entries.size(), checkpoint->size);
  for (const v1::LogEntry& e : entries) {
    grpc::ClientContext ctx;
    As(&ctx, "audit.reader");
    v1::GetInclusionProofRequest req;
    if (e.leaf_index() == 5) {
      req.set_event_id(event_id);
    } else {
      req.set_leaf_index(e.leaf_index());
    }
    v1::InclusionProof proof;
    ASSERT_TRUE(Log()->GetInclusionProof(&ctx, req, &proof).ok());
    EXPECT_EQ(proof.leaf_index(), e.leaf_index());
    std::vector<tlog::Hash> hashes;
    for (const std::string& h : proof.hashes()) hashes.push_back(tlog::FromBytes(h).value());
    EXPECT_TRUE(tlog::VerifyInclusion(e.leaf_index(), proof.tree_size(), tlog::LeafHash(e.leaf()),
                                      hashes, checkpoint->root)
                    .ok())
        << e.leaf_index();
    if (e.leaf_index() == 5) {
      EXPECT_EQ(tlog::DecodeLeaf(e.leaf())->event_id, event_id);
    }
  }

  // The first checkpoint is a prefix of the latest.
  grpc::ClientContext fc;
  As(&fc, "audit.reader");
  v1::ListCheckpointsResponse all;
  ASSERT_TRUE(Log()->ListCheckpoints(&fc, v1::ListCheckpointsRequest(), &all).ok());
  ASSERT_GE(all.checkpoints_size(), 3);
  auto first =
      tlog::ParseCheckpoint(tlog::OpenNote(all.checkpoints(0).checkpoint(), {*verifier}).value());
  grpc::ClientContext cc;
  As(&cc, "audit.reader");
  v1::GetConsistencyProofRequest creq;
  creq.set_first_tree_size(first->size);
  creq.set_second_tree_size(checkpoint->size);
  v1::ConsistencyProof cproof;
  ASSERT_TRUE(Log()->GetConsistencyProof(&cc, creq, &cproof).ok());
  std::vector<tlog::Hash> hashes;
  for (const std::string& h : cproof.hashes()) hashes.push_back(tlog::FromBytes(h).value());
  EXPECT_TRUE(
      tlog::VerifyConsistency(first->size, checkpoint->size, first->root, checkpoint->root, hashes)
          .ok());

  // The query API shows each row's index.
  grpc::ClientContext gc;
  As(&gc, "audit.reader");
  v1::GetAuditLogRequest get;
  get.set_event_id(event_id);
  v1::AuditLog row;
  ASSERT_TRUE(v1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0))
                  ->GetAuditLog(&gc, get, &row)
                  .ok());
  ASSERT_TRUE(row.has_log_index());
  EXPECT_EQ(row.log_index(), 5u);
}

TEST_F(TransparencyLogTest, RequestsOutsideTheSignedLogAreRefusedByName) {
  const uint64_t size = Latest().tree_size();
  auto call = [](auto fn) {
    grpc::ClientContext ctx;
    As(&ctx, "audit.reader");
    return fn(&ctx);
  };
  v1::GetInclusionProofRequest beyond;
  beyond.set_leaf_index(0);
  beyond.set_tree_size(size + 1);
  v1::InclusionProof proof;
  grpc::Status s = call([&](auto* ctx) { return Log()->GetInclusionProof(ctx, beyond, &proof); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("tree_size"));
  v1::GetInclusionProofRequest unknown;
  unknown.set_event_id("00000000-0000-7000-8000-000000000000");
  s = call([&](auto* ctx) { return Log()->GetInclusionProof(ctx, unknown, &proof); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  // A page size of 0 now means the default (AIP-158): a negative one is
  // what the list refuses by name.
  v1::ListLogEntriesRequest none;
  none.set_page_size(-1);
  v1::ListLogEntriesResponse entries;
  s = call([&](auto* ctx) { return Log()->ListLogEntries(ctx, none, &entries); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("page_size"));
  EXPECT_EQ(server::ErrorDetails::Of(s).BadField(), "page_size") << s.error_message();
  v1::GetConsistencyProofRequest backwards;
  backwards.set_first_tree_size(3);
  backwards.set_second_tree_size(2);
  v1::ConsistencyProof cproof;
  s = call([&](auto* ctx) { return Log()->GetConsistencyProof(ctx, backwards, &cproof); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Only audit.reader.
  grpc::ClientContext wrong;
  As(&wrong, "auth.admin");
  v1::SignedCheckpoint c;
  EXPECT_EQ(Log()->GetCheckpoint(&wrong, v1::GetCheckpointRequest(), &c).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(TransparencyLogTest, InclusionCommandProvesOneEvent) {
  const std::string event_id =
      QueryText(*db_, "SELECT event_id::text FROM log_leaves WHERE log_index = 7");
  const auto r = testing::RunCommand(Verify(absl::StrCat(
      "inclusion --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0), " --token-file=", dir_,
      "/auditor.token --log-keys-file=", dir_, "/log.vkey --event-id=", event_id)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("is leaf 7 of the tree of size ")));
}

TEST_F(TransparencyLogTest, AnExportOfARangeNeedsAStartThatIsAMultipleOf256) {
  const auto r = testing::RunCommand(Verify(absl::StrCat(
      "export --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0), " --token-file=", dir_,
      "/auditor.token --start=100 --out=", dir_, "/export-range")));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("start: 100 is not a multiple of 256 within the tree"));
}

// ulticode-tail --verify prints a row only once it is proved in a
// witnessed checkpoint. A row rewritten so that Admin's own checks pass (a
// re-signed envelope, its columns and its stored leaf hash changed
// together) is not in any checkpoint the witnesses signed: the tail prints
// the rows before it, names it, and exits 1.
TEST_F(TransparencyLogTest, TheVerifyingTailPrintsOnlyProvedRowsAndStopsAtABreak) {
  ASSERT_TRUE(WaitFor([] { return Latest().cosignatures_size() == 2; }, std::chrono::seconds(10)));
  const uint64_t size = Latest().tree_size();
  auto tail = [&](uint64_t rows) {
    return testing::RunCommand(absl::StrCat(
        testing::BinDir(),
        "/tools/tail/ulticode-tail --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0),
        " --token-file=", dir_, "/auditor.token --from-beginning --verify --log-keys-file=", dir_,
        "/log.vkey --witness-keys-file=", mesh_->keys().WitnessKeysFile(), " --owner-keys-file=",
        mesh_->keys().public_keys_file(), " --max-rows=", rows, " --idle-timeout=20s"));
  };
  auto r = tail(size);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (uint64_t i = 0; i < size; ++i) {
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("\"log_index\":\"", i, "\""))) << i;
  }

  const std::string owner =
      QueryText(*db_, absl::StrCat("SELECT owner FROM audit_logs WHERE ", At(4)));
  const std::string id =
      QueryText(*db_, "SELECT event_id::text FROM log_leaves WHERE log_index = 4");
  const std::string original = Envelope(4);
  audit::v1::AuditEvent event;
  ASSERT_TRUE(event.ParseFromString(original));
  event.mutable_record()->set_actor("mallory");
  const std::string forged = event.SerializeAsString();
  const crypto::SigningKey& key = mesh_->keys().owner(owner);
  const std::string sealed = seal::SealBundle(key, {absl::string_view(forged)}).value()[0];
  const tlog::Hash leaf =
      tlog::LeafHash(tlog::EncodeLeaf({owner, id, key.key_id(), sealed, forged}));
  Sql("CREATE TEMP TABLE saved AS SELECT * FROM audit_logs WHERE " + At(4) +
      "; CREATE TEMP TABLE saved_node AS SELECT * FROM log_nodes WHERE level = 0 AND idx = 4");
  auto set = db_->Execute(
      pg::Statement{"test.forge",
                    "WITH a AS (UPDATE audit_logs SET envelope = $1, seal = $2,"
                    " actor = 'mallory' WHERE event_id = $3::uuid)"
                    " UPDATE log_nodes SET hash = $4 WHERE level = 0 AND idx = 4"},
      {pg::Bytes(forged), pg::Bytes(sealed), pg::Text(id), pg::Bytes(tlog::ToBytes(leaf))});
  ASSERT_TRUE(set.ok()) << set.status();
  r = tail(size);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("BREAK: audit log ", id, " (log index 4)")));
  EXPECT_THAT(r.output, HasSubstr("\"log_index\":\"3\""));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("\"log_index\":\"4\"")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("mallory")));

  Tamper("DELETE FROM audit_logs WHERE " + At(4) +
         "; INSERT INTO audit_logs SELECT * FROM saved; DROP TABLE saved;"
         " UPDATE log_nodes n SET hash = s.hash FROM saved_node s"
         " WHERE n.level = 0 AND n.idx = 4; DROP TABLE saved_node");
  EXPECT_EQ(tail(size).exit_code, 0);
}

TEST_F(TransparencyLogTest, AChangedEnvelopeIsReportedModified) {
  const std::string original = Envelope(9);
  Tamper(absl::StrCat(
      "UPDATE audit_logs SET envelope = overlay(envelope placing '\\x58'::bytea from 12) WHERE ",
      At(9)));
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 9: modified"));
  const std::string restore = absl::StrCat("UPDATE audit_logs SET envelope = $1 WHERE ", At(9));
  auto r = db_->Execute(pg::Statement{"test.restore", restore.c_str()}, {pg::Bytes(original)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, ADeletedRowIsReportedDeleted) {
  const std::string id =
      QueryText(*db_, "SELECT event_id::text FROM log_leaves WHERE log_index = 4");
  Sql(absl::StrCat("CREATE TEMP TABLE saved AS SELECT * FROM audit_logs WHERE ", At(4)));
  Tamper(absl::StrCat("DELETE FROM audit_logs WHERE ", At(4)));
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 4: deleted"));
  // Its leaf gone too, the rest renumbered to close the gap.
  Sql("DELETE FROM log_leaves WHERE log_index = 4");
  Shift(5, -1);
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 4: deleted"));
  Shift(4, 1);
  Sql(absl::StrCat("INSERT INTO log_leaves VALUES (4, '", id, "')"));
  Tamper("INSERT INTO audit_logs SELECT * FROM saved; DROP TABLE saved");
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, AnInsertedRowIsReportedInserted) {
  const std::string id = "018f0000-0000-7000-8000-0000000000aa";
  const std::string envelope = ForgedEnvelope(2, id);
  Shift(3, 1);
  const std::string owner =
      QueryText(*db_, absl::StrCat("SELECT owner FROM audit_logs WHERE ", At(2)));
  InsertForged(2, 3, id, envelope, mesh_->keys().owner(owner));
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 3: inserted"));
  Tamper(absl::StrCat("DELETE FROM audit_logs WHERE event_id = '", id,
                      "'; DELETE FROM log_leaves WHERE event_id = '", id, "'"));
  Shift(4, -1);
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, SwappedRowsAreReportedReordered) {
  auto swap = [] {
    Sql("UPDATE log_leaves SET log_index = 1000000 WHERE log_index = 6;"
        " UPDATE log_leaves SET log_index = 6 WHERE log_index = 10;"
        " UPDATE log_leaves SET log_index = 10 WHERE log_index = 1000000");
  };
  swap();
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 6: reordered"));
  swap();
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, ARewrittenTreeHashIsReported) {
  const std::string saved =
      QueryText(*db_, "SELECT encode(hash, 'hex') FROM log_nodes WHERE level = 0 AND idx = 8");
  Sql("UPDATE log_nodes SET hash = sha256('x') WHERE level = 0 AND idx = 8");
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 8: modified"));
  Sql(absl::StrCat("UPDATE log_nodes SET hash = decode('", saved,
                   "', 'hex') WHERE level = 0 AND idx = 8"));
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, AnEditedCheckpointIsABadSignature) {
  const int64_t size = QueryInt(*db_, "SELECT min(size) FROM log_checkpoints");
  const std::string note =
      QueryText(*db_, absl::StrCat("SELECT note FROM log_checkpoints WHERE size = ", size));
  // Another root under the log's signature.
  Sql(absl::StrCat(
      "UPDATE log_checkpoints SET note = regexp_replace(note,"
      " E'\\n[A-Za-z0-9+/]{43}=\\n', E'\\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\\n')"
      " WHERE size = ",
      size));
  ASSERT_NE(QueryText(*db_, absl::StrCat("SELECT note FROM log_checkpoints WHERE size = ", size)),
            note);
  EXPECT_THAT(FirstBreak(),
              HasSubstr(absl::StrCat("FIRST BREAK at index ", size, ": bad signature")));
  auto r = db_->Execute(
      pg::Statement{"test.restore", "UPDATE log_checkpoints SET note = $1 WHERE size = $2"},
      {pg::Text(note), pg::Int(size)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

TEST_F(TransparencyLogTest, ALeafSignedByAKeyNotInTheDirectoryIsAnUnknownKey) {
  const std::string saved = QueryText(
      *db_,
      absl::StrCat("SELECT key_id || ':' || encode(seal, 'hex') FROM audit_logs WHERE ", At(11)));
  const crypto::SigningKey stranger = crypto::SigningKey::Generate().value();
  const std::string resign =
      absl::StrCat("UPDATE audit_logs SET key_id = $1, seal = $2 WHERE ", At(11));
  auto r = db_->Execute(pg::Statement{"test.resign_leaf", resign.c_str()},
                        {pg::Text(stranger.key_id()), pg::Bytes(SealOf(stranger, Envelope(11)))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(FirstBreak(), HasSubstr("FIRST BREAK at index 11: unknown key"));
  Sql(absl::StrCat("UPDATE audit_logs SET key_id = split_part('", saved,
                   "', ':', 1), seal = decode(split_part('", saved, "', ':', 2), 'hex') WHERE ",
                   At(11)));
  EXPECT_EQ(Check(Export()).exit_code, 0);
}

// An owner confirms a row only on proof that its event is in the log. While
// the sequencer cannot run (the test holds its lock), Admin takes the event
// and acknowledges it but never logs it: the row stays unconfirmed and,
// acknowledged and unproved for the resend timeout, is published again,
// which asks Admin for its proof again; once the log moves on, the proof
// comes and the row is confirmed.
TEST_F(TransparencyLogTest, AnOwnerConfirmsARowOnlyOnProofThatItsEventIsInTheLog) {
  pg::ConnectOptions o;
  o.conninfo = mesh_->Dsn(Service::kAdmin);
  auto holder = pg::Connection::Connect(o).value();
  ASSERT_TRUE(holder
                  ->ExecuteScript("test.hold_sequencer",
                                  "SELECT pg_advisory_lock(hashtextextended("
                                  "'ulticode.log.sequencer', 0))",
                                  absl::Seconds(10))
                  .ok());
  o.conninfo = mesh_->Dsn(Service::kAuth);
  auto auth_db = pg::Connection::Connect(o).value();
  auto created = testing::CreateUser(*mesh_, "unlogged");
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = *created;
  const std::string state =
      absl::StrCat("SELECT state FROM audit_outbox WHERE event_id = '", id, "'");
  // In Admin's inbox and audit_logs, acknowledged, published again (a
  // re-delivery asks for the proof again): still not confirmed.
  ASSERT_TRUE(WaitFor(
      [&] {
        return QueryInt(*db_, absl::StrCat("SELECT count(*) FROM log_proof_requests WHERE"
                                           " event_id = '",
                                           id, "'")) == 1;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(
      QueryInt(*db_, absl::StrCat("SELECT count(*) FROM audit_logs WHERE event_id = '", id, "'")),
      1);
  EXPECT_EQ(
      QueryInt(*db_, absl::StrCat("SELECT count(*) FROM log_leaves WHERE event_id = '", id, "'")),
      0);
  EXPECT_NE(QueryText(*auth_db, state), "CONFIRMED");
  EXPECT_GE(QueryInt(*auth_db,
                     absl::StrCat("SELECT resends FROM audit_outbox WHERE event_id = '", id, "'")),
            1);
  // The log moves on: the proof comes, the row is confirmed.
  holder.reset();
  EXPECT_TRUE(
      WaitFor([&] { return QueryText(*auth_db, state) == "CONFIRMED"; }, std::chrono::seconds(20)));
  WaitUntilSigned(0);
}

// Last: not undone. Whoever holds Admin's database and its log key can make
// a shorter history that is consistent in itself; a checkpoint held from
// before (the auditor's, an owner's) is what exposes it.
TEST_F(TransparencyLogTest, ZTruncationResignedWithTheLogKeyIsCaughtByAHeldCheckpoint) {
  const v1::SignedCheckpoint held = Latest();
  std::ofstream(dir_ + "/held.checkpoint") << held.checkpoint();
  const int64_t keep = static_cast<int64_t>(held.tree_size()) - 5;
  // The root of the first `keep` leaves, as the attacker computes it.
  v1::ListLogEntriesRequest lreq;
  std::vector<tlog::Hash> leaves;
  for (int pages = 0; pages < 100 && static_cast<int64_t>(leaves.size()) < keep; ++pages) {
    grpc::ClientContext lc;
    As(&lc, "audit.reader");
    lreq.set_page_size(
        static_cast<int>(std::min<int64_t>(1000, keep - static_cast<int64_t>(leaves.size()))));
    v1::ListLogEntriesResponse entries;
    ASSERT_TRUE(Log()->ListLogEntries(&lc, lreq, &entries).ok());
    for (const v1::LogEntry& e : entries.log_entries()) leaves.push_back(tlog::LeafHash(e.leaf()));
    if (entries.next_page_token().empty()) break;
    lreq.set_page_token(entries.next_page_token());
  }
  ASSERT_EQ(static_cast<int64_t>(leaves.size()), keep);
  const tlog::Checkpoint shorter{
      testing::TestKeys::kLogOrigin, static_cast<uint64_t>(keep), tlog::RootOf(leaves), {}};
  auto signer = tlog::NoteSigner::Create(testing::TestKeys::kLogOrigin, mesh_->keys().log());
  const std::string note = signer->Sign(tlog::CheckpointText(shorter)).value();
  Tamper(
      absl::StrCat("DELETE FROM audit_logs WHERE event_id IN (SELECT event_id FROM log_leaves"
                   " WHERE log_index >= ",
                   keep, "); DELETE FROM log_leaves WHERE log_index >= ", keep,
                   "; DELETE FROM log_nodes WHERE (idx + 1) * (1::bigint << level) > ", keep,
                   "; DELETE FROM log_checkpoints WHERE size >= ", keep));
  auto r = db_->Execute(pg::Statement{"test.resign",
                                      "INSERT INTO log_checkpoints (size, root, note)"
                                      " VALUES ($1, $2, $3)"},
                        {pg::Int(keep), pg::Bytes(tlog::ToBytes(shorter.root)), pg::Text(note)});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string exported = Export();
  // Consistent in itself; whether its witnesses signed it depends on
  // whether they ever cosigned a checkpoint of exactly this size.
  const auto alone = Check(exported);
  EXPECT_NE(alone.exit_code, 1) << alone.output;
  const auto caught = Check(exported, "--trusted-checkpoint=" + dir_ + "/held.checkpoint");
  EXPECT_EQ(caught.exit_code, 1) << caught.output;
  EXPECT_THAT(caught.output, HasSubstr("truncated"));
  // Without a checkpoint of their own, auditors ask the witnesses: each
  // owner holds a later checkpoint than the log now shows.
  const auto asked = Check(exported, AskTheOwners());
  EXPECT_EQ(asked.exit_code, 1) << asked.output;
  EXPECT_THAT(asked.output, HasSubstr("truncated"));
  EXPECT_THAT(asked.output, HasSubstr("witness "));
  const auto inclusion = testing::RunCommand(Verify(
      absl::StrCat("inclusion --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0),
                   " --token-file=", dir_, "/auditor.token --log-keys-file=", dir_,
                   "/log.vkey --trusted-checkpoint=", dir_, "/held.checkpoint --event-id=",
                   QueryText(*db_, "SELECT event_id::text FROM log_leaves WHERE log_index = 0"))));
  EXPECT_EQ(inclusion.exit_code, 1) << inclusion.output;
  EXPECT_THAT(inclusion.output, HasSubstr("rolled back"));

  // Live: shown the shorter history (the attacker also forgets what they
  // cosigned), each owner refuses it as a rollback and counts it.
  Sql("UPDATE log_witnesses SET cosigned_size = 0, proved_size = 0, proving_size = 0");
  for (Service s : {Service::kAuth, Service::kApp}) {
    EXPECT_TRUE(WaitFor(
        [&] {
          return testing::RunCommand(
                     absl::StrCat("curl -s http://127.0.0.1:", mesh_->metrics_port(s, 0),
                                  "/metrics | grep -E "
                                  "'^ulticode_log_witness_checkpoints_total.*rollback.* [1-9]'"))
                     .exit_code == 0;
        },
        std::chrono::seconds(15)))
        << mesh_->Output(s, 0);
  }
}

}  // namespace
}  // namespace ulticode
