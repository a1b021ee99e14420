// A real service binary: flags, reflection (as buf curl and grpcurl use it), health,
// /metrics that promtool accepts, graceful shutdown.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/keys.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"

namespace ulticode {
namespace {

using ::ulticode::testing::BinDir;
using ::ulticode::testing::ChildProcess;
using ::ulticode::testing::FreePort;
using ::ulticode::testing::PortOpen;
using ::ulticode::testing::RunCommand;
using ::ulticode::testing::SourceDir;
using ::ulticode::testing::WaitFor;

std::string AuthBinary() { return BinDir() + "/auth/ulticode-auth"; }

// `buf curl` (npm @bufbuild/buf, pinned in package-lock.json): the schema
// comes from reflection only, v1 first, then the v1alpha fallback this
// server (gRPC 1.51) speaks. `target` is "" (base URL) or "Service/Method".
std::string BufCurl(int port, const std::string& flags, const std::string& target = "") {
  return absl::StrCat(SourceDir(), "/node_modules/.bin/buf curl --protocol grpc ", flags,
                      " http://127.0.0.1:", port, "/", target);
}

TEST(ServerFlagsTest, BadFlagsExitNonZeroWithMessageBeforeServing) {
  struct Case {
    std::string args;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--grpc-listen=nope", "--grpc-listen: \"nope\" is not host:port"},
           {"--pg-pool-size=0", "--pg-pool-size: 0 is outside"},
           {"--shutdown-timeout=soon", "--shutdown-timeout: \"soon\" is not a duration"},
           {"--log-level=loud", "log level must be one of"},
           {"--no-such-flag", "unknown flag --no-such-flag"},
       }) {
    auto r = RunCommand(AuthBinary() + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
  }
  auto env = RunCommand("ULTICODE_GRPC_THREADS=1 " + AuthBinary());
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_NE(env.output.find("ULTICODE_GRPC_THREADS"), std::string::npos) << env.output;

  // Secrets only from files: a password in the DSN is refused before start.
  auto dsn = RunCommand(AuthBinary() + " '--pg-dsn=host=x password=hunter2'");
  EXPECT_EQ(dsn.exit_code, 2) << dsn.output;
  EXPECT_NE(dsn.output.find("--pg-dsn: must not hold a password"), std::string::npos) << dsn.output;
  EXPECT_EQ(dsn.output.find("hunter2"), std::string::npos) << dsn.output;
  auto uri = RunCommand(AuthBinary() + " --pg-dsn=postgresql://u:hunter2@h/db");
  EXPECT_EQ(uri.exit_code, 2) << uri.output;
  EXPECT_EQ(uri.output.find("hunter2"), std::string::npos) << uri.output;
  // Plaintext is an explicit choice; TLS files go together.
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"", "choose TLS (--tls-cert-file, --tls-key-file) or --grpc-plaintext"},
           {"--tls-cert-file=/x.pem", "--tls-cert-file and --tls-key-file go together"},
           {"--grpc-plaintext --tls-cert-file=/x.pem --tls-key-file=/x.key",
            "--grpc-plaintext contradicts --tls-cert-file"}}) {
    auto r = RunCommand(AuthBinary() +
                        " --public-keys-file=/dev/null --jwks-file=/dev/null "
                        "--audit-signing-key-file=/dev/null " +
                        args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
  }
  // The signing key is required, and a key file others can read is refused.
  auto no_key = RunCommand(AuthBinary() + " --public-keys-file=/dev/null --jwks-file=/dev/null");
  EXPECT_EQ(no_key.exit_code, 2) << no_key.output;
  EXPECT_NE(no_key.output.find("--audit-signing-key-file is required"), std::string::npos)
      << no_key.output;
  ::ulticode::testing::TestKeys keys;
  const std::string loose = keys.KeyFile("auth");
  ASSERT_EQ(chmod(loose.c_str(), 0644), 0);
  auto open_key =
      RunCommand(AuthBinary() + " --public-keys-file=" + keys.public_keys_file() +
                 " --jwks-file=/dev/null --grpc-plaintext --audit-signing-key-file=" + loose);
  EXPECT_EQ(open_key.exit_code, 1) << open_key.output;
  EXPECT_NE(open_key.output.find("has mode 0644: group and others must have no access"),
            std::string::npos)
      << open_key.output;
  EXPECT_EQ(open_key.output.find("PRIVATE KEY"), std::string::npos) << open_key.output;

  auto help = RunCommand(AuthBinary() + " --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* f :
       {"--grpc-listen", "ULTICODE_GRPC_LISTEN", "--pg-dsn", "--redis-addr", "--metrics-listen",
        "--shutdown-timeout", "--pg-password-file", "--redis-password-file",
        "--audit-signing-key-file", "--public-keys-file", "--grpc-max-receive-bytes"}) {
    EXPECT_NE(help.output.find(f), std::string::npos) << f;
  }
}

