// A real service binary: flags, reflection (as buf curl and grpcurl use it), health,
// /metrics that promtool accepts, graceful shutdown.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "tests/support/keys.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

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
                        "--audit-signing-key-file=/dev/null --log-keys-file=/dev/null " +
                        args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
  }
  // The signing key is required, and a key file others can read is refused.
  auto no_key = RunCommand(AuthBinary() +
                           " --public-keys-file=/dev/null --jwks-file=/dev/null"
                           " --log-keys-file=/dev/null");
  EXPECT_EQ(no_key.exit_code, 2) << no_key.output;
  EXPECT_NE(no_key.output.find("--audit-signing-key-file is required"), std::string::npos)
      << no_key.output;
  // Every owner witnesses the log and confirms on its proofs: the log's
  // verifier keys are required.
  auto no_log_keys = RunCommand(AuthBinary() +
                                " --public-keys-file=/dev/null --jwks-file=/dev/null"
                                " --audit-signing-key-file=/dev/null --grpc-plaintext");
  EXPECT_EQ(no_log_keys.exit_code, 2) << no_log_keys.output;
  EXPECT_NE(no_log_keys.output.find("--log-keys-file is required"), std::string::npos)
      << no_log_keys.output;
  ::ulticode::testing::TestKeys keys;
  const std::string loose = keys.KeyFile("auth");
  ASSERT_EQ(chmod(loose.c_str(), 0644), 0);
  auto open_key = RunCommand(AuthBinary() + " --public-keys-file=" + keys.public_keys_file() +
                             " --jwks-file=/dev/null --grpc-plaintext --log-keys-file=/dev/null"
                             " --audit-signing-key-file=" +
                             loose);
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
          {"ULTICODE_AUDIT_SIGNING_KEY_FILE=" +
               keys.KeyFile(binary == "admin/ulticode-admin" ? "admin"
                            : binary == "app/ulticode-app"   ? "app"
                                                             : "auth"),
           "ULTICODE_LOG_KEYS_FILE=" + keys.LogVerifierKeyFile()}));
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

// One call of the service's that needs a token and reaches its handler.
using AuthorisedCall =
    std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&, grpc::ClientContext*)>;

struct Service {
  std::string binary;     // relative to the build directory
  std::string grpc_name;  // fully-qualified service name
  // Series this service must expose besides the common ones (kCommonSeries).
  std::vector<std::string> series;
  AuthorisedCall authorised_call;
  grpc::StatusCode authorised_code = grpc::StatusCode::OK;  // what that call returns
};

// Names the instance in failure messages.
void PrintTo(const Service& s, std::ostream* os) { *os << s.binary; }

grpc::Status GetLoginPolicy(const std::shared_ptr<grpc::Channel>& channel,
                            grpc::ClientContext* ctx) {
  auth::v1::LoginPolicy reply;
  return auth::v1::AuthService::NewStub(channel)->GetLoginPolicy(
      ctx, auth::v1::GetLoginPolicyRequest(), &reply);
}

grpc::Status GetUnknownProblem(const std::shared_ptr<grpc::Channel>& channel,
                               grpc::ClientContext* ctx) {
  app::v1::GetProblemRequest req;
  req.set_problem_id("00000000-0000-4000-8000-000000000000");
  app::v1::Problem reply;
  return app::v1::AppService::NewStub(channel)->GetProblem(ctx, req, &reply);
}

