// The forwarder end to end (docs/forwarding.md): `ulticode-forward` follows
// a real mesh while clients make changes, and delivers to real receivers
// started here: two webhook receivers (tests/support/webhook_receiver.py:
// each request's HMAC signature and timestamp checked, rows recorded as
// they came, failures on command) and rsyslogd listening on TCP and on TLS,
// writing what it takes to files. A seeded schedule (ULTICODE_FORWARD_SEED)
// orders and times the faults: a webhook answering 503, rsyslogd frozen
// (SIGSTOP), the forwarder killed (-9) and started again on its state; a
// row refused with a 400 goes to the poison file. Then each sink holds
// every row its filter matches, in log order, with no gap, a repeat only
// of rows at most one batch behind the newest, the OCSF sink exactly what
// `ulticode-export --format=ocsf` writes for its filter, and the metrics
// say so. Last, a row forged in Admin's database (re-sealed, its leaf hash
// changed, so Admin's own checks pass) is never delivered: a fresh
// forwarder delivers the rows before it and exits 1 naming it; and a row
// deleted from it (its leaf kept) stops a fresh forwarder there too.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/pg/params.h"
#include "common/seal/seal.h"
#include "common/tlog/leaf.h"
#include "common/tlog/note.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/mesh_calls.h"
#include "tests/support/metric_text.h"
#include "tests/support/pg_query.h"
#include "tests/support/process.h"
#include "tests/support/tokens.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::ChildProcess;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::QueryInt;
using ::ulticode::testing::QueryText;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// A row's log index in either webhook schema ("log_index", or OCSF's
// metadata.sequence), -1 if it has none.
int64_t IndexOf(const std::string& json) {
  google::protobuf::Struct row;
  if (!google::protobuf::util::JsonStringToMessage(json, &row).ok()) return -1;
  const auto& f = row.fields();
  if (f.count("log_index")) return static_cast<int64_t>(f.at("log_index").number_value());
  if (!f.count("metadata")) return -1;
  const auto& m = f.at("metadata").struct_value().fields();
  return m.count("sequence") ? static_cast<int64_t>(m.at("sequence").number_value()) : -1;
}

// What rsyslogd wrote ("SD MSG" a line): the log index in the structured
// data, which must be the one in the JSON after it; -1 when they differ.
int64_t SyslogIndexOf(const std::string& line) {
  const std::string key = "log_index=\"";
  const size_t at = line.find(key);
  const size_t json = line.find('{');
  if (at == std::string::npos || json == std::string::npos) return -1;
  int64_t index = -1;
  const size_t start = at + key.size();
  if (!absl::SimpleAtoi(line.substr(start, line.find('"', start) - start), &index)) return -1;
  return IndexOf(line.substr(json)) == index ? index : -1;
}

// The delivery property of one sink: `got` (the indexes in the order the
// receiver took them) walks `want` (the indexes the sink must deliver, in
// log order) with no gap and no reordering; a repeat is of a row at most
// `batch` rows behind the newest delivered.
void ExpectDelivered(const std::string& sink, const std::vector<int64_t>& got,
                     const std::vector<int64_t>& want, size_t batch) {
  size_t next = 0;  // want[next] is the next new row
  size_t repeats = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (next < want.size() && got[i] == want[next]) {
      ++next;
      continue;
    }
    const auto seen = std::find(want.begin(), want.begin() + static_cast<ptrdiff_t>(next), got[i]);
    ASSERT_NE(seen, want.begin() + static_cast<ptrdiff_t>(next))
        << sink << ": received " << got[i] << " at " << i << " where "
        << (next < want.size() ? absl::StrCat(want[next]) : "nothing more") << " was due";
    EXPECT_LE(static_cast<size_t>(want.begin() + static_cast<ptrdiff_t>(next) - seen), batch)
        << sink << ": " << got[i] << " repeated more than a batch behind the newest";
    ++repeats;
  }
  EXPECT_EQ(next, want.size()) << sink << ": " << want.size() - next << " rows never arrived";
  std::printf("[forward e2e] %s: %zu rows, %zu repeats\n", sink.c_str(), next, repeats);
}