// A pod told to stop while its database is down stops at once: the wait for
// PostgreSQL ends on SIGTERM instead of running out --startup-timeout.
TEST(ServerStartupTest, SigtermWhileWaitingForTheDatabaseExitsAtOnce) {
  ::ulticode::testing::TestKeys keys;
  const int closed_port = FreePort();  // nothing listens there
  for (const std::string& binary :
       {"auth/ulticode-auth", "app/ulticode-app", "admin/ulticode-admin"}) {
    for (const std::string& migrate : {"apply", "only"}) {
      SCOPED_TRACE(binary + " --migrate=" + migrate);
      ChildProcess server;
      ASSERT_TRUE(server.Start(
          {BinDir() + "/" + binary, absl::StrCat("--grpc-listen=127.0.0.1:", FreePort()),
           absl::StrCat("--metrics-listen=127.0.0.1:", FreePort()),
           absl::StrCat("--pg-dsn=host=127.0.0.1 port=", closed_port, " dbname=none"),
           "--migrate=" + migrate, "--startup-timeout=5m", "--grpc-plaintext",
           "--public-keys-file=" + keys.public_keys_file(), "--jwks-file=/dev/null"},
          {"ULTICODE_AUDIT_SIGNING_KEY_FILE=" + keys.KeyFile("auth"),
           "ULTICODE_RECEIPT_SIGNING_KEY_FILE=" + keys.KeyFile("admin")}));
      ASSERT_TRUE(WaitFor(
          [&] {
            return server.Output().find("database not ready; retrying") != std::string::npos ||
                   !server.Running();
          },
          std::chrono::seconds(20)))
          << server.Output();
      ASSERT_TRUE(server.Running()) << server.Output();
      const auto sent = std::chrono::steady_clock::now();
      const int status = server.Stop(SIGTERM, std::chrono::seconds(2));
      ASSERT_NE(status, -1) << "still waiting 2 s after SIGTERM\n" << server.Output();
      EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(2));
      ASSERT_TRUE(WIFEXITED(status)) << server.Output();
      // Start-up did not finish: not a success, and the log says why.
      EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << server.Output();
      EXPECT_NE(server.Output().find("\"message\":\"stopped during start-up\""), std::string::npos)
          << server.Output();
    }
  }
}

struct Service {
  std::string binary;     // relative to the build directory
  std::string grpc_name;  // fully-qualified service name
  // Series this service must expose besides the common ones (kCommonSeries).
  std::vector<std::string> series;
};

// Process, pool and periodic-job series every service exposes.
const char* const kCommonSeries[] = {
    "process_cpu_seconds_total ",
    "process_resident_memory_bytes ",
    "process_virtual_memory_bytes ",
    "process_open_fds ",
    "process_max_fds ",
    "process_threads ",
    "process_start_time_seconds ",
    "ulticode_pg_pool_connections{pool=\"rpc\",state=\"in_use\"}",
    "ulticode_pg_pool_connections{pool=\"rpc\",state=\"idle\"}",
    "ulticode_pg_pool_max_connections{pool=\"rpc\"}",
    "ulticode_pg_pool_waiters{pool=\"rpc\"}",
    "ulticode_pg_pool_acquire_seconds_bucket{pool=\"rpc\"",
    "ulticode_periodic_job_runs_total{",
    "ulticode_retention_deleted_rows_total{",
    "ulticode_retention_last_run_timestamp_seconds{",
};

