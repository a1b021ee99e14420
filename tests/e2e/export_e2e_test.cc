// Exports end to end (docs/exporting.md): `ulticode-export` against a real
// mesh selects exactly the rows the filters and ranges say (a generated
// set of filters, checked against SQL on Admin's database), writes each
// format, and with --with-proofs writes a directory that `ulticode-verify
// check` accepts with public keys only, and rejects, naming a file, after
// any generated tampering: a byte changed in any file, a row or proof
// deleted, repeated or moved, a row and its proof both removed from an
// unfiltered export. Seeds: ULTICODE_EXPORT_SEED.
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/pg_query.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode {
namespace {

namespace fs = std::filesystem;
namespace v1 = admin::v1;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::QueryText;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

constexpr int kUsers = 10;  // 2 events each (Auth and App)

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class ExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pg = testing::PgFromEnv();
    auto redis = testing::RedisFromEnv();
    if (!pg || !redis) return;
    testing::MeshOptions options;
    options.prefix = "export";
    options.admin_args = {"--log-checkpoint-interval=100ms", "--log-sequence-interval=50ms",
                          "--export-max-concurrent=4"};
    mesh_ = new Mesh(*pg, *redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(Service::kAdmin);
    db_ = pg::Connection::Connect(o).value().release();
    for (int i = 0; i < kUsers; ++i) {
      ASSERT_TRUE(testing::CreateUser(*mesh_, absl::StrCat("export-user", i)).ok());
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
    // Every row in a checkpoint both owners cosigned: what an export is of.
    ASSERT_TRUE(WaitFor(
        [&] {
          size_ = WitnessedSize();
          return size_ == static_cast<uint64_t>(2 * kUsers) &&
                 QueryInt(*db_, "SELECT count(*) FROM audit_logs") == 2 * kUsers;
        },
        std::chrono::seconds(60)))
        << "witnessed " << size_ << " of " << 2 * kUsers;
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

  static std::string WitnessKey(const std::string& owner, const crypto::SigningKey& key) {
    return tlog::FormatVerifierKey(owner, tlog::kCosignatureV1Ed25519, key.public_key().raw());
  }

  static uint64_t WitnessedSize() {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "alice", {"audit.reader"});
    v1::GetCheckpointRequest req;
    req.mutable_newest_witnessed();
    v1::SignedCheckpoint c;
    auto stub = v1::AuditLogService::NewStub(mesh_->Channel(Service::kAdmin, 0));
    return stub->GetCheckpoint(&ctx, req, &c).ok() ? c.tree_size() : 0;
  }

  static std::string Fresh(const std::string& name) {
    static int n = 0;
    return absl::StrCat(dir_, "/", name, "-", ++n);
  }

  static testing::CommandResult Export(const std::string& args) {
    return testing::RunCommand(absl::StrCat(
        testing::BinDir(), "/tools/export/ulticode-export --admin=127.0.0.1:",
        mesh_->grpc_port(Service::kAdmin, 0), " --token-file=", dir_, "/auditor.token ", args));
  }

  static testing::CommandResult Check(const std::string& export_dir) {
    return testing::RunCommand(
        absl::StrCat(testing::BinDir(), "/tools/verify/ulticode-verify check --dir=", export_dir,
                     " --log-keys-file=", dir_, "/log.vkey --witness-keys-file=", dir_,
                     "/witnesses.vkey --owner-keys-file=", mesh_->keys().public_keys_file()));
  }

  // The log indexes of a JSON Lines export's rows, in file order.
  static std::vector<uint64_t> IndexesOf(const std::string& jsonl) {
    std::vector<uint64_t> out;
    for (absl::string_view line : absl::StrSplit(jsonl, '\n', absl::SkipEmpty())) {
      google::protobuf::Value v;
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &v).ok()) << line;
      out.push_back(
          static_cast<uint64_t>(v.struct_value().fields().at("log_index").number_value()));
    }
    return out;
  }

  // The same rows by SQL: log indexes inside the witnessed checkpoint that
  // pass `conditions` on audit_logs.
  static std::vector<uint64_t> Oracle(const std::vector<std::string>& conditions) {
    std::vector<std::string> where = conditions;
    where.push_back(absl::StrCat("log_index < ", size_));
    const std::string ids = QueryText(
        *db_, absl::StrCat("SELECT coalesce(string_agg(log_index::text, ',' ORDER BY log_index), "
                           "'') FROM log_leaves JOIN audit_logs USING (event_id) WHERE ",
                           absl::StrJoin(where, " AND ")));
    std::vector<uint64_t> out;
    for (absl::string_view id : absl::StrSplit(ids, ',', absl::SkipEmpty())) {
      out.push_back(std::stoull(std::string(id)));
    }
    return out;
  }

  static Mesh* mesh_;
  static pg::Connection* db_;
  static std::string dir_;
  static uint64_t size_;
};

