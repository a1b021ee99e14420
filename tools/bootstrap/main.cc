// ulticode-bootstrap: creates the least-privilege setup of a deployment (see
// bootstrap.h) from secrets in one directory, making the missing ones:
//
//   <secrets>/pg-<role>.password      every service role (migrator, runtime)
//   <secrets>/redis-<user>.password   auth, app, admin, ops
//
// --pg-dsn reaches the cluster as a superuser (password from PGPASSFILE or
// --pg-password-file); --redis-acl-file writes the ACL file Redis loads
// (default user off). Run again at any time: it is idempotent.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/log/log.h"
#include "tools/bootstrap/bootstrap.h"

namespace {

using namespace ulticode;

constexpr const char* kServices[] = {"auth", "app", "admin"};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "ulticode-bootstrap: %s\n", std::string(s.message()).c_str());
  return 1;
}

absl::Status BootstrapPostgres(const std::string& dsn, const std::string& password_file,
                               const std::string& secrets) {
  pg::ConnectOptions connect;
  connect.conninfo = dsn;
  connect.application_name = "ulticode-bootstrap";
  if (!password_file.empty()) {
    auto password = crypto::ReadSecretFile(password_file);
    if (!password.ok()) return password.status();
    connect.password = *password;
  }
  auto superuser = pg::Connection::Connect(connect);
  if (!superuser.ok()) return superuser.status();
  if (!connect.password.empty()) {
    // A new cluster trusts loopback until pg_hba asks for SCRAM: give the
    // superuser its password first.
    if (auto s = bootstrap::SetOwnPassword(**superuser, connect.password); !s.ok()) return s;
  }
  for (const char* svc : kServices) {
    bootstrap::ServiceDatabase db{absl::StrCat("ulticode_", svc), absl::StrCat(svc, "_migrator"),
                                  absl::StrCat(svc, "_runtime")};
    auto migrator =
        bootstrap::EnsureSecretFile(absl::StrCat(secrets, "/pg-", db.migrator, ".password"));
    if (!migrator.ok()) return migrator.status();
    auto runtime =
        bootstrap::EnsureSecretFile(absl::StrCat(secrets, "/pg-", db.runtime, ".password"));
    if (!runtime.ok()) return runtime.status();
    if (auto s = bootstrap::BootstrapDatabase(**superuser, connect, db, *migrator, *runtime);
        !s.ok()) {
      return s;
    }
    log::Info("bootstrap", "database ready",
              {{"database", db.database}, {"migrator", db.migrator}, {"runtime", db.runtime}});
  }
  return absl::OkStatus();
}

absl::Status WriteAclFile(const std::string& path, const std::string& secrets) {
  std::vector<bootstrap::RedisUser> users;
  for (const auto& [name, role] : std::vector<std::pair<std::string, bootstrap::RedisRole>>{
           {"auth", bootstrap::RedisRole::kOwner},
           {"app", bootstrap::RedisRole::kOwner},
           {"admin", bootstrap::RedisRole::kAdmin},
           {"ops", bootstrap::RedisRole::kOps}}) {
    auto password =
        bootstrap::EnsureSecretFile(absl::StrCat(secrets, "/redis-", name, ".password"));
    if (!password.ok()) return password.status();
    bootstrap::RedisUser u{name, role, *password, {}};
    if (role == bootstrap::RedisRole::kOwner) u.streams = {absl::StrCat("audit:", name)};
    if (role == bootstrap::RedisRole::kAdmin) u.streams = {"audit:auth", "audit:app"};
    users.push_back(std::move(u));
  }
  // Holds only password hashes, but keep it private all the same.
  return crypto::WriteSecretFile(path, bootstrap::AclFile(users));
}

}  // namespace

int main(int argc, char** argv) {
  std::string secrets, pg_dsn, pg_password_file, acl_file;
  config::Flags flags("ulticode-bootstrap",
                      "Creates per-service PostgreSQL roles and databases and the Redis ACL file.");
  flags.String("secrets-dir", &secrets, "directory of the password files (made if missing)");
  flags.Require("secrets-dir");
  flags.String("pg-dsn", &pg_dsn, "superuser conninfo of the cluster (empty: skip PostgreSQL)");
  flags.String("pg-password-file", &pg_password_file,
               "the superuser's password file; the superuser's password is (re)set to it");
  flags.String("redis-acl-file", &acl_file, "ACL file to write (empty: skip Redis)");
  config::ParseOrExit(flags, argc, argv);
  if (::mkdir(secrets.c_str(), 0700) != 0 && errno != EEXIST) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot create ", secrets)));
  }
  if (!pg_dsn.empty()) {
    if (auto s = BootstrapPostgres(pg_dsn, pg_password_file, secrets); !s.ok()) return Fail(s);
  }
  if (!acl_file.empty()) {
    if (auto s = WriteAclFile(acl_file, secrets); !s.ok()) return Fail(s);
  }
  return 0;
}
