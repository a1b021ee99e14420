#include "tests/support/mesh.h"

#include <signal.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "gtest/gtest.h"
#include "tests/support/client_channel.h"
#include "tests/support/tokens.h"
#include "tools/bootstrap/bootstrap.h"

namespace ulticode::testing {
namespace {

const char* Binary(Service s) {
  switch (s) {
    case Service::kAuth:
      return "ulticode-auth";
    case Service::kApp:
      return "ulticode-app";
    case Service::kAdmin:
      return "ulticode-admin";
  }
  return "";
}

// Relative to the build directory.
const char* BinaryPath(Service s) {
  switch (s) {
    case Service::kAuth:
      return "auth/ulticode-auth";
    case Service::kApp:
      return "app/ulticode-app";
    case Service::kAdmin:
      return "admin/ulticode-admin";
  }
  return "";
}

}  // namespace

Mesh::Mesh(const PgEndpoint& pg, const RedisEndpoint& redis, MeshOptions options)
    : pg_(pg), redis_(redis), options_(std::move(options)) {
  const std::string suffix = RandomSuffix();
  auth_stream_ = absl::StrCat(options_.prefix, ":", suffix, ":audit:auth");
  app_stream_ = absl::StrCat(options_.prefix, ":", suffix, ":audit:app");
  if (options_.redis_addr.empty())
    options_.redis_addr = absl::StrCat(redis_.host, ":", redis_.port);
  if (options_.tls) {
    auto r =
        RunServersSh(absl::StrCat("ulticode_tls_ca ", keys_.dir(), "/tls && ulticode_tls_cert ",
                                  keys_.dir(), "/tls server IP:127.0.0.1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  if (!options_.least_privilege) {
    auth_db_ = CreateScratchDatabase(pg_, options_.prefix + "_auth");
    app_db_ = CreateScratchDatabase(pg_, options_.prefix + "_app");
    admin_db_ = CreateScratchDatabase(PgOf(Service::kAdmin), options_.prefix + "_admin");
    return;
  }
  auth_db_ = absl::StrCat(options_.prefix, "_", suffix, "_auth");
  app_db_ = absl::StrCat(options_.prefix, "_", suffix, "_app");
  admin_db_ = absl::StrCat(options_.prefix, "_", suffix, "_admin");
  redis::Options ro;
  ro.host = redis_.host;
  ro.user = redis_.user;
  ro.password = redis_.password;
  EXPECT_TRUE(redis::ParseAddress(options_.redis_addr, &ro).ok());
  redis::Client redis_admin(ro);
  std::vector<bootstrap::RedisUser> users;
  for (Service s : {Service::kAuth, Service::kApp, Service::kAdmin}) {
    Credentials& c = creds_[static_cast<int>(s)];
    c = {bootstrap::NewPassword(), bootstrap::NewPassword(),
         absl::StrCat(options_.prefix, "-", suffix, "-", Binary(s)), bootstrap::NewPassword()};
    const std::string& db = DbName(s);
    pg::ConnectOptions super;
    super.conninfo = absl::StrCat(PgOf(s).Server(), " user=", PgOf(s).user);
    pg::ConnectOptions in_postgres = super;
    in_postgres.conninfo += " dbname=postgres";
    auto conn = pg::Connection::Connect(in_postgres);
    EXPECT_TRUE(conn.ok()) << conn.status();
    if (conn.ok()) {
      EXPECT_TRUE(bootstrap::BootstrapDatabase(**conn, super,
                                               {db, db + "_migrator", db + "_runtime"},
                                               c.migrator_password, c.runtime_password)
                      .ok());
    }
    bootstrap::RedisUser u{c.redis_user, bootstrap::RedisRole::kOwner, c.redis_password, {}};
    if (s == Service::kAuth) u.streams = {auth_stream_};
    if (s == Service::kApp) u.streams = {app_stream_};
    if (s == Service::kAdmin)
      u = {c.redis_user,
           bootstrap::RedisRole::kAdmin,
           c.redis_password,
           {auth_stream_, app_stream_}};
    users.push_back(std::move(u));
  }
  EXPECT_TRUE(bootstrap::ApplyAcl(redis_admin, users).ok());
  // Keep the users across a restart of a Redis started with an ACL file
  // (a wipe in the chaos test); a Redis without one has nothing to save to.
  (void)redis_admin.Command({"ACL", "SAVE"});
}

std::string Mesh::Secret(const std::string& name, const std::string& value) const {
  const std::string path = absl::StrCat(keys_.dir(), "/", name);
  EXPECT_TRUE(crypto::WriteSecretFile(path, value).ok()) << path;
  return path;
}

const std::string& Mesh::DbName(Service service) const {
  return service == Service::kAuth ? auth_db_ : service == Service::kApp ? app_db_ : admin_db_;
}

std::string Mesh::RuntimeRole(Service service) const {
  return absl::StrCat(DbName(service), "_runtime");
}

std::string Mesh::RuntimePassword(Service service) const {
  return creds_[static_cast<int>(service)].runtime_password;
}

std::string Mesh::RedisUser(Service service) const {
  return creds_[static_cast<int>(service)].redis_user;
}

std::string Mesh::RedisPassword(Service service) const {
  return creds_[static_cast<int>(service)].redis_password;
}

std::vector<std::string> Mesh::Secrets() const {
  std::vector<std::string> out;
  for (const Credentials& c : creds_) {
    for (const std::string* s : {&c.migrator_password, &c.runtime_password, &c.redis_password}) {
      if (!s->empty()) out.push_back(*s);
    }
  }
  for (const crypto::SigningKey* k : {&keys_.auth(), &keys_.app(), &keys_.admin()}) {
    out.push_back(k->PrivatePem().value());
  }
  return out;
}

Mesh::~Mesh() {
  for (auto& list : replicas_) {
    for (auto& r : list) {
      if (r.process && r.process->Running()) r.process->Stop(SIGKILL, std::chrono::seconds(5));
    }
  }
}

void Mesh::AppendArgs(Service service, const std::vector<std::string>& args) {
  std::vector<std::string>& extra = service == Service::kAuth  ? options_.auth_args
                                    : service == Service::kApp ? options_.app_args
                                                               : options_.admin_args;
  extra.insert(extra.end(), args.begin(), args.end());
}

Mesh::Replica& Mesh::Get(Service service, int replica) {
  auto& list = replicas_[static_cast<int>(service)];
  while (static_cast<int>(list.size()) <= replica) {
    Replica r;
    r.grpc_port = FreePort();
    r.metrics_port = FreePort();
    list.push_back(std::move(r));
  }
  return list[replica];
}

const PgEndpoint& Mesh::PgOf(Service service) const {
  return service == Service::kAdmin && options_.admin_pg ? *options_.admin_pg : pg_;
}

std::string Mesh::Dsn(Service service) const {
  switch (service) {
    case Service::kAuth:
      return pg_.ConnInfo(auth_db_);
    case Service::kApp:
      return pg_.ConnInfo(app_db_);
    case Service::kAdmin:
      return PgOf(service).ConnInfo(admin_db_);
  }
  return "";
}

CommandResult Mesh::MigrateOnly(Service service) {
  const Credentials& c = creds_[static_cast<int>(service)];
  const std::string& db = DbName(service);
  // As the init container gets it: the service's whole configuration, but
  // only the migration role's password is there; every other file the
  // server reads is missing in the init container.
  const std::string missing = keys_.dir() + "/not-mounted";
  return RunCommand(absl::StrCat(
      "ULTICODE_PG_PASSWORD_FILE=", missing, " ULTICODE_REDIS_PASSWORD_FILE=", missing,
      " ULTICODE_TLS_CERT_FILE=", missing, " ULTICODE_TLS_KEY_FILE=", missing,
      " ULTICODE_TLS_CLIENT_CA_FILE=", missing, " ULTICODE_PUBLIC_KEYS_FILE=", missing,
      " ULTICODE_JWKS_FILE=", missing, " ULTICODE_AUDIT_SIGNING_KEY_FILE=", missing,
      " ULTICODE_AUDIT_SIGNING_KEY_FILE=", missing, " ULTICODE_REDIS_USER=", c.redis_user, " ",
      BinDir(), "/", BinaryPath(service),
      " --migrate=only --log-level=warn '--pg-dsn=", PgOf(service).Server(), " user=", db,
      "_runtime dbname=", db, "' --pg-migrate-user=", db, "_migrator --pg-migrate-password-file=",
      Secret(db + "_migrator.password", c.migrator_password)));
}

bool Mesh::Start(Service service, int replica, std::string* error) {
  if (options_.migrate_step) {
    CommandResult init = MigrateOnly(service);
    if (init.exit_code != 0) {
      *error = absl::StrCat("--migrate=only exited ", init.exit_code, ":\n", init.output);
      return false;
    }
  }
  return StartServer(service, replica, error);
}

bool Mesh::StartServer(Service service, int replica, std::string* error) {
  Replica& r = Get(service, replica);
  std::vector<std::string> argv = {
      BinDir() + "/" + BinaryPath(service),
      absl::StrCat("--grpc-listen=127.0.0.1:", r.grpc_port),
      absl::StrCat("--metrics-listen=127.0.0.1:", r.metrics_port),
      "--redis-addr=" + options_.redis_addr,
      "--log-level=warn",
      "--public-keys-file=" + keys_.public_keys_file(),
      "--jwks-file=" + SharedTestTokens().jwks_file(),
      std::string("--jwt-issuer=") + kTestIssuer,
      std::string("--jwt-audience=") + kTestAudience,
  };
  if (options_.tls) {
    argv.push_back("--tls-cert-file=" + keys_.dir() + "/tls/server.pem");
    argv.push_back("--tls-key-file=" + keys_.dir() + "/tls/server.key");
    argv.push_back(absl::StrCat("--health-listen=127.0.0.1:", FreePort()));
  } else {
    argv.push_back("--grpc-plaintext");
  }
  const std::string name = absl::StrCat(Binary(service), "-", replica);
  if (options_.least_privilege) {
    const Credentials& c = creds_[static_cast<int>(service)];
    const std::string& db = DbName(service);
    argv.push_back(
        absl::StrCat("--pg-dsn=", PgOf(service).Server(), " user=", db, "_runtime dbname=", db));
    argv.push_back("--pg-password-file=" + Secret(db + "_runtime.password", c.runtime_password));
    if (options_.migrate_step) {
      argv.push_back("--migrate=verify");
    } else {
      argv.push_back("--pg-migrate-user=" + db + "_migrator");
      argv.push_back("--pg-migrate-password-file=" +
                     Secret(db + "_migrator.password", c.migrator_password));
    }
    argv.push_back("--redis-user=" + c.redis_user);
    argv.push_back("--redis-password-file=" +
                   Secret(c.redis_user + ".redis-password", c.redis_password));
  } else {
    argv.push_back("--pg-dsn=" + Dsn(service));
    argv.push_back("--redis-user=" + redis_.user);
    argv.push_back("--redis-password-file=" + redis_.password_file);
  }
  const std::vector<std::string>* extra = nullptr;
  switch (service) {
    case Service::kAuth:
      argv.push_back("--dispatch-stream=" + auth_stream_);
      argv.push_back("--audit-signing-key-file=" + keys_.KeyFile("auth"));
      argv.push_back("--log-keys-file=" + keys_.LogVerifierKeyFile());
      extra = &options_.auth_args;
      break;
    case Service::kApp:
      argv.push_back("--dispatch-stream=" + app_stream_);
      argv.push_back("--audit-signing-key-file=" + keys_.KeyFile("app"));
      argv.push_back("--log-keys-file=" + keys_.LogVerifierKeyFile());
      extra = &options_.app_args;
      break;
    case Service::kAdmin:
      argv.push_back("--inbox-auth-stream=" + auth_stream_);
      argv.push_back("--inbox-app-stream=" + app_stream_);
      argv.push_back("--inbox-consumer-name=" + name);
      argv.push_back("--consumer-instance-id=" + name);
      argv.push_back("--audit-signing-key-file=" + keys_.KeyFile("admin"));
      argv.push_back("--log-signing-key-file=" + keys_.KeyFile("log"));
      argv.push_back(absl::StrCat("--log-origin=", TestKeys::kLogOrigin));
      extra = &options_.admin_args;
      break;
  }
  argv.insert(argv.end(), extra->begin(), extra->end());
  r.process = std::make_unique<ChildProcess>();
  if (!r.process->Start(argv)) {
    *error = "cannot start " + name;
    return false;
  }
  const bool up = WaitFor([&] { return PortOpen(r.grpc_port) || !r.process->Running(); },
                          std::chrono::seconds(60));
  if (!up || !r.process->Running()) {
    *error = absl::StrCat(name, " did not come up:\n", r.process->Output());
    return false;
  }
  return true;
}

void Mesh::Kill(Service service, int replica) {
  Replica& r = Get(service, replica);
  if (r.process && r.process->Running()) r.process->Stop(SIGKILL, std::chrono::seconds(5));
}

int Mesh::Terminate(Service service, int replica) {
  Replica& r = Get(service, replica);
  if (!r.process || !r.process->Running()) return -1;
  return r.process->Stop(SIGTERM, std::chrono::seconds(30));
}

pid_t Mesh::Pid(Service service, int replica) {
  Replica& r = Get(service, replica);
  return r.process ? r.process->pid() : -1;
}

bool Mesh::Running(Service service, int replica) {
  Replica& r = Get(service, replica);
  return r.process && r.process->Running();
}

std::string Mesh::Output(Service service, int replica) {
  Replica& r = Get(service, replica);
  return r.process ? r.process->Output() : "";
}

std::shared_ptr<grpc::Channel> Mesh::Channel(Service service, int replica) {
  grpc::ChannelArguments args = ReconnectingChannelArguments();
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options_.tls) {
    grpc::SslCredentialsOptions ssl;
    std::ifstream ca(keys_.dir() + "/tls/ca.pem");
    std::stringstream pem;
    pem << ca.rdbuf();
    ssl.pem_root_certs = pem.str();
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", Get(service, replica).grpc_port),
                                   creds, args);
}

int Mesh::grpc_port(Service service, int replica) { return Get(service, replica).grpc_port; }
int Mesh::metrics_port(Service service, int replica) { return Get(service, replica).metrics_port; }

}  // namespace ulticode::testing