Mesh* ExportTest::mesh_ = nullptr;
pg::Connection* ExportTest::db_ = nullptr;
std::string ExportTest::dir_;
uint64_t ExportTest::size_ = 0;

TEST_F(ExportTest, GeneratedFiltersAndRangesSelectExactlyTheRowsSqlSelects) {
  std::mt19937 rng(testing::SeedFromEnv("ULTICODE_EXPORT_SEED", "export filters"));
  const auto rows = QueryInt(*db_, "SELECT count(*) FROM audit_logs");
  auto time_of = [&](int64_t offset) {
    return QueryText(*db_, absl::StrCat("SELECT to_char(occurred_at AT TIME ZONE 'UTC', "
                                        "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM audit_logs "
                                        "ORDER BY occurred_at, event_id OFFSET ",
                                        offset, " LIMIT 1"));
  };
  for (int trial = 0; trial < 16; ++trial) {
    std::vector<std::string> flags = {"--format=jsonl", "--quiet"};
    std::vector<std::string> sql;
    if (rng() % 3 == 0) {
      const std::string owner = rng() % 2 ? "auth" : "app";
      flags.push_back("--owner=" + owner);
      sql.push_back(absl::StrCat("owner = '", owner, "'"));
    }
    if (rng() % 3 == 0) {
      const std::string action = rng() % 2 ? "create_user" : "create_problem";
      flags.push_back("--action=" + action);
      sql.push_back(absl::StrCat("action = '", action, "'"));
    }
    if (rng() % 4 == 0) {
      const std::string actor = rng() % 2 ? "alice" : "mallory";
      flags.push_back("--actor=" + actor);
      sql.push_back(absl::StrCat("actor = '", actor, "'"));
    }
    if (rng() % 4 == 0) {
      const std::string entity = QueryText(
          *db_, absl::StrCat("SELECT entity_type || ' ' || entity_id FROM audit_logs ORDER BY "
                             "event_id OFFSET ",
                             rng() % rows, " LIMIT 1"));
      const std::vector<std::string> parts = absl::StrSplit(entity, ' ');
      flags.push_back("--entity-type=" + parts[0]);
      flags.push_back("--entity-id=" + parts[1]);
      sql.push_back(
          absl::StrCat("entity_type = '", parts[0], "' AND entity_id = '", parts[1], "'"));
    }
    if (rng() % 3 == 0) {
      // An end after the start (the API refuses an empty range), or none.
      const std::string from = time_of(rng() % rows), to = time_of(rng() % rows);
      flags.push_back("--start-time=" + from);
      sql.push_back(absl::StrCat("occurred_at >= '", from, "'"));
      if (to > from) {
        flags.push_back("--end-time=" + to);
        sql.push_back(absl::StrCat("occurred_at < '", to, "'"));
      }
    }
    if (rng() % 3 == 0) {
      const uint64_t a = rng() % (size_ + 1), b = rng() % (size_ + 3);
      flags.push_back(absl::StrCat("--start-index=", a));
      flags.push_back(absl::StrCat("--end-index=", b < a ? a : b));
      sql.push_back(absl::StrCat("log_index >= ", a, " AND log_index < ", b < a ? a : b));
    }
    const std::string out = Fresh("rows.jsonl");
    const auto r = Export(absl::StrCat(absl::StrJoin(flags, " "), " --out=", out));
    ASSERT_EQ(r.exit_code, 0) << absl::StrJoin(flags, " ") << "\n" << r.output;
    EXPECT_EQ(IndexesOf(Slurp(out)), Oracle(sql)) << absl::StrJoin(flags, " ");
  }
}