// rsyslogd in the foreground, one TCP and one TLS input (RFC 6587 octet
// counting is on by default), each writing "SD MSG" lines to its file.
class Rsyslog {
 public:
  explicit Rsyslog(std::string dir) : dir_(std::move(dir)) {}

  bool Start() {
    auto certs = testing::RunServersSh(absl::StrCat(
        "ulticode_tls_ca ", dir_, " && ulticode_tls_cert ", dir_, " rsyslog IP:127.0.0.1"));
    EXPECT_EQ(certs.exit_code, 0) << certs.output;
    Spit(dir_ + "/rsyslog.conf",
         absl::StrCat(
             "global(workDirectory=\"", dir_, "\" maxMessageSize=\"256k\"",
             " DefaultNetstreamDriverCAFile=\"", dir_, "/ca.pem\"",
             " DefaultNetstreamDriverCertFile=\"", dir_, "/rsyslog.pem\"",
             " DefaultNetstreamDriverKeyFile=\"", dir_, "/rsyslog.key\")\n",
             "module(load=\"imtcp\")\n",
             "template(name=\"rows\" type=\"string\" string=\"%structured-data% %msg%\\n\")\n",
             "ruleset(name=\"tcp\") { action(type=\"omfile\" file=\"", dir_,
             "/tcp.log\" template=\"rows\") }\n",
             "ruleset(name=\"tls\") { action(type=\"omfile\" file=\"", dir_,
             "/tls.log\" template=\"rows\") }\n",
             "input(type=\"imtcp\" port=\"0\" listenPortFileName=\"", dir_,
             "/tcp.port\" ruleset=\"tcp\")\n",
             "input(type=\"imtcp\" port=\"0\" listenPortFileName=\"", dir_,
             "/tls.port\" ruleset=\"tls\" streamDriver.name=\"ossl\" streamDriver.mode=\"1\""
             " streamDriver.authMode=\"anon\")\n"));
    if (!process_.Start({"/usr/sbin/rsyslogd", "-n", "-f", dir_ + "/rsyslog.conf", "-i",
                         dir_ + "/rsyslog.pid"})) {
      return false;
    }
    return WaitFor(
        [&] {
          return absl::SimpleAtoi(Slurp(dir_ + "/tcp.port"), &tcp_port_) &&
                 absl::SimpleAtoi(Slurp(dir_ + "/tls.port"), &tls_port_) &&
                 testing::PortOpen(tcp_port_) && testing::PortOpen(tls_port_);
        },
        std::chrono::seconds(20));
  }

  std::vector<int64_t> Received(const std::string& input) const {
    std::vector<int64_t> out;
    for (const std::string& line : Lines(Slurp(absl::StrCat(dir_, "/", input, ".log")))) {
      out.push_back(SyslogIndexOf(line));
    }
    return out;
  }

  ChildProcess& process() { return process_; }
  int tcp_port() const { return tcp_port_; }
  int tls_port() const { return tls_port_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  std::string Output() const { return process_.Output(); }

 private:
  std::string dir_;
  ChildProcess process_;
  int tcp_port_ = 0, tls_port_ = 0;
};

// tests/support/webhook_receiver.py with its own files.
class Receiver {
 public:
  Receiver(const std::string& dir, const std::string& name, const std::string& secret_file)
      : dir_(absl::StrCat(dir, "/", name)), secret_file_(secret_file) {
    std::filesystem::create_directories(dir_);
  }

  bool Start() {
    if (!process_.Start({"python3", testing::SourceDir() + "/tests/support/webhook_receiver.py",
                         "--port-file=" + dir_ + "/port", "--secret-file=" + secret_file_,
                         "--out=" + dir_ + "/rows.jsonl", "--control=" + dir_ + "/control"})) {
      return false;
    }
    return WaitFor([&] { return absl::SimpleAtoi(Slurp(dir_ + "/port"), &port_); },
                   std::chrono::seconds(20));
  }

  void Control(const std::string& what) { Spit(dir_ + "/control", what); }
  std::vector<std::string> Rows() const { return Lines(Slurp(dir_ + "/rows.jsonl")); }
  std::vector<int64_t> Received() const {
    std::vector<int64_t> out;
    for (const std::string& row : Rows()) out.push_back(IndexOf(row));
    return out;
  }
  // With a token in its query, as some receivers want: a secret too.
  std::string url(const std::string& token) const {
    return absl::StrCat("http://127.0.0.1:", port_, "/audit?token=", token);
  }

