// TLS on the gRPC server, against a real server and real certificates made
// by scripts/lib/servers.sh (openssl): mutual TLS refuses a client without a
// certificate; a certificate rotated on disk is served without a restart;
// grpc.health.v1.Health stays reachable in plaintext on its own port.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using testing::RunCommand;
using testing::SourceDir;
using testing::WaitFor;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ulticode-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(Servers("ulticode_tls_ca " + dir_ + "/ca1 && ulticode_tls_cert " + dir_ +
                        "/ca1 server IP:127.0.0.1 && ulticode_tls_cert " + dir_ +
                        "/ca1 client DNS:client"));
    metrics_ = metrics::Metrics::Unexposed("tls");
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
    RunCommand("rm -rf " + dir_);
  }

  bool Servers(const std::string& body) {
    auto r = testing::RunServersSh(body);
    EXPECT_EQ(r.exit_code, 0) << body << "\n" << r.output;
    return r.exit_code == 0;
  }

  void Start(bool mutual) {
    server::ServerOptions o = server::PlaintextOptions("127.0.0.1:0", 4);
    o.tls.cert_file = dir_ + "/ca1/server.pem";
    o.tls.key_file = dir_ + "/ca1/server.key";
    if (mutual) o.tls.client_ca_file = dir_ + "/ca1/ca.pem";
    o.tls.refresh = absl::Seconds(1);
    o.health_listen = "127.0.0.1:0";
    server_ = std::make_unique<server::GrpcServer>(o, metrics_->registry());
    ASSERT_TRUE(server_->Start().ok());
    server_->SetServing(true);
  }

  // One Health/Check on a fresh channel: OK, or the status.
  grpc::Status Check(std::shared_ptr<grpc::ChannelCredentials> creds, int port) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // a new connection every time
    auto stub =
        Health::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    HealthCheckResponse resp;
    grpc::Status s = stub->Check(&ctx, HealthCheckRequest(), &resp);
    if (s.ok() && resp.status() != HealthCheckResponse::SERVING) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "not SERVING");
    }
    return s;
  }
  std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca, bool with_cert) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Read(ca);
    if (with_cert) {
      o.pem_cert_chain = Read(dir_ + "/ca1/client.pem");
      o.pem_private_key = Read(dir_ + "/ca1/client.key");
    }
    return grpc::SslCredentials(o);
  }

  std::string dir_;
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<server::GrpcServer> server_;
};

TEST_F(TlsTest, MutualTlsRefusesAClientWithoutACertificate) {
  Start(/*mutual=*/true);
  const std::string ca = dir_ + "/ca1/ca.pem";
  EXPECT_TRUE(Check(Tls(ca, true), server_->port()).ok());
  EXPECT_FALSE(Check(Tls(ca, false), server_->port()).ok()) << "no client certificate";
  EXPECT_FALSE(Check(grpc::InsecureChannelCredentials(), server_->port()).ok()) << "plaintext";
  // Probes: plaintext health on its own port, and nothing else there.
  EXPECT_TRUE(Check(grpc::InsecureChannelCredentials(), server_->health_port()).ok());
}

TEST_F(TlsTest, ARotatedCertificateIsServedWithoutARestart) {
  Start(/*mutual=*/false);
  ASSERT_TRUE(Servers("ulticode_tls_ca " + dir_ + "/ca2 && ulticode_tls_cert " + dir_ +
                      "/ca2 server IP:127.0.0.1"));
  const std::string ca1 = dir_ + "/ca1/ca.pem", ca2 = dir_ + "/ca2/ca.pem";
  EXPECT_TRUE(Check(Tls(ca1, false), server_->port()).ok());
  EXPECT_FALSE(Check(Tls(ca2, false), server_->port()).ok()) << "not rotated yet";
  // The operator drops a certificate from another CA over the served files.
  ASSERT_EQ(RunCommand("cp " + dir_ + "/ca2/server.key " + dir_ + "/ca1/server.key.tmp && mv " +
                       dir_ + "/ca1/server.key.tmp " + dir_ + "/ca1/server.key && cp " + dir_ +
                       "/ca2/server.pem " + dir_ + "/ca1/server.pem.tmp && mv " + dir_ +
                       "/ca1/server.pem.tmp " + dir_ + "/ca1/server.pem")
                .exit_code,
            0);
  EXPECT_TRUE(WaitFor([&] { return Check(Tls(ca2, false), server_->port()).ok(); },
                      std::chrono::seconds(15)))
      << "the new certificate is served within the refresh interval";
  EXPECT_FALSE(Check(Tls(ca1, false), server_->port()).ok()) << "the old one is gone";
}

}  // namespace
}  // namespace ulticode