TEST_F(ExportTest, EachFormatWithProofsVerifiesOfflineAndHoldsEveryRowOfItsRange) {
  for (const std::string format : {"jsonl", "csv", "ocsf"}) {
    const std::string out = Fresh(absl::StrCat("proved-", format));
    const auto r = Export(absl::StrCat("--format=", format, " --with-proofs --out=", out));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat(size_, " rows"))) << r.output;
    const auto check = Check(out);
    EXPECT_EQ(check.exit_code, 0) << format << ": " << check.output;
    EXPECT_TRUE(absl::StrContains(check.output, absl::StrCat("OK: ", size_, " rows")))
        << check.output;
    EXPECT_TRUE(absl::StrContains(check.output, "witnessed: cosigned by 2 of 2")) << check.output;
    EXPECT_FALSE(fs::exists(out + ".partial"));
  }
  const std::string filtered = Fresh("proved-auth");
  ASSERT_EQ(Export("--format=csv --owner=auth --with-proofs --out=" + filtered).exit_code, 0);
  const auto check = Check(filtered);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_TRUE(absl::StrContains(check.output, absl::StrCat("OK: ", kUsers, " rows")))
      << check.output;
}

// One generated change to an export: which file, and what.
struct Tampering {
  std::string file;
  std::string what;
};

// Lines of `text` split after each `eol`, each keeping it.
std::vector<std::string> Lines(const std::string& text, const std::string& eol) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find(eol, at);
    const size_t next = end == std::string::npos ? text.size() : end + eol.size();
    out.push_back(text.substr(at, next - at));
    at = next;
  }
  return out;
}

