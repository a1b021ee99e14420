// A real Prometheus server (Debian's) in the loop: it scrapes the three real
// binaries and a forwarder with deploy/prometheus/ulticode-rules.yml loaded. Every metric the
// rules and the dashboard (deploy/grafana) name exists in what it scraped; with Admin frozen
// (SIGSTOP) under load, UlticodePipelineStalled goes to firing through Prometheus' API, and back to
// inactive after SIGCONT.
//
// That alert runs on a compressed clock here: its rate windows are 10 s
// instead of 2m and its `for` 5 s instead of 1m, its expression otherwise as
// deployed (CompressedRules). The deployed windows and durations are
// promtool's to prove (deploy/prometheus/tests, prometheus_rules_test);
// this test proves that the metrics they read are the ones the binaries
// export, and that the expression fires on a real stall and clears after it.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crypto/crypto.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/support/mesh.h"
#include "tests/support/process.h"
#include "tests/support/tokens.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode {
namespace {

using ::ulticode::testing::Mesh;
using ::ulticode::testing::RunCommand;
using ::ulticode::testing::Service;
using ::ulticode::testing::WaitFor;

// Each poll of Prometheus' API runs curl.
constexpr auto kApiPoll = std::chrono::milliseconds(200);

std::string RulesFile() {
  return ::ulticode::testing::SourceDir() + "/deploy/prometheus/ulticode-rules.yml";
}

// Metric names the rules and the dashboard use (recording rules' own
// names, with a colon, excluded).
std::set<std::string> MetricsNamed() {
  std::set<std::string> names;
  for (const std::string& file : {RulesFile(), ::ulticode::testing::SourceDir() +
                                                   "/deploy/grafana/ulticode-dashboard.json"}) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::regex metric(R"(\b(ulticode_[a-z0-9_]+|process_[a-z_]+|up)\b)");
    for (std::sregex_iterator it(text.begin(), text.end(), metric), end; it != end; ++it) {
      names.insert((*it)[1]);
    }
  }
  return names;
}