 private:
  std::string dir_, secret_file_;
  ChildProcess process_;
  int port_ = 0;
};

class ForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    testing::MeshOptions options;
    options.prefix = "forward";
    options.admin_args = {"--log-checkpoint-interval=100ms", "--log-sequence-interval=50ms",
                          "--watch-poll-interval=20ms"};
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    pg::ConnectOptions o;
    o.conninfo = mesh_->Dsn(Service::kAdmin);
    auto db = pg::Connection::Connect(o);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    dir_ = mesh_->keys().dir();
    testing::TokenSpec spec;
    spec.subject = "forwarder";
    spec.roles = {"audit.reader"};
    ASSERT_TRUE(
        crypto::WriteSecretFile(dir_ + "/forwarder.token", testing::SharedTestTokens().Mint(spec))
            .ok());
    secret_ = absl::StrCat("whsec-", testing::RandomSuffix(), testing::RandomSuffix());
    // With a trailing newline, as `openssl rand -hex 32 > file` writes it:
    // both ends drop it.
    ASSERT_TRUE(crypto::WriteSecretFile(dir_ + "/webhook.secret", secret_ + "\n").ok());
  }

  std::vector<std::string> ForwarderArgs(const std::string& sinks_file,
                                         const std::string& state_dir) const {
    return {absl::StrCat(testing::BinDir(), "/forward/ulticode-forward"),
            absl::StrCat("--admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0)),
            "--token-file=" + dir_ + "/forwarder.token",
            "--sinks-file=" + sinks_file,
            "--state-dir=" + state_dir,
            "--log-keys-file=" + mesh_->keys().LogVerifierKeyFile(),
            "--witness-keys-file=" + mesh_->keys().WitnessKeysFile(),
            "--owner-keys-file=" + mesh_->keys().public_keys_file(),
            absl::StrCat("--metrics-listen=127.0.0.1:", metrics_port_),
            absl::StrCat("--health-listen=127.0.0.1:", testing::FreePort()),
            "--batch-linger=200ms",
            "--idle-timeout=5s"};
  }

  std::string Webhook(const std::string& name, const Receiver& r, const std::string& extra) const {
    return absl::StrCat("{\"name\":\"", name, "\",", extra, "\"webhook\":{\"url\":\"",
                        r.url(secret_), "\",\"secretFile\":\"", dir_, "/webhook.secret\",");
  }

  // The log indexes of the rows of `owner` (all owners when empty), in order.
  std::vector<int64_t> Indexes(const std::string& owner) {
    const std::string where = owner.empty() ? "" : " WHERE a.owner = '" + owner + "'";
    const std::string list =
        QueryText(*db_,
                  "SELECT coalesce(string_agg(l.log_index::text, ',' ORDER BY l.log_index), '')"
                  " FROM log_leaves l JOIN audit_logs a USING (event_id)" +
                      where);
    std::vector<int64_t> out;
    for (absl::string_view v : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      int64_t i = 0;
      EXPECT_TRUE(absl::SimpleAtoi(v, &i));
      out.push_back(i);
    }
    return out;
  }

  // Rewrites leaf `index` as an actor "mallory" did it: the envelope
  // re-sealed with the owner's key and the stored leaf hash changed to
  // match, so that every check inside Admin passes; only the witnessed
  // checkpoints disagree. Returns the SQL that puts it back.
  std::string Forge(int index) {
    const std::string at =
        absl::StrCat("event_id = (SELECT event_id FROM log_leaves WHERE log_index = ", index, ")");
    const std::string owner = QueryText(*db_, "SELECT owner FROM audit_logs WHERE " + at);
    const std::string id = QueryText(
        *db_, absl::StrCat("SELECT event_id::text FROM log_leaves WHERE log_index = ", index));
    std::string original;
    EXPECT_TRUE(absl::Base64Unescape(
        QueryText(*db_, "SELECT encode(envelope, 'base64') FROM audit_logs WHERE " + at),
        &original));
    audit::v1::AuditEvent event;
    EXPECT_TRUE(event.ParseFromString(original));
    event.mutable_record()->set_actor("mallory");
    const std::string forged = event.SerializeAsString();
    const crypto::SigningKey& key = mesh_->keys().owner(owner);
    const std::string sealed = seal::SealBundle(key, {absl::string_view(forged)}).value()[0];
    const tlog::Hash leaf =
        tlog::LeafHash(tlog::EncodeLeaf({owner, id, key.key_id(), sealed, forged}));
    EXPECT_TRUE(db_->ExecuteScript("test.save",
                                   "CREATE TABLE forward_saved AS SELECT * FROM audit_logs WHERE " +
                                       at +
                                       "; CREATE TABLE forward_saved_node AS SELECT * FROM "
                                       "log_nodes WHERE level = 0 AND idx = " +
                                       std::to_string(index),
                                   absl::Seconds(10))
                    .ok());
    auto set = db_->Execute(
        pg::Statement{"test.forge",
                      "WITH a AS (UPDATE audit_logs SET envelope = $1, seal = $2,"
                      " actor = 'mallory' WHERE event_id = $3::uuid)"
                      " UPDATE log_nodes SET hash = $4 WHERE level = 0 AND idx = $5::bigint"},
        {pg::Bytes(forged), pg::Bytes(sealed), pg::Text(id), pg::Bytes(tlog::ToBytes(leaf)),
         pg::Text(std::to_string(index))});
    EXPECT_TRUE(set.ok()) << set.status();
    return absl::StrCat(
        "SET session_replication_role = replica; DELETE FROM audit_logs WHERE ", at,
        "; INSERT INTO audit_logs SELECT * FROM forward_saved; DROP TABLE forward_saved;"
        " UPDATE log_nodes n SET hash = s.hash FROM forward_saved_node s"
        " WHERE n.level = 0 AND n.idx = s.idx; DROP TABLE forward_saved_node;"
        " SET session_replication_role = origin");
  }

  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<pg::Connection> db_;
  std::string dir_, secret_;
  int metrics_port_ = testing::FreePort();
};