Tampering Tamper(const std::string& dir, const std::string& rows_file, bool unfiltered,
                 std::mt19937& rng) {
  const std::string eol = absl::EndsWith(rows_file, ".csv") ? "\r\n" : "\n";
  const int header = absl::EndsWith(rows_file, ".csv") ? 1 : 0;
  const std::vector<std::string> files = {rows_file, "proofs.jsonl", "checkpoint", "manifest.json"};
  const int kinds = unfiltered ? 6 : 5;
  switch (rng() % kinds) {
    case 4: {  // a personal value changed instead of erased, in both files alike
      std::vector<std::string> rows = Lines(Slurp(dir + "/" + rows_file), eol);
      std::vector<std::string> proofs = Lines(Slurp(dir + "/proofs.jsonl"), "\n");
      const size_t start = rng() % proofs.size();
      for (size_t n = 0; n < proofs.size(); ++n) {
        const size_t k = (start + n) % proofs.size();
        const std::string key = "\"value\":\"";
        const size_t at = proofs[k].find(key);
        if (at == std::string::npos) continue;
        const size_t from = at + key.size(), to = proofs[k].find('"', from);
        const std::string value = proofs[k].substr(from, to - from);
        if (value.empty() || !absl::StrContains(rows[header + k], value)) continue;
        proofs[k].replace(from, value.size(), value + "z");
        rows[header + k] = absl::StrReplaceAll(rows[header + k], {{value, value + "z"}});
        Spit(dir + "/" + rows_file, absl::StrJoin(rows, ""));
        Spit(dir + "/proofs.jsonl", absl::StrJoin(proofs, ""));
        return {"personal value", absl::StrCat("row ", k + 1, ": \"", value, "\" changed")};
      }
      [[fallthrough]];  // no present value to change: a byte instead
    }
    case 0: {  // a byte of any file
      const std::string file = files[rng() % files.size()];
      std::string text = Slurp(dir + "/" + file);
      const size_t at = rng() % text.size();
      text[at] = static_cast<char>(text[at] ^ (1 + rng() % 255));
      Spit(dir + "/" + file, text);
      return {file, absl::StrCat("byte ", at, " changed")};
    }
    case 1:
    case 2:
    case 3: {  // a row or proof deleted, repeated or moved
      const bool rows = rng() % 2 == 0;
      const std::string file = rows ? rows_file : "proofs.jsonl";
      std::vector<std::string> lines = Lines(Slurp(dir + "/" + file), rows ? eol : "\n");
      const int skip = rows ? header : 0;
      const size_t n = lines.size() - skip;
      const size_t i = skip + rng() % n, j = skip + (i - skip + 1 + rng() % (n - 1)) % n;
      std::string what;
      const int op = rng() % 3;
      if (op == 0) {
        lines.erase(lines.begin() + i);
        what = absl::StrCat("line ", i + 1, " deleted");
      } else if (op == 1) {
        lines.insert(lines.begin() + j, lines[i]);
        what = absl::StrCat("line ", i + 1, " repeated at ", j + 1);
      } else {
        std::swap(lines[i], lines[j]);
        what = absl::StrCat("lines ", i + 1, " and ", j + 1, " swapped");
      }
      Spit(dir + "/" + file, absl::StrJoin(lines, ""));
      return {file, what};
    }
    default: {  // a row and its proof both removed: a gap in an unfiltered export
      std::vector<std::string> rows = Lines(Slurp(dir + "/" + rows_file), eol);
      std::vector<std::string> proofs = Lines(Slurp(dir + "/proofs.jsonl"), "\n");
      const size_t k = rng() % proofs.size();
      rows.erase(rows.begin() + header + k);
      proofs.erase(proofs.begin() + k);
      Spit(dir + "/" + rows_file, absl::StrJoin(rows, ""));
      Spit(dir + "/proofs.jsonl", absl::StrJoin(proofs, ""));
      return {"proofs.jsonl", absl::StrCat("row and proof ", k + 1, " removed")};
    }
  }
}

TEST_F(ExportTest, EveryGeneratedTamperingOfAnExportWithProofsIsNamed) {
  std::mt19937 rng(testing::SeedFromEnv("ULTICODE_EXPORT_SEED", "export tampering"));
  struct Original {
    std::string dir, rows_file;
    bool unfiltered;
  };
  const std::vector<Original> originals = {
      {Fresh("tamper-csv"), "rows.csv", true},
      {Fresh("tamper-ocsf-app"), "rows.ocsf.jsonl", false},
  };
  ASSERT_EQ(Export("--format=csv --with-proofs --out=" + originals[0].dir).exit_code, 0);
  ASSERT_EQ(Export("--format=ocsf --owner=app --with-proofs --out=" + originals[1].dir).exit_code,
            0);
  for (int trial = 0; trial < 60; ++trial) {
    const Original& o = originals[rng() % originals.size()];
    const std::string copy = Fresh("tampered");
    fs::copy(o.dir, copy, fs::copy_options::recursive);
    const Tampering t = Tamper(copy, o.rows_file, o.unfiltered, rng);
    const auto r = Check(copy);
    const std::string what =
        absl::StrCat(o.rows_file, " export, ", t.file, ": ", t.what, "\n", r.output);
    EXPECT_TRUE(r.exit_code == 1 || (r.exit_code == 3 && t.file == "checkpoint")) << what;
    EXPECT_TRUE(absl::StrContains(r.output, "FIRST BREAK") ||
                absl::StrContains(r.output, "UNWITNESSED"))
        << what;
    const bool names_a_file =
        absl::StrContains(r.output, o.rows_file) || absl::StrContains(r.output, "proofs.jsonl") ||
        absl::StrContains(r.output, "checkpoint") || absl::StrContains(r.output, "manifest.json");
    EXPECT_TRUE(names_a_file) << what;
    if (t.file == "personal value") {
      EXPECT_TRUE(absl::StrContains(r.output, "personal value changed")) << what;
    }
    fs::remove_all(copy);
  }
  // The untouched exports still verify: the checks above judged the changes.
  for (const Original& o : originals) EXPECT_EQ(Check(o.dir).exit_code, 0) << o.dir;
}