grpc::Status GetPipelineStatus(const std::shared_ptr<grpc::Channel>& channel,
                               grpc::ClientContext* ctx) {
  admin::v1::PipelineStatus reply;
  return admin::v1::AdminService::NewStub(channel)->GetPipelineStatus(
      ctx, admin::v1::GetPipelineStatusRequest(), &reply);
}

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
         "--public-keys-file=" + keys_.public_keys_file(),
         std::string("--jwt-issuer=") + ::ulticode::testing::kTestIssuer},
        // Owners publish to a stream of this test's own.
        {"ULTICODE_DISPATCH_STREAM=test:server:" + ::ulticode::testing::RandomSuffix(),
         "ULTICODE_AUDIT_SIGNING_KEY_FILE=" +
             keys_.KeyFile(GetParam().binary == "admin/ulticode-admin" ? "admin"
                           : GetParam().binary == "app/ulticode-app"   ? "app"
                                                                       : "auth"),
         "ULTICODE_REDIS_USER=" + redis.user, "ULTICODE_REDIS_PASSWORD_FILE=" + redis.password_file,
         "ULTICODE_JWKS_FILE=" + ::ulticode::testing::SharedTestTokens().jwks_file(),
         "ULTICODE_GRPC_PLAINTEXT=true", "ULTICODE_LOG_SIGNING_KEY_FILE=" + keys_.KeyFile("log"),
         "ULTICODE_LOG_KEYS_FILE=" + keys_.LogVerifierKeyFile()}));
    ASSERT_TRUE(WaitFor([&] { return PortOpen(grpc_port_) || !server_.Running(); },
                        std::chrono::seconds(30)));
    ASSERT_TRUE(server_.Running()) << server_.Output();
  }

  // The service's own audience: its program's name (the default).
  std::string Audience() const {
    const std::string& binary = GetParam().binary;
    return binary.substr(binary.find('/') + 1);
  }
  static std::string Bearer(const std::string& audience) {
    ::ulticode::testing::TokenSpec spec;
    spec.audience = audience;
    return "Bearer " + ::ulticode::testing::SharedTestTokens().Mint(spec);
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

// A channel of its own: its own TCP connection, connected.
std::shared_ptr<grpc::Channel> Connect(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                           grpc::InsecureChannelCredentials(), args);
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return channel;
}

// Nothing a client can open without a token holds a server thread: 400
// reflection streams and 100 health watches that sit idle, beside 400 idle
// connections, leave a health check and an authorised call answered (on a
// server of 32 threads, gRPC 1.51's own reflection took one thread per stream
// and refused the rest with RESOURCE_EXHAUSTED). A call that waited for a
// held thread would wait until the streams end, after the calls: the
// deadline catches it. The deadline is seconds, not the milliseconds a call
// takes here alone, because the suite runs beside other tests' databases.
TEST_P(ServerTest, IdleStreamsAndConnectionsHoldNoThreads) {
  namespace refl = grpc::reflection::v1alpha;
  namespace health = grpc::health::v1;
  std::vector<std::shared_ptr<grpc::Channel>> idle;
  for (int i = 0; i < 400; ++i) idle.push_back(Connect(grpc_port_));
  for (const auto& c : idle) {
    ASSERT_EQ(c->GetState(false), GRPC_CHANNEL_READY);
  }

  // 50 streams per connection (the limit is 100).
  struct Stream {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<
        grpc::ClientReaderWriter<refl::ServerReflectionRequest, refl::ServerReflectionResponse>>
        rw;
  };
  std::vector<std::shared_ptr<grpc::Channel>> stream_channels;
  std::vector<Stream> streams(400);
  for (int i = 0; i < 400; ++i) {
    if (i % 50 == 0) stream_channels.push_back(Connect(grpc_port_));
    auto stub = refl::ServerReflection::NewStub(stream_channels.back());
    streams[i].rw = stub->ServerReflectionInfo(streams[i].ctx.get());
    refl::ServerReflectionRequest req;
    req.set_list_services("");
    ASSERT_TRUE(streams[i].rw->Write(req)) << "stream " << i;
  }
  // Every stream is served (and then left idle).
  int answered = 0;
  for (auto& s : streams) {
    refl::ServerReflectionResponse resp;
    if (s.rw->Read(&resp) && resp.has_list_services_response()) ++answered;
  }
  EXPECT_EQ(answered, 400);

  std::vector<std::unique_ptr<grpc::ClientContext>> watch_ctx;
  std::vector<std::unique_ptr<grpc::ClientReader<health::HealthCheckResponse>>> watches;
  for (int i = 0; i < 100; ++i) {
    auto health_stub = health::Health::NewStub(stream_channels[i % stream_channels.size()]);
    watch_ctx.push_back(std::make_unique<grpc::ClientContext>());
    health::HealthCheckRequest req;
    watches.push_back(health_stub->Watch(watch_ctx.back().get(), req));
    health::HealthCheckResponse first;
    ASSERT_TRUE(watches.back()->Read(&first)) << "watch " << i;
  }

  constexpr auto kCallDeadline = std::chrono::seconds(3);
  auto channel = Connect(grpc_port_);
  const std::string bearer = Bearer(Audience());
  for (int i = 0; i < 10; ++i) {
    grpc::ClientContext check_ctx;
    check_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    health::HealthCheckResponse check;
    const grpc::Status checked =
        health::Health::NewStub(channel)->Check(&check_ctx, health::HealthCheckRequest(), &check);
    EXPECT_TRUE(checked.ok()) << checked.error_code() << " " << checked.error_message();
    EXPECT_EQ(check.status(), health::HealthCheckResponse::SERVING);

    grpc::ClientContext call_ctx;
    call_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    call_ctx.AddMetadata("authorization", bearer);
    const grpc::Status called = GetParam().authorised_call(channel, &call_ctx);
    EXPECT_EQ(called.error_code(), GetParam().authorised_code) << called.error_message();
  }
  for (auto& ctx : watch_ctx) ctx->TryCancel();
  for (auto& s : streams) s.ctx->TryCancel();
  EXPECT_TRUE(server_.Running()) << server_.Output();
}

