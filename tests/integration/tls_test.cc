// TLS on the gRPC server, against a real server and real certificates made
// by scripts/lib/servers.sh (openssl): mutual TLS refuses a client without a
// certificate; a certificate rotated on disk is served without a restart;
// grpc.health.v1.Health stays reachable in plaintext on its own port; the
// test clients' channels wait out a slow handshake.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/client_channel.h"
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

// A TCP relay to 127.0.0.1:`target` that holds each new connection for
// `delay` before it forwards a byte: a server whose handshake is slow, as
// on a loaded machine.
class SlowRelay {
 public:
  SlowRelay(int target, std::chrono::milliseconds delay) : target_(target), delay_(delay) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len);
    listen(listen_fd_, 8);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~SlowRelay() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    for (std::thread& t : pipes_) t.join();
    close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  void Accept() {
    for (;;) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      pipes_.emplace_back([this, client] { Pipe(client); });
    }
  }
  void Pipe(int client) {
    std::this_thread::sleep_for(delay_);
    const int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_);
    if (connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      char buf[16384];
      while (!stop_ && poll(fds, 2, 100) >= 0) {
        bool open = true;
        for (int i = 0; i < 2 && open; ++i) {
          if (fds[i].revents == 0) continue;
          const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
          open = n > 0 && write(fds[1 - i].fd, buf, n) == n;
        }
        if (!open) break;
      }
    }
    close(server);
    close(client);
  }

  int target_;
  std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> pipes_;
};

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
  grpc::Status Check(std::shared_ptr<grpc::ChannelCredentials> creds, int port,
                     grpc::ChannelArguments args = {}) {
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

// The mesh tests' clients (tests/support/client_channel.h) reconnect fast yet
// give a handshake gRPC's full connect timeout: a server that answers 500 ms
// late is slow, not down.
TEST_F(TlsTest, TestClientsWaitOutASlowHandshake) {
  Start(/*mutual=*/false);
  SlowRelay relay(server_->port(), std::chrono::milliseconds(500));
  EXPECT_TRUE(
      Check(Tls(dir_ + "/ca1/ca.pem", false), relay.port(), testing::ReconnectingChannelArguments())
          .ok());
}

}  // namespace
}  // namespace ulticode
