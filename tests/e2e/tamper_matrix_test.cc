// The tamper matrix (docs/guarantees.md, "What an insider can change"): a
// real mesh writes a few hundred events, then a seeded generator applies
// insider changes to what an auditor reads, one per round, across every
// table that feeds it (audit_logs, the log's leaves, nodes, checkpoints,
// cosignatures, queue and witness state), as Admin's database superuser or
// as its runtime role, with or without the log's signing key, with the
// witness feed running or held off. After each change it asks every
// detector:
//   refused    the database refused the change;
//   read       QueryAuditLogs (every page), GetAuditLog of the row and a
//              WatchAuditLogs from the start end in DATA_LOSS;
//   proofs     a client checking every row of QueryAuditLogs in the PROVEN view
//              (its leaf and owner seal, its proof, the checkpoint's
//              witness policy) finds one that does not hold;
//   verify     ulticode-verify check with the witness policy and both
//              owners' own views exits 1 (a break) or 3 (unwitnessed);
//   witnesses  an owner refuses a checkpoint (fork, rollback, bad
//              signature) within kDetectWithin (Admin resends its
//              checkpoint to a witness every 500 ms here);
//   complete   Admin shows rows without a leaf, or queues them again.
// Every change must be caught by at least one, except those that change
// nothing an auditor reads (then verify must still pass). The database is
// then put back as it was (Admin's log tables and the owners' witness
// state) before the next round. The matrix is printed at the end.
//
// The first pass applies every change class as the superuser, the second
// as the runtime role (so each class meets both roles' privileges); further
// passes draw the role. The key, the feed and the target are drawn in every
// round. ULTICODE_TAMPER_SEED picks another seed (printed first);
// ULTICODE_TAMPER_PASSES how many times each change class runs (default 2).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/pg/params.h"
#include "common/seal/seal.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/tokens.h"
#include "tools/verify/served_row.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode {
namespace {

namespace v1 = admin::v1;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::QueryText;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

constexpr int kUsers = 120;  // 2 events each (Auth and App)
constexpr uint64_t kDefaultSeed = 32032;
// Admin sends its latest checkpoint again to a witness that has not cosigned
// it this often (--log-witness-resend); completeness looks every second for
// rows a second without a leaf. A witness's refusal and the completeness
// count come within a few of those; nothing else ends a round's wait early.
constexpr char kWitnessResend[] = "--log-witness-resend=500ms";
constexpr auto kDetectWithin = std::chrono::seconds(5);
// Each poll of the detectors scrapes three /metrics pages.
constexpr auto kMetricsPoll = std::chrono::milliseconds(100);

// Admin's tables that feed what an auditor reads, kept as they were.
const char* const kAdminTables[] = {"audit_logs",      "log_leaves",        "log_nodes",
                                    "log_checkpoints", "log_cosignatures",  "log_queue",
                                    "log_witnesses",   "log_proof_requests"};

const char* const kDetectors[] = {"refused", "read", "proofs", "verify", "witnesses", "complete"};

// One round's circumstances.
struct Round {
  bool runtime = false;  // as Admin's runtime role, else as the superuser
  bool key = false;      // holding the log's signing key
  bool feed = true;      // the witness feed runs
  uint64_t target = 0;   // a leaf index the change aims at
  std::mt19937_64* rng = nullptr;
};

// What a change did: refused by the database, or applied; `event` the
// audit row it aimed at, if any; `harmless` when it changes nothing an
// auditor reads (only then may nothing detect it).
struct Applied {
  bool refused = false;
  std::string event;
  bool harmless = false;
  std::string what;
};

class TamperMatrixTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pg = testing::PgFromEnv();
    auto redis = testing::RedisFromEnv();
    if (!pg || !redis) return;
    testing::MeshOptions options;
    options.prefix = "tamper";
    options.admin_args = {"--log-checkpoint-interval=100ms", "--log-sequence-interval=50ms",
                          "--log-completeness-interval=1s", "--log-unlogged-after=1s",
                          kWitnessResend};
    mesh_ = new Mesh(*pg, *redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      pg::ConnectOptions o;
      o.conninfo = mesh_->Dsn(s);
      db_[s] = pg::Connection::Connect(o).value().release();
    }
    for (int i = 0; i < kUsers; ++i) {
      ASSERT_TRUE(testing::CreateUser(*mesh_, absl::StrCat("user", i)).ok());
      ASSERT_TRUE(testing::CreateProblem(*mesh_, i).ok());
    }
    dir_ = mesh_->keys().dir();
    std::ofstream(dir_ + "/witnesses.vkey") << WitnessKey("auth", mesh_->keys().auth()) << "\n"
                                            << WitnessKey("app", mesh_->keys().app()) << "\n";
    testing::TokenSpec spec;
    spec.subject = "auditor";
    spec.roles = {"audit.reader"};
    ASSERT_TRUE(
        crypto::WriteSecretFile(dir_ + "/auditor.token", testing::SharedTestTokens().Mint(spec))
            .ok());
    ASSERT_TRUE(WaitFor(
        [] {
          return QueryInt(Admin(), "SELECT count(*) FROM log_leaves") == 2 * kUsers &&
                 Latest().tree_size() == 2 * kUsers && Latest().cosignatures_size() == 2;
        },
        std::chrono::seconds(60)))
        << "the log did not reach " << 2 * kUsers << " witnessed leaves";
    // What every round is put back to.
    std::string keep = "DROP SCHEMA IF EXISTS kept CASCADE; CREATE SCHEMA kept;";
    for (const char* t : kAdminTables)
      absl::StrAppend(&keep, "CREATE TABLE kept.", t, " AS TABLE ", t, ";");
    ASSERT_TRUE(Admin().ExecuteScript("kept", keep, absl::Seconds(30)).ok());
    for (Service s : {Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(db_[s]
                      ->ExecuteScript("kept",
                                      "DROP TABLE IF EXISTS kept_witnessed;"
                                      " CREATE TABLE kept_witnessed AS TABLE log_witnessed",
                                      absl::Seconds(30))
                      .ok());
    }
  }

