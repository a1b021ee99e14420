// Encrypted links to the stores, as deployed (docs/security.md):
// - PostgreSQL with ssl=on and a certificate from a private CA: libpq with
//   sslmode=verify-full connects, and refuses another CA or a name the
//   certificate does not hold.
// - Redis: hiredis 0.14 has no TLS, so a service talks to a local stunnel
//   client (the sidecar) that speaks mutual TLS to Redis's tls-port; Redis
//   has no plaintext port at all.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/pg_server.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"

namespace ulticode {
namespace {

using testing::FreePort;
using testing::RunCommand;
using testing::SourceDir;
using testing::WaitFor;

class StoreTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ulticode-storetls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(Servers("ulticode_tls_ca " + dir_ + "/ca && ulticode_tls_cert " + dir_ +
                        "/ca pg-server IP:127.0.0.1 && ulticode_tls_cert " + dir_ +
                        "/ca redis-server IP:127.0.0.1 && ulticode_tls_cert " + dir_ +
                        "/ca sidecar DNS:sidecar && ulticode_tls_ca " + dir_ + "/other"));
  }
  void TearDown() override { RunCommand("rm -rf " + dir_); }

  bool Servers(const std::string& body) {
    auto r = testing::RunServersSh(body);
    EXPECT_EQ(r.exit_code, 0) << body << "\n" << r.output;
    return r.exit_code == 0;
  }

  std::string dir_;
};

TEST_F(StoreTlsTest, PostgresVerifyFullConnectsAndRefusesAnotherCaOrName) {
  testing::PgServer pg;
  std::string error;
  ASSERT_TRUE(pg.Start(&error)) << error;
  ASSERT_TRUE(Servers("ulticode_pg_ssl " + pg.dir() + "/pg " + dir_ + "/ca"));
  auto connect = [&](const std::string& host, const std::string& ca) {
    pg::ConnectOptions o;
    o.conninfo =
        absl::StrCat("host=", host, " port=", pg.endpoint().port,
                     " user=postgres dbname=postgres sslmode=verify-full sslrootcert=", ca);
    return pg::Connection::Connect(o);
  };
  auto good = connect("127.0.0.1", dir_ + "/ca/ca.pem");
  ASSERT_TRUE(good.ok()) << good.status();
  auto ssl = (*good)->Execute(
      pg::Statement{"ssl", "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()"});
  ASSERT_TRUE(ssl.ok());
  EXPECT_EQ(ssl->GetString(0, 0), "true");
  auto other_ca = connect("127.0.0.1", dir_ + "/other/ca.pem");
  EXPECT_FALSE(other_ca.ok());
  EXPECT_NE(std::string(other_ca.status().message()).find("certificate verify failed"),
            std::string::npos)
      << other_ca.status();
  auto wrong_name = connect("localhost", dir_ + "/ca/ca.pem");
  EXPECT_FALSE(wrong_name.ok()) << "the certificate names 127.0.0.1 only";
}

TEST_F(StoreTlsTest, RedisOverMutualTlsThroughAStunnelSidecar) {
  const int tls_port = FreePort(), sidecar_port = FreePort();
  const std::string ca = dir_ + "/ca";
  testing::ChildProcess redis;
  ASSERT_TRUE(
      redis.Start({"redis-server", "--port", "0", "--tls-port", absl::StrCat(tls_port), "--bind",
                   "127.0.0.1", "--save", "", "--appendonly", "no", "--tls-cert-file",
                   ca + "/redis-server.pem", "--tls-key-file", ca + "/redis-server.key",
                   "--tls-ca-cert-file", ca + "/ca.pem", "--tls-auth-clients", "yes"}));
  const std::string conf = dir_ + "/stunnel.conf";
  ASSERT_EQ(RunCommand(absl::StrCat("printf 'foreground = yes\\npid =\\n[redis]\\nclient = yes\\n",
                                    "accept = 127.0.0.1:", sidecar_port, "\\nconnect = 127.0.0.1:",
                                    tls_port, "\\nCAfile = ", ca, "/ca.pem\\nverifyChain = yes\\n",
                                    "checkIP = 127.0.0.1\\ncert = ", ca,
                                    "/sidecar.pem\\nkey = ", ca, "/sidecar.key\\n' > ", conf))
                .exit_code,
            0);
  testing::ChildProcess sidecar;
  ASSERT_TRUE(sidecar.Start({"stunnel4", conf}));
  redis::Options o;
  o.host = "127.0.0.1";
  o.port = sidecar_port;
  o.connect_timeout = absl::Milliseconds(500);
  o.command_timeout = absl::Seconds(2);
  redis::Client client(o);
  ASSERT_TRUE(WaitFor([&] { return client.Ping().ok(); }, std::chrono::seconds(10)))
      << sidecar.Output() << redis.Output();
  auto id = client.Command({"XADD", "audit:auth", "*", "k", "v"});
  EXPECT_TRUE(id.ok()) << id.status();
  // Without the sidecar there is no way in: the TLS port refuses plaintext.
  redis::Options direct = o;
  direct.port = tls_port;
  redis::Client plain(direct);
  EXPECT_FALSE(plain.Ping().ok());
}

}  // namespace
}  // namespace ulticode