// Each service accepts only tokens for itself by default: a token for
// another service, or for the audience the three once shared, is refused.
TEST_P(ServerTest, ByDefaultATokenIsForOneServiceOnly) {
  auto channel = Connect(grpc_port_);
  for (const std::string audience :
       {"ulticode", "ulticode-auth", "ulticode-app", "ulticode-admin"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx.AddMetadata("authorization", Bearer(audience));
    const grpc::Status s = GetParam().authorised_call(channel, &ctx);
    if (audience == Audience()) {
      EXPECT_EQ(s.error_code(), GetParam().authorised_code) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << audience;
      EXPECT_EQ(s.error_message(),
                absl::StrCat("invalid token: wrong audience (want \"", Audience(), "\")"));
    }
  }
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
                 "ulticode_retention_last_run_timestamp_seconds{table=\"idempotency_keys\"}"},
                GetLoginPolicy},
        Service{"app/ulticode-app",
                "ulticode.app.v1.AppService",
                {"ulticode_outbox_rows{owner=\"app\",state=\"DEAD\"} 0"},
                GetUnknownProblem,
                grpc::StatusCode::NOT_FOUND},
        Service{
            "admin/ulticode-admin",
            "ulticode.admin.v1.AdminService",
            {"ulticode_inbox_rows{status=\"PENDING\"} 0", "ulticode_inbox_rows{status=\"DEAD\"} 0",
             "ulticode_inbox_oldest_pending_age_seconds 0",
             "ulticode_inbox_oldest_lease_age_seconds 0",
             "ulticode_inbox_oldest_retry_age_seconds 0", "ulticode_poison_entries 0",
             "ulticode_retention_last_run_timestamp_seconds{table=\"consumer_inbox\"}",
             "ulticode_retention_last_run_timestamp_seconds{table=\"poison_events\"}"},
            GetPipelineStatus}),
    [](const ::testing::TestParamInfo<Service>& info) {
      return info.param.grpc_name.substr(9, info.param.grpc_name.find('.', 9) - 9);
    });

}  // namespace
}  // namespace ulticode