  static void TearDownTestSuite() {
    for (auto& [s, c] : db_) delete c;
    db_.clear();
    delete mesh_;
  }

  void SetUp() override {
    if (mesh_ == nullptr) {
      if (testing::InCi()) FAIL() << "PostgreSQL and Redis are required in CI";
      GTEST_SKIP() << "no test PostgreSQL/Redis";
    }
  }

  static std::string WitnessKey(const std::string& owner, const crypto::SigningKey& key) {
    return tlog::FormatVerifierKey(owner, tlog::kCosignatureV1Ed25519, key.public_key().raw());
  }

  static pg::Connection& Admin() { return *db_[Service::kAdmin]; }

  static v1::SignedCheckpoint Latest() {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "auditor", {"audit.reader"});
    v1::SignedCheckpoint c;
    (void)v1::AuditLogService::NewStub(mesh_->Channel(Service::kAdmin, 0))
        ->GetCheckpoint(&ctx, v1::GetCheckpointRequest(), &c);
    return c;
  }

  // A connection to Admin's database as its runtime role.
  static std::unique_ptr<pg::Connection> Runtime() {
    pg::ConnectOptions o;
    const std::string dsn = mesh_->Dsn(Service::kAdmin);
    o.conninfo = dsn.substr(0, dsn.find(" user=")) + dsn.substr(dsn.find(" dbname="));
    o.user = mesh_->RuntimeRole(Service::kAdmin);
    o.password = mesh_->RuntimePassword(Service::kAdmin);
    return pg::Connection::Connect(o).value();
  }

  // Runs `sql` (statements) as the round's role; false when the database
  // refused it. The superuser's statements run with triggers off where
  // `triggers_off` (what an insider who owns the database can do).
  static bool Run(const Round& r, const std::string& sql, bool triggers_off = true) {
    if (r.runtime) {
      const absl::Status s = Runtime()->ExecuteScript("tamper", sql, absl::Seconds(30));
      // Refused for want of a privilege (42501) or by a constraint (23514),
      // never by a broken statement.
      const std::string message(s.message());
      EXPECT_TRUE(s.ok() || absl::StrContains(message, "42501") ||
                  absl::StrContains(message, "23514"))
          << sql << ": " << s;
      return s.ok();
    }
    const std::string script = triggers_off
                                   ? absl::StrCat("SET session_replication_role = replica; ", sql,
                                                  "; SET session_replication_role = origin")
                                   : sql;
    const absl::Status s = Admin().ExecuteScript("tamper", script, absl::Seconds(30));
    EXPECT_TRUE(s.ok()) << sql << ": " << s;
    return s.ok();
  }

  // The event of leaf `index` as it was kept (a literal: the runtime role
  // cannot read the kept copy).
  static std::string At(uint64_t index) {
    return absl::StrCat("event_id = '", EventAt(index), "'");
  }
  static std::string EventAt(uint64_t index) {
    return QueryText(Admin(), absl::StrCat("SELECT event_id::text FROM kept.log_leaves"
                                           " WHERE log_index = ",
                                           index));
  }
  static uint64_t Size() { return 2 * kUsers; }

  // The log's key signs a checkpoint of the first `size` leaves as they are
  // stored now, and it becomes the newest (what an insider holding the key
  // does after rewriting the tree).
  static void Resign(uint64_t size) {
    std::vector<tlog::Hash> leaves;
    const std::string hex =
        QueryText(Admin(), absl::StrCat("SELECT string_agg(encode(hash, 'hex'), ',' ORDER BY idx)"
                                        " FROM log_nodes WHERE level = 0 AND idx < ",
                                        size));
    for (absl::string_view h : absl::StrSplit(hex, ',')) {
      leaves.push_back(*tlog::FromBytes(absl::HexStringToBytes(h)));
    }
    const tlog::Checkpoint c{testing::TestKeys::kLogOrigin, size, tlog::RootOf(leaves), {}};
    auto signer = tlog::NoteSigner::Create(testing::TestKeys::kLogOrigin, mesh_->keys().log());
    const std::string note = signer->Sign(tlog::CheckpointText(c)).value();
    auto r = Admin().Execute(
        pg::Statement{
            "tamper.resign",
            "INSERT INTO log_checkpoints (size, root, note) VALUES ($1, $2, $3)"
            " ON CONFLICT (size) DO UPDATE SET root = EXCLUDED.root, note = EXCLUDED.note"},
        {pg::Int(static_cast<int64_t>(size)), pg::Bytes(tlog::ToBytes(c.root)), pg::Text(note)});
    EXPECT_TRUE(r.ok()) << r.status();
  }

  // --- the change classes ---------------------------------------------------

  using Change = std::function<Applied(const Round&)>;

  static std::vector<std::pair<std::string, Change>> Changes() {
    return {
        {"audit_logs: a column", ColumnChange},
        {"audit_logs: the envelope", EnvelopeChange},
        {"audit_logs: a row deleted", RowDeleted},
        {"audit_logs: a made-up row", MadeUpRow},
        {"log_leaves: two swapped", LeavesSwapped},
        {"log_leaves: the tail cut", TailCut},
        {"log_nodes: a hash", NodeChanged},
        {"log_checkpoints: a note edited", NoteEdited},
        {"log_checkpoints: the newest deleted", NewestCheckpointDeleted},
        {"log_checkpoints: a fork signed", ForkSigned},
        {"log_cosignatures: deleted", CosignaturesDeleted},
        {"log_cosignatures: a line edited", CosignatureEdited},
        {"log_queue: an entry deleted", QueueEntryDeleted},
        {"history rewritten by the sequencer", RewrittenBySequencer},
        {"log_witnesses: reset", WitnessStateReset},
    };
  }

  static Applied ColumnChange(const Round& r) {
    const std::pair<const char*, const char*> columns[] = {
        {"actor", "'mallory'"},
        {"action", "'delete_user'"},
        {"entity_id", "'someone-else'"},
        {"owner", "CASE owner WHEN 'auth' THEN 'app' ELSE 'auth' END"},
        {"subject", "'nobody'"},
        {"client_ip", "'10.66.6.6'"},
        {"occurred_at", "occurred_at - interval '1 day'"},
        {"new_value", "'{\"role\": \"admin\"}'::jsonb"}};
    const auto& [column, value] = columns[(*r.rng)() % std::size(columns)];
    Applied a{.event = EventAt(r.target), .what = column};
    a.refused = !Run(
        r, absl::StrCat("UPDATE audit_logs SET ", column, " = ", value, " WHERE ", At(r.target)));
    return a;
  }

  static Applied EnvelopeChange(const Round& r) {
    Applied a{.event = EventAt(r.target)};
    a.refused = !Run(r, absl::StrCat("UPDATE audit_logs SET envelope = overlay(envelope placing"
                                     " '\\x58'::bytea from 12) WHERE ",
                                     At(r.target)));
    return a;
  }

  static Applied RowDeleted(const Round& r) {
    Applied a{.event = EventAt(r.target)};
    a.refused = !Run(r, absl::StrCat("DELETE FROM audit_logs WHERE ", At(r.target)));
    return a;
  }

  // A row no owner sent: a new event whose fields agree with its envelope,
  // with a well-formed seal of made-up signature bytes under a real key id
  // of its owner. It enters the queue (triggers on) and the sequencer logs
  // it; only a check of the owner's seal tells it from a real one.
  static Applied MadeUpRow(const Round& r) {
    audit::v1::AuditEvent event;
    EXPECT_TRUE(event.ParseFromString(absl::HexStringToBytes(QueryText(
        Admin(),
        absl::StrCat("SELECT encode(envelope, 'hex') FROM audit_logs WHERE ", At(r.target))))));
    const std::string id = "01a00000-0000-7000-8000-00000000bad1";
    event.set_event_id(id);
    event.mutable_record()->set_audit_id(id);
    event.mutable_record()->set_actor("mallory");
    const std::string envelope = event.SerializeAsString();
    Applied a{.event = id, .what = "sealed with made-up bytes"};
    const std::string made_up = seal::Encode({0, 1, {}, std::string(64, 's')});
    a.refused = !Run(r, CopyRow(r.target, id, envelope, made_up, "'mallory'"),
                     /*triggers_off=*/false);
    return a;
  }

  // An INSERT of leaf `of`'s row as event `id` with `envelope`, `sealed`
  // (under the row's key id) and the actor `actor` (SQL).
  static std::string CopyRow(uint64_t of, const std::string& id, const std::string& envelope,
                             const std::string& sealed, const std::string& actor = "actor") {
    return absl::StrCat(
        "INSERT INTO audit_logs (event_id, owner, event_type, actor, subject, action,"
        " entity_type, entity_id, old_value, new_value, client_ip, user_agent, request_id,"
        " trace_id, occurred_at, envelope, seal, key_id) SELECT '",
        id, "', owner, event_type, ", actor,
        ", subject, action, entity_type, entity_id, old_value, new_value, client_ip, user_agent,"
        " request_id, trace_id, occurred_at, '\\x",
        absl::BytesToHexString(envelope), "', '\\x", absl::BytesToHexString(sealed),
        "', key_id FROM audit_logs WHERE ", At(of));
  }

  static Applied LeavesSwapped(const Round& r) {
    const uint64_t i = std::min(r.target, Size() - 2);
    Applied a{.event = EventAt(i)};
    a.refused = !Run(
        r,
        absl::StrCat("UPDATE log_leaves SET log_index = 1000000 WHERE log_index = ", i,
                     "; UPDATE log_leaves SET log_index = ", i, " WHERE log_index = ", i + 1,
                     "; UPDATE log_leaves SET log_index = ", i + 1, " WHERE log_index = 1000000"));
    return a;
  }

  // Leaves from the target on removed with their rows, nodes and
  // checkpoints; with the key, a checkpoint of the shorter tree signed.
  static Applied TailCut(const Round& r) {
    const uint64_t keep = std::max<uint64_t>(r.target, 1);
    Applied a{.event = EventAt(keep), .what = r.key ? "re-signed" : "not re-signed"};
    a.refused = !Run(
        r, absl::StrCat(
               "DELETE FROM audit_logs WHERE event_id IN (SELECT event_id FROM"
               " log_leaves WHERE log_index >= ",
               keep, "); DELETE FROM log_leaves WHERE log_index >= ", keep,
               "; DELETE FROM log_nodes WHERE (idx + 1) * (1::bigint << level) > ", keep,
               (r.key ? absl::StrCat("; DELETE FROM log_checkpoints WHERE size >= ", keep) : "")));
    if (!a.refused && r.key) Resign(keep);
    return a;
  }

  static Applied NodeChanged(const Round& r) {
    const int level = static_cast<int>((*r.rng)() % 4);
    const uint64_t idx = std::min(r.target >> level, (Size() >> level) - 1);
    Applied a{.what = absl::StrCat("level ", level)};
    if (level == 0) a.event = EventAt(idx);
    a.refused =
        !Run(r, absl::StrCat("UPDATE log_nodes SET hash = sha256(hash) WHERE level = ", level,
                             " AND idx = ", idx));
    return a;
  }

  static Applied NoteEdited(const Round& r) {
    Applied a;
    a.refused = !Run(r,
                     "UPDATE log_checkpoints SET note = regexp_replace(note, E'\\n[0-9]+\\n',"
                     " E'\\n' || (size + 1) || E'\\n') WHERE size = (SELECT max(size) FROM"
                     " log_checkpoints)");
    return a;
  }

  // Harmless: the sequencer signs the same checkpoint again at once (the
  // same tree, and Ed25519 signatures are deterministic), and its kept
  // cosignatures still verify.
  static Applied NewestCheckpointDeleted(const Round& r) {
    Applied a{.harmless = true};
    a.refused = !Run(r,
                     "DELETE FROM log_checkpoints WHERE size = (SELECT max(size) FROM"
                     " log_checkpoints)");
    return a;
  }

  // The newest checkpoint replaced by one of the same size over another
  // history: the target leaf's stored hash changed first. Without the key
  // the insider can only keep the old note.
  static Applied ForkSigned(const Round& r) {
    Applied a{.event = EventAt(r.target), .what = r.key ? "re-signed" : "not re-signed"};
    a.refused = !Run(r, absl::StrCat("UPDATE log_nodes SET hash = sha256(hash) WHERE level = 0"
                                     " AND idx = ",
                                     r.target));
    if (!a.refused && r.key) Resign(Size());
    return a;
  }

  // With the witness feed running this heals itself: the owners cosign the
  // latest checkpoint again within a resend interval. Held off, the log is
  // unwitnessed from the first checkpoint that lost them.
  static Applied CosignaturesDeleted(const Round& r) {
    Applied a{.harmless = r.feed};
    a.refused = !Run(r,
                     "DELETE FROM log_cosignatures WHERE size >= (SELECT min(size) FROM"
                     " log_cosignatures WHERE size > 1)");
    return a;
  }

  static Applied CosignatureEdited(const Round& r) {
    Applied a;
    a.refused = !Run(r,
                     "UPDATE log_cosignatures SET line = overlay(line placing"
                     " CASE WHEN substr(line, length(line) - 3, 1) = 'A' THEN 'B' ELSE 'A' END"
                     " from length(line) - 3) WHERE size = (SELECT max(size) FROM"
                     " log_cosignatures)");
    return a;
  }

  // A row the owner did send (signed with its key) whose queue entry is
  // removed in the transaction that wrote it: it never reaches the sequencer
  // by the queue.
  static Applied QueueEntryDeleted(const Round& r) {
    audit::v1::AuditEvent event;
    EXPECT_TRUE(event.ParseFromString(absl::HexStringToBytes(QueryText(
        Admin(),
        absl::StrCat("SELECT encode(envelope, 'hex') FROM audit_logs WHERE ", At(r.target))))));
    const std::string id = "01a00000-0000-7000-8000-00000000f00d";
    event.set_event_id(id);
    event.mutable_record()->set_audit_id(id);
    const std::string envelope = event.SerializeAsString();
    const std::string owner = audit::v1::Owner_Name(event.owner()) == "OWNER_APP" ? "app" : "auth";
    const crypto::SigningKey& key = mesh_->keys().owner(owner);
    Applied a{.event = id};
    const std::string insert =
        CopyRow(r.target, id, envelope, (*seal::SealBundle(key, {absl::string_view(envelope)}))[0]);
    a.refused = !Run(r,
                     absl::StrCat("BEGIN; ", insert, "; DELETE FROM log_queue WHERE event_id = '",
                                  id, "'; COMMIT"),
                     /*triggers_off=*/false);
    if (a.refused) (void)Admin().ExecuteScript("tamper", "ROLLBACK", absl::Seconds(5));
    return a;
  }

  // The insider of the issue, without the log's key: the witness feed held
  // off, one event deleted, the events after it queued again in another
  // order, the tree cut back, and the running sequencer left to sign the
  // result.
  static Applied RewrittenBySequencer(const Round& r) {
    const uint64_t cut = std::max<uint64_t>(r.target, 1);
    Applied a{.event = EventAt(cut)};
    a.refused =
        !Run(r, absl::StrCat("DELETE FROM audit_logs WHERE ", At(cut),
                             "; INSERT INTO log_queue (event_id) SELECT event_id FROM log_leaves"
                             " WHERE log_index > ",
                             cut, " ORDER BY log_index DESC",
                             "; DELETE FROM log_leaves WHERE log_index >= ", cut,
                             "; DELETE FROM log_nodes WHERE (idx + 1) * (1::bigint << level) > ",
                             cut, "; DELETE FROM log_checkpoints WHERE size > ", cut));
    if (!a.refused) {
      EXPECT_TRUE(
          WaitFor([] { return Latest().tree_size() == Size() - 1; }, std::chrono::seconds(20)))
          << "the sequencer did not sign the rewritten log";
    }
    return a;
  }

  static Applied WitnessStateReset(const Round& r) {
    Applied a{.harmless = true};
    a.refused = !Run(r, "UPDATE log_witnesses SET cosigned_size = 0, proved_size = 0");
    return a;
  }

  // --- the detectors --------------------------------------------------------

  static bool ReadDetects(const std::string& event) {
    auto stub = v1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
    v1::QueryAuditLogsRequest req;
    req.set_page_size(1000);
    for (int page = 0; page < 10; ++page) {
      grpc::ClientContext ctx;
      testing::Authorize(&ctx, "auditor", {"audit.reader"});
      v1::QueryAuditLogsResponse resp;
      const grpc::Status s = stub->QueryAuditLogs(&ctx, req, &resp);
      if (s.error_code() == grpc::StatusCode::DATA_LOSS) return true;
      if (!s.ok() || resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    if (!event.empty()) {
      grpc::ClientContext ctx;
      testing::Authorize(&ctx, "auditor", {"audit.reader"});
      v1::GetAuditLogRequest get;
      get.set_event_id(event);
      v1::AuditLog log;
      if (stub->GetAuditLog(&ctx, get, &log).error_code() == grpc::StatusCode::DATA_LOSS) {
        return true;
      }
    }
    // The watch from the start, until it has considered every leaf.
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "auditor", {"audit.reader"});
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::WatchAuditLogsRequest watch;
    watch.mutable_beginning();
    auto reader = stub->WatchAuditLogs(&ctx, watch);
    v1::WatchAuditLogsResponse frame;
    // Resume tokens are opaque: with no filter every leaf is a row the watch
    // sends, so the rows sent say how far it has considered the log.
    std::optional<uint64_t> last_sent;
    while (reader->Read(&frame)) {
      if (frame.has_audit_log()) {
        last_sent = std::max(last_sent.value_or(0), frame.audit_log().audit_log().log_index());
      }
      if (frame.has_progress() && last_sent && *last_sent + 1 >= frame.progress().log_size()) {
        ctx.TryCancel();
        break;
      }
    }
    return reader->Finish().error_code() == grpc::StatusCode::DATA_LOSS;
  }

  // Every row of QueryAuditLogs in the PROVEN view, checked as a client would.
  static bool ProofsDetect() {
    verify::CheckpointPolicy policy;
    policy.log = *tlog::VerifiersFromFile<tlog::NoteVerifier>(dir_ + "/log.vkey");
    policy.witnesses =
        *tlog::VerifiersFromFile<tlog::CosignatureVerifier>(dir_ + "/witnesses.vkey");
    const crypto::KeyDirectory& owners = mesh_->keys().directory();
    auto stub = v1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
    v1::QueryAuditLogsRequest req;
    req.set_page_size(1000);
    req.set_view(v1::AUDIT_LOG_VIEW_PROVEN);
    for (int page = 0; page < 10; ++page) {
      grpc::ClientContext ctx;
      testing::Authorize(&ctx, "auditor", {"audit.reader"});
      v1::QueryAuditLogsResponse resp;
      const grpc::Status s = stub->QueryAuditLogs(&ctx, req, &resp);
      if (!s.ok()) return s.error_code() == grpc::StatusCode::DATA_LOSS;
      auto checkpoint = verify::OpenWitnessed(resp.checkpoint(), policy);
      if (!checkpoint.ok()) return true;
      for (const v1::AuditLog& log : resp.audit_logs()) {
        if (!log.has_proof()) continue;
        if (!verify::CheckRowIsLeaf(log, log.proof().leaf(), &owners).ok() ||
            !verify::CheckInclusion(log.log_index(), log.proof().leaf(), log.proof().hashes(),
                                    *checkpoint)
                 .ok()) {
          return true;
        }
      }
      if (resp.next_page_token().empty()) break;
      req.set_page_token(resp.next_page_token());
    }
    return false;
  }

  // ulticode-verify with the witness policy and both owners' views: its
  // exit status (0 clean, 1 break, 3 unwitnessed) and output.
  static testing::CommandResult Verify() {
    static int n = 0;
    const std::string out = absl::StrCat(dir_, "/export-", ++n);
    const std::string bin = absl::StrCat(testing::BinDir(), "/tools/verify/ulticode-verify ");
    const std::string token = absl::StrCat(" --token-file=", dir_, "/auditor.token");
    auto exported = testing::RunCommand(
        absl::StrCat(bin, "export --admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0), token,
                     " --out=", out));
    if (exported.exit_code != 0) return exported;
    return testing::RunCommand(absl::StrCat(
        bin, "check --dir=", out, " --log-keys-file=", dir_, "/log.vkey --owner-keys-file=",
        mesh_->keys().public_keys_file(), " --witness-keys-file=", dir_,
        "/witnesses.vkey --witness-addresses=auth=127.0.0.1:", mesh_->grpc_port(Service::kAuth, 0),
        ",app=127.0.0.1:", mesh_->grpc_port(Service::kApp, 0), token));
  }

  static double Metric(Service s, const std::string& pattern) {
    const auto r = testing::RunCommand(
        absl::StrCat("curl -s http://127.0.0.1:", mesh_->metrics_port(s, 0), "/metrics | grep -E '",
                     pattern, "' | awk '{s += $NF} END {print s + 0}'"));
    double v = 0;
    return absl::SimpleAtod(absl::StripAsciiWhitespace(r.output), &v) ? v : 0;
  }
  static double Refusals() {
    const std::string p = "^ulticode_log_witness_checkpoints_total.*(fork|rollback|bad_signature)";
    return Metric(Service::kAuth, p) + Metric(Service::kApp, p);
  }
  static double Incomplete() {
    return Metric(Service::kAdmin, "^ulticode_admin_audit_rows_unlogged ") +
           Metric(Service::kAdmin, "^ulticode_admin_audit_rows_requeued_total");
  }

  // Puts Admin's log tables and the owners' witness state back as kept.
  // One transaction that locks the tables first: Admin's jobs keep running
  // and wait for it.
  static void Restore() {
    std::string sql = absl::StrCat("BEGIN; LOCK TABLE ", absl::StrJoin(kAdminTables, ", "),
                                   " IN ACCESS EXCLUSIVE MODE;"
                                   " SET LOCAL session_replication_role = replica;");
    for (const char* t : kAdminTables) {
      absl::StrAppend(&sql, "DELETE FROM ", t, "; INSERT INTO ", t, " SELECT * FROM kept.", t, ";");
    }
    absl::StrAppend(&sql, "COMMIT");
    // Admin's own transactions may take these tables in another order: a
    // deadlock aborts the restore, which then starts again on a fresh
    // connection (the aborted one refuses every statement but ROLLBACK).
    absl::Status restored;
    for (int attempt = 0; attempt < 5; ++attempt) {
      restored = Admin().ExecuteScript("restore", sql, absl::Seconds(60));
      if (restored.ok()) break;
      pg::ConnectOptions o;
      o.conninfo = mesh_->Dsn(Service::kAdmin);
      delete db_[Service::kAdmin];
      db_[Service::kAdmin] = pg::Connection::Connect(o).value().release();
    }
    ASSERT_TRUE(restored.ok()) << restored;
    for (Service s : {Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(db_[s]
                      ->ExecuteScript("restore",
                                      "DELETE FROM log_witnessed; INSERT INTO log_witnessed"
                                      " SELECT * FROM kept_witnessed",
                                      absl::Seconds(30))
                      .ok());
    }
  }

  static Mesh* mesh_;
  static std::map<Service, pg::Connection*> db_;
  static std::string dir_;
};

Mesh* TamperMatrixTest::mesh_ = nullptr;
std::map<Service, pg::Connection*> TamperMatrixTest::db_;
std::string TamperMatrixTest::dir_;

uint64_t SeedFromEnv() {
  uint64_t seed = kDefaultSeed;
  if (const char* s = std::getenv("ULTICODE_TAMPER_SEED"); s != nullptr && *s != '\0') {
    EXPECT_TRUE(absl::SimpleAtoi(s, &seed)) << "ULTICODE_TAMPER_SEED=" << s;
  }
  return seed;
}

TEST_F(TamperMatrixTest, EveryInsiderChangeIsRefusedOrNamed) {
  const uint64_t seed = SeedFromEnv();
  int passes = 2;
  if (const char* p = std::getenv("ULTICODE_TAMPER_PASSES"); p != nullptr && *p != '\0') {
    ASSERT_TRUE(absl::SimpleAtoi(p, &passes) && passes > 0) << "ULTICODE_TAMPER_PASSES=" << p;
  }
  std::printf("[tamper] seed %llu (ULTICODE_TAMPER_SEED), %d passes\n",
              static_cast<unsigned long long>(seed), passes);
  std::mt19937_64 rng(seed);
  auto changes = Changes();
  // class -> detector -> rounds caught by it; class -> rounds.
  std::map<std::string, std::map<std::string, int>> caught;
  std::map<std::string, int> rounds;
  int round_no = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::shuffle(changes.begin(), changes.end(), rng);
    for (const auto& [name, change] : changes) {
      Round r;
      r.rng = &rng;
      r.runtime = pass == 0 ? false : pass == 1 ? true : rng() % 4 == 0;
      r.key = rng() % 2 == 0;
      r.feed = rng() % 3 != 0;
      r.target = 1 + rng() % (Size() - 2);
      const std::string label = absl::StrCat(
          "round ", ++round_no, " [", name, "] as ", r.runtime ? "runtime" : "superuser",
          r.key ? ", with the log key" : ", without the log key",
          r.feed ? ", witness feed on" : ", witness feed held off", ", target leaf ", r.target);
      // Holding the witness feed's lock keeps it from running.
      std::unique_ptr<pg::Connection> hold;
      if (!r.feed) {
        pg::ConnectOptions o;
        o.conninfo = mesh_->Dsn(Service::kAdmin);
        hold = pg::Connection::Connect(o).value();
        ASSERT_TRUE(hold->ExecuteScript("hold",
                                        "SELECT pg_advisory_lock(hashtextextended("
                                        "'ulticode.log.witness', 0))",
                                        absl::Seconds(30))
                        .ok());
      }
      const double refusals = Refusals(), incomplete = Incomplete();
      const Applied a = change(r);
      std::set<std::string> by;
      if (a.refused) {
        by.insert("refused");
      } else {
        if (ReadDetects(a.event)) by.insert("read");
        if (ProofsDetect()) by.insert("proofs");
        const auto v = Verify();
        if (v.exit_code == 1 || v.exit_code == 3) by.insert("verify");
        // A change that alters nothing an auditor reads must not be called
        // a break.
        if (a.harmless) EXPECT_NE(v.exit_code, 1) << label << ": " << v.output;
        WaitFor(
            [&] {
              if (r.feed && Refusals() > refusals) by.insert("witnesses");
              if (Incomplete() > incomplete) by.insert("complete");
              return by.contains("witnesses") || (!r.feed && by.contains("complete"));
            },
            kDetectWithin, kMetricsPoll);
        std::printf("[tamper] %s%s: verify exit %d: %s", label.c_str(),
                    a.what.empty() ? "" : (" (" + a.what + ")").c_str(), v.exit_code,
                    v.output.c_str());
      }
      std::printf("[tamper] %s: detected by {%s}\n", label.c_str(),
                  absl::StrJoin(by, ", ").c_str());
      if (!a.harmless) EXPECT_FALSE(by.empty()) << label << ": nothing detected it";
      ++rounds[name];
      for (const std::string& d : by) ++caught[name][d];
      hold.reset();
      Restore();
    }
  }
  // The matrix: rounds of each class, and how many each detector caught.
  std::printf("[tamper] SUMMARY seed %llu\n| change | rounds | %s |\n|---|---|%s\n",
              static_cast<unsigned long long>(seed), absl::StrJoin(kDetectors, " | ").c_str(),
              "---|---|---|---|---|---|");
  for (const auto& [name, n] : rounds) {
    std::string row = absl::StrCat("| ", name, " | ", n, " |");
    for (const char* d : kDetectors) absl::StrAppend(&row, " ", caught[name][d], " |");
    std::printf("%s\n", row.c_str());
  }
}

}  // namespace
}  // namespace ulticode