// The rules file as deployed, with UlticodePipelineStalled's windows and
// `for` shortened, written to `dir`: its path, or "" when the alert is not
// as this test expects (then the test must be brought up to date).
std::string CompressedRules(const std::string& dir) {
  std::ifstream in(RulesFile());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string::size_type begin = text.find("- alert: UlticodePipelineStalled");
  if (begin == std::string::npos) return "";
  const std::string::size_type end = std::min(text.find("- alert:", begin + 1), text.size());
  std::string alert = text.substr(begin, end - begin);
  const std::string windows = std::regex_replace(alert, std::regex(R"(\[2m\])"), "[10s]");
  const std::string compressed =
      std::regex_replace(windows, std::regex(R"(\n(\s*)for: 1m\n)"), "\n$1for: 5s\n");
  if (windows == alert || compressed == windows) return "";
  text.replace(begin, end - begin, compressed);
  const std::string path = dir + "/rules.yml";
  std::ofstream(path) << text;
  return path;
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    if (RunCommand("command -v prometheus").exit_code != 0) {
      if (::ulticode::testing::InCi())
        FAIL() << "prometheus is not installed (scripts/lib/deps.sh)";
      GTEST_SKIP() << "prometheus is not installed";
    }
    testing::MeshOptions options;
    options.prefix = "prom";
    options.auth_args = options.app_args = options.admin_args = {"--metrics-sample-interval=1s"};
    mesh_ = std::make_unique<Mesh>(pg, redis, options);
    std::string error;
    for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
      ASSERT_TRUE(mesh_->Start(s, 0, &error)) << error;
    }
    char tmpl[] = "/tmp/ulticode-prom-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    port_ = testing::FreePort();
    const std::string rules = CompressedRules(dir_);
    ASSERT_FALSE(rules.empty()) << "UlticodePipelineStalled in " << RulesFile()
                                << " no longer has [2m] windows and `for: 1m`";
    std::ofstream config(dir_ + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
           << "rule_files:\n  - " << rules << "\nscrape_configs:\n";
    const std::pair<const char*, Service> jobs[] = {{"ulticode-auth", Service::kAuth},
                                                    {"ulticode-app", Service::kApp},
                                                    {"ulticode-admin", Service::kAdmin}};
    for (const auto& [job, service] : jobs) {
      config << "  - job_name: " << job << "\n    static_configs:\n      - targets: ['127.0.0.1:"
             << mesh_->metrics_port(service, 0) << "']\n";
    }
    const int forward_metrics = testing::FreePort();
    config << "  - job_name: ulticode-forward\n    static_configs:\n      - targets: ['127.0.0.1:"
           << forward_metrics << "']\n";
    config.close();
    StartForwarder(forward_metrics);
    ASSERT_TRUE(prometheus_.Start({"prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                                   "--storage.tsdb.path=" + dir_ + "/data",
                                   absl::StrCat("--web.listen-address=127.0.0.1:", port_)}));
    ASSERT_TRUE(WaitFor([&] { return Up() == 4 || !prometheus_.Running(); },
                        std::chrono::seconds(60), kApiPoll))
        << prometheus_.Output();
  }

  // ulticode-forward with one syslog sink whose receiver never answers:
  // its metrics exist (and its sink stays up, retrying).
  void StartForwarder(int metrics_port) {
    const std::string keys = mesh_->keys().dir();
    testing::TokenSpec spec;
    spec.subject = "forwarder";
    spec.roles = {"audit.reader"};
    ASSERT_TRUE(
        crypto::WriteSecretFile(dir_ + "/forwarder.token", testing::SharedTestTokens().Mint(spec))
            .ok());
    std::ofstream(dir_ + "/sinks.json")
        << "{\"sinks\":[{\"name\":\"prom\",\"syslog\":{\"address\":\"127.0.0.1:"
        << testing::FreePort() << "\"}}]}";
    ASSERT_TRUE(forwarder_.Start(
        {absl::StrCat(testing::BinDir(), "/forward/ulticode-forward"),
         absl::StrCat("--admin=127.0.0.1:", mesh_->grpc_port(Service::kAdmin, 0)),
         "--token-file=" + dir_ + "/forwarder.token", "--sinks-file=" + dir_ + "/sinks.json",
         "--state-dir=" + dir_ + "/forward", "--log-keys-file=" + keys + "/log.vkey",
         absl::StrCat("--metrics-listen=127.0.0.1:", metrics_port),
         absl::StrCat("--health-listen=127.0.0.1:", testing::FreePort())}));
  }

  void TearDown() override {
    forwarder_.Stop(SIGTERM, std::chrono::seconds(10));
    stop_load_ = true;
    if (load_.joinable()) load_.join();
    if (mesh_ != nullptr && mesh_->Pid(Service::kAdmin, 0) > 0) {
      kill(mesh_->Pid(Service::kAdmin, 0), SIGCONT);
    }
    prometheus_.Stop(SIGTERM, std::chrono::seconds(10));
    if (!dir_.empty()) RunCommand("rm -rf " + dir_);
  }

  // GET /api/v1/<path> as a protobuf Struct ("" on failure).
  google::protobuf::Struct Api(const std::string& path) {
    auto r = RunCommand(
        absl::StrCat("curl -gsf --max-time 5 'http://127.0.0.1:", port_, "/api/v1/", path, "'"));
    google::protobuf::Struct out;
    if (r.exit_code == 0) (void)google::protobuf::util::JsonStringToMessage(r.output, &out);
    return out;
  }

  // The value of an instant query returning one sample (0 when none).
  double Scalar(const std::string& query) {
    auto s = Api("query?query=" + query);
    if (s.fields().count("data") == 0) return 0;
    const auto& result = s.fields().at("data").struct_value().fields().at("result").list_value();
    if (result.values().empty()) return 0;
    return std::stod(
        result.values(0).struct_value().fields().at("value").list_value().values(1).string_value());
  }
  int Up() { return static_cast<int>(Scalar("sum(up)")); }

  // State of `alert` ("inactive" when Prometheus lists it nowhere).
  std::string AlertState(const std::string& alert) {
    auto s = Api("alerts");
    if (s.fields().count("data") == 0) return "unknown";
    for (const auto& a :
         s.fields().at("data").struct_value().fields().at("alerts").list_value().values()) {
      const auto& f = a.struct_value().fields();
      if (f.at("labels").struct_value().fields().at("alertname").string_value() == alert) {
        return f.at("state").string_value();
      }
    }
    return "inactive";
  }

  void StartLoad() {
    load_ = std::thread([this] {
      auto auth = auth::v1::AuthService::NewStub(mesh_->Channel(Service::kAuth, 0));
      for (int i = 0; !stop_load_; ++i) {
        grpc::ClientContext ctx;
        ctx.AddMetadata("authorization", testing::SharedTestTokens().Bearer("loader"));
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        auth::v1::CreateUserRequest req;
        req.set_username(absl::StrCat("load", i));
        req.set_email(absl::StrCat("load", i, "@example.com"));
        auth::v1::CreateUserResponse resp;
        (void)auth->CreateUser(&ctx, req, &resp);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }

  std::unique_ptr<Mesh> mesh_;
  testing::ChildProcess prometheus_, forwarder_;
  std::string dir_;
  int port_ = 0;
  std::thread load_;
  std::atomic<bool> stop_load_{false};
};

TEST_F(PrometheusTest, EveryRuleAndDashboardMetricIsScrapedAndAFrozenAdminFiresThenClears) {
  StartLoad();
  // Every metric the rules and the dashboard name is in what Prometheus scraped.
  std::set<std::string> missing;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto names = Api("label/__name__/values");
        std::set<std::string> have;
        if (names.fields().count("data")) {
          for (const auto& v : names.fields().at("data").list_value().values()) {
            have.insert(v.string_value());
          }
        }
        missing.clear();
        for (const std::string& n : MetricsNamed()) {
          if (!have.count(n) && !have.count(n + "_bucket")) missing.insert(n);
        }
        return missing.empty();
      },
      std::chrono::seconds(60), kApiPoll))
      << "not scraped: " << absl::StrJoin(missing, ", ");

  // Audit rows flow (as Prometheus sees them) and the alert is quiet: at
  // start-up owners may publish a moment before Admin's first rows, which
  // can make it pending until the next evaluations see both rates. Then
  // Admin freezes while the owners keep publishing.
  ASSERT_TRUE(
      WaitFor([&] { return Scalar("sum(rate(ulticode_audit_logs_written_total[30s]))") > 0; },
              std::chrono::seconds(60), kApiPoll));
  EXPECT_TRUE(WaitFor([&] { return AlertState("UlticodePipelineStalled") == "inactive"; },
                      std::chrono::seconds(30), kApiPoll))
      << "state while audit rows flow: " << AlertState("UlticodePipelineStalled");
  ASSERT_EQ(kill(mesh_->Pid(Service::kAdmin, 0), SIGSTOP), 0);
  EXPECT_TRUE(WaitFor([&] { return AlertState("UlticodePipelineStalled") == "firing"; },
                      std::chrono::seconds(60), kApiPoll))
      << "state: " << AlertState("UlticodePipelineStalled");
  ASSERT_EQ(kill(mesh_->Pid(Service::kAdmin, 0), SIGCONT), 0);
  EXPECT_TRUE(WaitFor([&] { return AlertState("UlticodePipelineStalled") == "inactive"; },
                      std::chrono::seconds(60), kApiPoll))
      << "state: " << AlertState("UlticodePipelineStalled");
}

}  // namespace
}  // namespace ulticode