// Every service binary is started for real (auth, app, admin).
class ServerTest : public ::testing::TestWithParam<Service> {
 protected:
  void SetUp() override {
    ULTI_REQUIRE_PG(pg);
    ULTI_REQUIRE_REDIS(redis);
    const std::string db = ::ulticode::testing::CreateScratchDatabase(pg, "servertest");
    grpc_port_ = FreePort();
    metrics_port_ = FreePort();
    ASSERT_TRUE(server_.Start(
        {BinDir() + "/" + GetParam().binary, absl::StrCat("--grpc-listen=127.0.0.1:", grpc_port_),
         absl::StrCat("--metrics-listen=127.0.0.1:", metrics_port_), "--pg-dsn=" + pg.ConnInfo(db),
         absl::StrCat("--redis-addr=", redis.host, ":", redis.port),
         "--public-keys-file=" + keys_.public_keys_file()},
        // Owners publish to a stream of this test's own.
        {"ULTICODE_DISPATCH_STREAM=test:server:" + ::ulticode::testing::RandomSuffix(),
         "ULTICODE_AUDIT_SIGNING_KEY_FILE=" + keys_.KeyFile("auth"),
         "ULTICODE_REDIS_USER=" + redis.user, "ULTICODE_REDIS_PASSWORD_FILE=" + redis.password_file,
         "ULTICODE_JWKS_FILE=" + ::ulticode::testing::SharedTestTokens().jwks_file(),
         "ULTICODE_GRPC_PLAINTEXT=true",
         "ULTICODE_RECEIPT_SIGNING_KEY_FILE=" + keys_.KeyFile("admin")}));
    ASSERT_TRUE(WaitFor([&] { return PortOpen(grpc_port_) || !server_.Running(); },
                        std::chrono::seconds(30)));
    ASSERT_TRUE(server_.Running()) << server_.Output();
  }

  ::ulticode::testing::TestKeys keys_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  ChildProcess server_;
};

TEST_P(ServerTest, ReflectionOnlyClientListsServicesAndCallsHealth) {
  const std::string name = GetParam().grpc_name;
  auto list = RunCommand(BufCurl(grpc_port_, "--list-services"));
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("grpc.health.v1.Health"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("grpc.reflection.v1alpha.ServerReflection"), std::string::npos);
  EXPECT_NE(list.output.find(name), std::string::npos);

  auto methods = RunCommand(BufCurl(grpc_port_, "--list-methods"));
  ASSERT_EQ(methods.exit_code, 0) << methods.output;
  EXPECT_NE(methods.output.find(name + "/"), std::string::npos) << methods.output;

  auto health = RunCommand(BufCurl(grpc_port_, "", "grpc.health.v1.Health/Check"));
  ASSERT_EQ(health.exit_code, 0) << health.output;
  EXPECT_NE(health.output.find("\"SERVING\""), std::string::npos) << health.output;

  auto per_service = RunCommand(
      BufCurl(grpc_port_, "-d '{\"service\":\"" + name + "\"}'", "grpc.health.v1.Health/Check"));
  ASSERT_EQ(per_service.exit_code, 0) << per_service.output;
  EXPECT_NE(per_service.output.find("\"SERVING\""), std::string::npos) << per_service.output;

  auto unknown = RunCommand(
      BufCurl(grpc_port_, "-d '{\"service\":\"no.such.Service\"}'", "grpc.health.v1.Health/Check"));
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("\"not_found\""), std::string::npos) << unknown.output;
}