TEST_F(ForwardTest, EverySinkGetsEveryMatchingRowInOrderThroughFaultsAndNeverAForgedOne) {
  const uint32_t seed = testing::SeedFromEnv("ULTICODE_FORWARD_SEED", "forward e2e");
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const size_t siem_batch = pick(2, 12), ocsf_batch = pick(2, 12), syslog_batch = pick(2, 30);
  const int refused = pick(2, 9);  // the siem receiver answers 400 to the batch holding it

  Rsyslog rsyslog(dir_ + "/rsyslog");
  std::filesystem::create_directories(dir_ + "/rsyslog");
  ASSERT_TRUE(rsyslog.Start()) << rsyslog.Output();
  Receiver siem(dir_, "siem", dir_ + "/webhook.secret");
  Receiver ocsf(dir_, "ocsf", dir_ + "/webhook.secret");
  ASSERT_TRUE(siem.Start());
  ASSERT_TRUE(ocsf.Start());
  siem.Control(absl::StrCat("400 ", refused));
  const std::string sinks_file = dir_ + "/sinks.json";
  Spit(sinks_file,
       absl::StrCat(
           "{\"sinks\":[", Webhook("siem", siem, ""), "\"maxBatchRows\":", siem_batch, "}},",
           Webhook("app-ocsf", ocsf, "\"filter\":{\"owner\":\"OWNER_APP\"},"),
           "\"schema\":\"SCHEMA_OCSF\",\"maxBatchRows\":", ocsf_batch, "}},",
           "{\"name\":\"syslog-tcp\",\"syslog\":{\"address\":\"127.0.0.1:", rsyslog.tcp_port(),
           "\",\"maxBatchRows\":", syslog_batch, "}},",
           "{\"name\":\"syslog-tls\",\"syslog\":{\"address\":\"127.0.0.1:", rsyslog.tls_port(),
           "\",\"tls\":true,\"caFile\":\"", rsyslog.ca_file(), "\",\"maxBatchRows\":", syslog_batch,
           "}}]}"));
  const std::string state = dir_ + "/state";
  auto forwarder = std::make_unique<ChildProcess>();
  ASSERT_TRUE(forwarder->Start(ForwarderArgs(sinks_file, state)));
  std::string output;  // of every forwarder run

  std::atomic<bool> stop{false};
  std::atomic<int> committed{0};
  std::thread clients([&] {
    for (int i = 0; !stop; ++i) {
      if (testing::CreateUser(*mesh_, absl::StrCat("fwd", i)).ok()) ++committed;
      if (testing::CreateProblem(*mesh_, i).ok()) ++committed;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(state + "/siem.poison.jsonl"); },
                      std::chrono::seconds(60)))
      << forwarder->Output();
  siem.Control("");

  // The faults, in a seeded order, each for a seeded while.
  std::vector<std::string> faults = {"webhook 503", "rsyslogd frozen", "forwarder kill -9"};
  std::shuffle(faults.begin(), faults.end(), rng);
  for (const std::string& fault : faults) {
    const absl::Duration length = absl::Milliseconds(pick(500, 3000));
    std::printf("[forward e2e] %s for %s\n", fault.c_str(), absl::FormatDuration(length).c_str());
    if (fault == "webhook 503") {
      siem.Control("503");
      absl::SleepFor(length);
      siem.Control("");
    } else if (fault == "rsyslogd frozen") {
      ::kill(rsyslog.process().pid(), SIGSTOP);
      absl::SleepFor(length);
      ::kill(rsyslog.process().pid(), SIGCONT);
    } else {
      absl::SleepFor(length);
      forwarder->Stop(SIGKILL, std::chrono::seconds(5));
      output += forwarder->Output();
      forwarder = std::make_unique<ChildProcess>();
      ASSERT_TRUE(forwarder->Start(ForwarderArgs(sinks_file, state)));
    }
    absl::SleepFor(absl::Milliseconds(pick(200, 1500)));
  }
  stop = true;
  clients.join();
  ASSERT_GT(committed.load(), 20);

  // Every event in the log; then every sink has every row it must deliver.
  ASSERT_TRUE(WaitFor(
      [&] {
        return QueryInt(*db_, "SELECT count(*) FROM log_leaves") >= committed.load() &&
               QueryInt(*db_, "SELECT count(*) FROM log_queue") == 0;
      },
      std::chrono::seconds(90)));
  const std::vector<int64_t> all = Indexes(""), app = Indexes("app");
  std::vector<int64_t> siem_rows;
  for (int64_t i : all) {
    if (i != refused) siem_rows.push_back(i);
  }
  auto holds_last = [](const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
    return std::find(got.begin(), got.end(), want.back()) != got.end();
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        return holds_last(siem.Received(), siem_rows) && holds_last(ocsf.Received(), app) &&
               holds_last(rsyslog.Received("tcp"), all) && holds_last(rsyslog.Received("tls"), all);
      },
      std::chrono::seconds(120)))
      << "newest due: all " << all.back() << ", app " << app.back() << "; received: siem "
      << absl::StrJoin(siem.Received(), ",") << "; app-ocsf " << absl::StrJoin(ocsf.Received(), ",")
      << "; syslog-tcp " << absl::StrJoin(rsyslog.Received("tcp"), ",") << "; syslog-tls "
      << absl::StrJoin(rsyslog.Received("tls"), ",") << "\n"
      << forwarder->Output();

  ExpectDelivered("siem", siem.Received(), siem_rows, siem_batch);
  ExpectDelivered("app-ocsf", ocsf.Received(), app, ocsf_batch);
  ExpectDelivered("syslog-tcp", rsyslog.Received("tcp"), all, syslog_batch);
  ExpectDelivered("syslog-tls", rsyslog.Received("tls"), all, syslog_batch);

  // The refused row is named in the poison file, and nowhere at the
  // receiver; its body (which may hold personal values, that no erasure
  // reaches there) stays in the log: the line has these fields and no other.
  const std::string poison = Slurp(state + "/siem.poison.jsonl");
  EXPECT_EQ(Lines(poison).size(), 1u) << poison;
  EXPECT_TRUE(absl::StartsWith(poison, absl::StrCat("{\"log_index\":", refused, ","))) << poison;
  EXPECT_TRUE(absl::StrContains(poison, "HTTP 400")) << poison;
  google::protobuf::Struct line;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(poison, &line).ok()) << poison;
  std::set<std::string> fields;
  for (const auto& [name, value] : line.fields()) fields.insert(name);
  EXPECT_EQ(fields, (std::set<std::string>{"log_index", "event_id", "event_type", "error"}))
      << poison;

  // The OCSF sink's rows, first arrivals in order, are byte for byte the
  // export of the same filter.
  std::vector<std::string> first_arrivals;
  std::set<int64_t> seen;
  for (const std::string& row : ocsf.Rows()) {
    if (seen.insert(IndexOf(row)).second) first_arrivals.push_back(row);
  }
  const auto exported = testing::RunCommand(
      absl::StrCat(testing::BinDir(), "/tools/export/ulticode-export --admin=127.0.0.1:",
                   mesh_->grpc_port(Service::kAdmin, 0), " --token-file=", dir_,
                   "/forwarder.token --format=ocsf --owner=app --quiet --out=- 2>/dev/null"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(first_arrivals, Lines(exported.output));

  // The metrics agree: caught up, up, the outage counted, one row poisoned.
  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        metrics = testing::RunCommand(
                      absl::StrCat("curl -s http://127.0.0.1:", metrics_port_, "/metrics"))
                      .output;
        return absl::StrContains(metrics, "ulticode_forward_lag_rows{sink=\"siem\"} 0\n") &&
               absl::StrContains(metrics, "ulticode_forward_lag_rows{sink=\"syslog-tls\"} 0\n");
      },
      std::chrono::seconds(30)))
      << metrics;
  for (const char* sink : {"siem", "app-ocsf", "syslog-tcp", "syslog-tls"}) {
    EXPECT_TRUE(absl::StrContains(
        metrics, absl::StrCat("ulticode_forward_sink_up{sink=\"", sink, "\"} 1\n")))
        << sink;
  }
  // Counters start again with the process: the outage counts when it came
  // after the restart.
  const bool outage_counted = std::find(faults.begin(), faults.end(), "webhook 503") >
                              std::find(faults.begin(), faults.end(), "forwarder kill -9");
  const double failures =
      testing::MetricValue(metrics, "ulticode_forward_delivery_failures_total{sink=\"siem\"}");
  if (outage_counted) {
    EXPECT_GT(failures, 0) << metrics;
  } else {
    EXPECT_EQ(failures, 0) << metrics;
  }
  EXPECT_EQ(forwarder->Stop(SIGTERM, std::chrono::seconds(10)), 0);
  output += forwarder->Output();
  EXPECT_FALSE(absl::StrContains(output, secret_))
      << "a secret (the HMAC key, the URL's token) reached the log";

  // A forged row: a fresh forwarder delivers what precedes it, then stops.
  const int forged = pick(1, static_cast<int>(all.size()) - 2);
  const std::string restore = Forge(forged);
  Receiver fresh(dir_, "fresh", dir_ + "/webhook.secret");
  ASSERT_TRUE(fresh.Start());
  Spit(dir_ + "/fresh.json",
       absl::StrCat("{\"sinks\":[", Webhook("fresh", fresh, ""), "\"maxBatchRows\":3}}]}"));
  std::vector<std::string> argv = ForwarderArgs(dir_ + "/fresh.json", dir_ + "/fresh-state");
  const auto run = testing::RunCommand("timeout 120 " + absl::StrJoin(argv, " ") + " 2>&1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  // The forged row's stored leaf hash is also in the proof of its pair's
  // other leaf: an odd row's left neighbour cannot be proved either, so the
  // break is named at the pair's first row.
  const int named = forged & ~1;
  EXPECT_TRUE(
      absl::StrContains(run.output, absl::StrCat("(log index ", named, ") is not in checkpoint")))
      << run.output;
  std::vector<int64_t> before(all.begin(), all.begin() + named);
  EXPECT_EQ(fresh.Received(), before);
  for (const std::string& row : fresh.Rows()) {
    EXPECT_FALSE(absl::StrContains(row, "mallory")) << row;
  }
  EXPECT_TRUE(db_->ExecuteScript("test.restore", restore, absl::Seconds(10)).ok());

  // A row deleted from Admin's database, its leaf kept: the unfiltered
  // sink cannot go past the missing leaf, whatever Admin then serves.
  const int gone = pick(1, static_cast<int>(all.size()) - 2);
  const std::string at =
      absl::StrCat("event_id = (SELECT event_id FROM log_leaves WHERE log_index = ", gone, ")");
  ASSERT_TRUE(db_->ExecuteScript("test.delete",
                                 "CREATE TABLE forward_gone AS SELECT * FROM audit_logs WHERE " +
                                     at +
                                     "; SET session_replication_role = replica;"
                                     " DELETE FROM audit_logs WHERE " +
                                     at + "; SET session_replication_role = origin",
                                 absl::Seconds(10))
                  .ok());
  Receiver gap(dir_, "gap", dir_ + "/webhook.secret");
  ASSERT_TRUE(gap.Start());
  Spit(dir_ + "/gap.json",
       absl::StrCat("{\"sinks\":[", Webhook("gap", gap, ""), "\"maxBatchRows\":3}}]}"));
  argv = ForwarderArgs(dir_ + "/gap.json", dir_ + "/gap-state");
  const auto gapped = testing::RunCommand("timeout 120 " + absl::StrJoin(argv, " ") + " 2>&1");
  EXPECT_EQ(gapped.exit_code, 1) << gapped.output;
  // Rows in log order up to the missing one, never it or any after; Admin
  // ends the watch at the fetch that meets the missing row, so the rows of
  // that fetch before it (at most 32) may not come.
  const std::vector<int64_t> got = gap.Received();
  EXPECT_GE(got.size() + 32, static_cast<size_t>(gone)) << "row " << gone << " deleted";
  EXPECT_LE(got.size(), static_cast<size_t>(gone)) << "row " << gone << " deleted";
  EXPECT_EQ(got,
            std::vector<int64_t>(all.begin(), all.begin() + std::min<size_t>(got.size(), gone)))
      << "row " << gone << " deleted\n"
      << gapped.output;
  EXPECT_TRUE(db_->ExecuteScript("test.undelete",
                                 "SET session_replication_role = replica; INSERT INTO audit_logs "
                                 "SELECT * FROM forward_gone; DROP TABLE forward_gone;"
                                 " SET session_replication_role = origin",
                                 absl::Seconds(10))
                  .ok());

  // A receiver that refuses every row (its format, a proxy in front of it)
  // is not a run of bad rows: after 3 in the poison file the sink stops
  // before the fourth, naming it, and the rest stays in the log.
  Receiver wall(dir_, "wall", dir_ + "/webhook.secret");
  ASSERT_TRUE(wall.Start());
  wall.Control("400");
  Spit(dir_ + "/wall.json",
       absl::StrCat("{\"sinks\":[", Webhook("wall", wall, ""), "\"maxBatchRows\":2}}]}"));
  argv = ForwarderArgs(dir_ + "/wall.json", dir_ + "/wall-state");
  argv.push_back("--max-poisoned-in-a-row=3");
  const auto walled = testing::RunCommand("timeout 120 " + absl::StrJoin(argv, " ") + " 2>&1");
  EXPECT_EQ(walled.exit_code, 1) << walled.output;
  EXPECT_TRUE(absl::StrContains(walled.output, "refused 4 rows in a row")) << walled.output;
  EXPECT_TRUE(absl::StrContains(walled.output, absl::StrCat("before log index ", all[3])))
      << walled.output;
  EXPECT_EQ(Lines(Slurp(dir_ + "/wall-state/wall.poison.jsonl")).size(), 3u);
  EXPECT_TRUE(wall.Received().empty());
  // Started again, it stays stopped until an operator removes the mark:
  // no restart poisons more rows.
  const auto again = testing::RunCommand("timeout 120 " + absl::StrJoin(argv, " ") + " 2>&1");
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output, "wall.stopped")) << again.output;
  EXPECT_EQ(Lines(Slurp(dir_ + "/wall-state/wall.poison.jsonl")).size(), 3u);

  std::printf(
      "[forward e2e] seed=%u batches siem=%zu ocsf=%zu syslog=%zu refused=%d forged=%d "
      "(reproduce: ULTICODE_FORWARD_SEED=%u)\n",
      seed, siem_batch, ocsf_batch, syslog_batch, refused, forged, seed);
}

}  // namespace
}  // namespace ulticode