TEST_F(ExportTest, BadRequestsAreRefusedByNameAndLeaveNothingBehind) {
  const std::string out = Fresh("refused.csv");
  auto r = Export("--format=csv --entity-id=x --out=" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "filter.entity_id")) << r.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));

  r = Export("--format=csv --start-index=5 --end-index=3 --out=" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "end_index")) << r.output;
  EXPECT_FALSE(fs::exists(out));

  r = Export("--format=xml --out=" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "jsonl, csv or ocsf")) << r.output;

  r = Export("--with-proofs --out=-");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "directory")) << r.output;

  // An existing file is never overwritten.
  Spit(out, "precious");
  r = Export("--format=csv --out=" + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "exists")) << r.output;
  EXPECT_EQ(Slurp(out), "precious");

  // The RPC itself: the format is required; only an audit.reader exports.
  auto stub = v1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
  {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "alice", {"audit.reader"});
    auto reader = stub->ExportAuditLogs(&ctx, v1::ExportAuditLogsRequest());
    v1::ExportAuditLogsResponse frame;
    EXPECT_FALSE(reader->Read(&frame));
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "format")) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    testing::Authorize(&ctx, "bob", {"audit.operator"});
    v1::ExportAuditLogsRequest req;
    req.set_format(v1::EXPORT_FORMAT_JSONL);
    auto reader = stub->ExportAuditLogs(&ctx, req);
    v1::ExportAuditLogsResponse frame;
    EXPECT_FALSE(reader->Read(&frame));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
}

TEST_F(ExportTest, TheRpcSendsTheHeaderThenRowsInLogOrderWithProgress) {
  auto stub = v1::AdminService::NewStub(mesh_->Channel(Service::kAdmin, 0));
  grpc::ClientContext ctx;
  testing::Authorize(&ctx, "alice", {"audit.reader"});
  v1::ExportAuditLogsRequest req;
  req.set_format(v1::EXPORT_FORMAT_JSONL);
  req.set_start_index(3);
  req.set_end_index(1000000);
  auto reader = stub->ExportAuditLogs(&ctx, req);
  v1::ExportAuditLogsResponse frame;
  ASSERT_TRUE(reader->Read(&frame));
  ASSERT_TRUE(frame.has_header());
  EXPECT_EQ(frame.header().start_index(), 3u);
  EXPECT_EQ(frame.header().end_index(), size_) << "clamped to the checkpoint";
  EXPECT_EQ(frame.header().checkpoint().tree_size(), size_);
  EXPECT_EQ(frame.header().checkpoint().cosignatures_size(), 2);
  std::vector<uint64_t> indexes;
  uint64_t read_through = 3;
  while (reader->Read(&frame)) {
    ASSERT_TRUE(frame.has_chunk());
    EXPECT_GE(frame.chunk().read_through(), read_through);
    read_through = frame.chunk().read_through();
    for (const auto& row : frame.chunk().rows()) {
      indexes.push_back(row.log_index());
      EXPECT_TRUE(row.leaf().empty() && row.hashes().empty()) << "no proofs unless asked";
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(read_through, size_);
  std::vector<uint64_t> want;
  for (uint64_t i = 3; i < size_; ++i) want.push_back(i);
  EXPECT_EQ(indexes, want);
}

}  // namespace
}  // namespace ulticode