TEST_P(ServerTest, MetricsPassPromtoolAndCountCalls) {
  ASSERT_EQ(RunCommand(BufCurl(grpc_port_, "", "grpc.health.v1.Health/Check")).exit_code, 0);
  const std::string url = absl::StrCat("http://127.0.0.1:", metrics_port_, "/metrics");
  std::vector<std::string> series(std::begin(kCommonSeries), std::end(kCommonSeries));
  series.insert(series.end(), GetParam().series.begin(), GetParam().series.end());
  ::ulticode::testing::CommandResult scrape;
  std::string missing;
  // The samplers' first runs start with the process: wait for them.
  WaitFor(
      [&] {
        scrape = RunCommand("curl -sf " + url);
        missing.clear();
        for (const auto& s : series) {
          if (scrape.output.find(s) == std::string::npos) missing += s + "; ";
        }
        return scrape.exit_code == 0 && missing.empty();
      },
      std::chrono::seconds(15));
  ASSERT_EQ(scrape.exit_code, 0) << scrape.output;
  EXPECT_EQ(missing, "") << scrape.output;
  EXPECT_NE(scrape.output.find("ulticode_grpc_server_handled_total{grpc_code=\"OK\",grpc_method="
                               "\"Check\",grpc_service=\"grpc.health.v1.Health\"}"),
            std::string::npos)
      << scrape.output;
  EXPECT_NE(scrape.output.find("ulticode_grpc_server_handling_seconds_bucket"), std::string::npos);
  auto check = RunCommand("curl -sf " + url + " | promtool check metrics");
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST_P(ServerTest, SigtermStopsGracefullyWithExitZero) {
  const int status = server_.Stop(SIGTERM, std::chrono::seconds(20));
  ASSERT_NE(status, -1) << "did not exit in time\n" << server_.Output();
  EXPECT_TRUE(WIFEXITED(status)) << server_.Output();
  EXPECT_EQ(WEXITSTATUS(status), 0) << server_.Output();
  EXPECT_NE(server_.Output().find("\"message\":\"stopped\""), std::string::npos)
      << server_.Output();
  EXPECT_FALSE(PortOpen(grpc_port_));
}

INSTANTIATE_TEST_SUITE_P(
    Services, ServerTest,
    ::testing::Values(
        Service{"auth/ulticode-auth",
                "ulticode.auth.v1.AuthService",
                {"ulticode_outbox_rows{owner=\"auth\",state=\"PENDING\"} 0",
                 "ulticode_outbox_rows{owner=\"auth\",state=\"CONFIRMED\"}",
                 "ulticode_outbox_oldest_pending_age_seconds{owner=\"auth\"} 0",
                 "ulticode_outbox_oldest_unconfirmed_age_seconds{owner=\"auth\"} 0",
                 "ulticode_retention_last_run_timestamp_seconds{table=\"audit_outbox\"}",
                 "ulticode_retention_last_run_timestamp_seconds{table=\"idempotency_keys\"}"}},
        Service{"app/ulticode-app",
                "ulticode.app.v1.AppService",
                {"ulticode_outbox_rows{owner=\"app\",state=\"DEAD\"} 0"}},
        Service{
            "admin/ulticode-admin",
            "ulticode.admin.v1.AdminService",
            {"ulticode_inbox_rows{status=\"PENDING\"} 0", "ulticode_inbox_rows{status=\"DEAD\"} 0",
             "ulticode_inbox_oldest_pending_age_seconds 0",
             "ulticode_inbox_oldest_lease_age_seconds 0",
             "ulticode_inbox_oldest_retry_age_seconds 0", "ulticode_poison_entries 0",
             "ulticode_retention_last_run_timestamp_seconds{table=\"consumer_inbox\"}",
             "ulticode_retention_last_run_timestamp_seconds{table=\"poison_events\"}"}}),
    [](const ::testing::TestParamInfo<Service>& info) {
      return info.param.grpc_name.substr(9, info.param.grpc_name.find('.', 9) - 9);
    });

}  // namespace
}  // namespace ulticode
