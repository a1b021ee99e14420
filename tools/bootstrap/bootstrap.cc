#include "tools/bootstrap/bootstrap.h"

#include <libpq-fe.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"

namespace ulticode::bootstrap {
namespace {

absl::Status CheckName(const std::string& what, const std::string& name) {
  if (name.empty() || name.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": must be 1..63 characters"));
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return absl::InvalidArgumentError(absl::StrCat(what, " \"", name, "\": only [a-z0-9_]"));
    }
  }
  return absl::OkStatus();
}

// Runs `sql` (already free of client values other than checked names and
// SCRAM verifiers) as a one-off statement.
absl::Status Run(pg::Connection& conn, const std::string& name, const std::string& sql) {
  return conn.Execute(pg::Statement{name.c_str(), sql.c_str(), absl::Seconds(30)}).status();
}

absl::StatusOr<std::string> ScramVerifier(pg::Connection& conn, const std::string& role,
                                          const std::string& password) {
  char* verifier =
      PQencryptPasswordConn(conn.raw(), password.c_str(), role.c_str(), "scram-sha-256");
  if (verifier == nullptr) {
    return absl::InternalError(absl::StrCat("cannot compute a SCRAM verifier for role ", role));
  }
  std::string out(verifier);
  PQfreemem(verifier);
  return out;
}

absl::Status EnsureRole(pg::Connection& conn, const std::string& role,
                        const std::string& password) {
  RETURN_IF_ERROR(
      Run(conn, "bootstrap.create_role",
          absl::StrCat("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '", role,
                       "') THEN CREATE ROLE \"", role, "\"; END IF; END$$")));
  ASSIGN_OR_RETURN(const std::string verifier, ScramVerifier(conn, role, password));
  return Run(conn, "bootstrap.alter_role",
             absl::StrCat("ALTER ROLE \"", role,
                          "\" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                          "NOBYPASSRLS PASSWORD '",
                          verifier, "'"));
}

// Objects a superuser created before roles existed (an older setup) pass to
// the migrator, so its migrations can alter them.
std::string HandOverSql(const std::string& migrator) {
  return absl::StrReplaceAll(
      "DO $$DECLARE r record; BEGIN"
      " FOR r IN SELECT c.oid::regclass AS rel FROM pg_class c"
      "   JOIN pg_namespace n ON n.oid = c.relnamespace"
      "   WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S')"
      "     AND pg_get_userbyid(c.relowner) <> '{m}'"
      "     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass"
      "       AND d.objid = c.oid AND d.deptype IN ('a', 'i'))"
      " LOOP EXECUTE format('ALTER TABLE %s OWNER TO %I', r.rel, '{m}'); END LOOP;"
      " FOR r IN SELECT p.oid::regprocedure AS fn FROM pg_proc p"
      "   JOIN pg_namespace n ON n.oid = p.pronamespace"
      "   WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> '{m}'"
      " LOOP EXECUTE format('ALTER FUNCTION %s OWNER TO %I', r.fn, '{m}'); END LOOP;"
      " END$$",
      {{"{m}", migrator}});
}

std::string Sha256Hex(const std::string& s) { return absl::BytesToHexString(crypto::Sha256(s)); }

}  // namespace

std::string NewPassword() {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof(bytes));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::StatusOr<std::string> EnsureSecretFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return crypto::ReadSecretFile(path);
  const std::string password = NewPassword();
  RETURN_IF_ERROR(crypto::WriteSecretFile(path, password + "\n"));
  return password;
}

absl::Status BootstrapDatabase(pg::Connection& superuser, const pg::ConnectOptions& connect,
                               const ServiceDatabase& s, const std::string& migrator_password,
                               const std::string& runtime_password) {
  RETURN_IF_ERROR(CheckName("database", s.database));
  RETURN_IF_ERROR(CheckName("migration role", s.migrator));
  RETURN_IF_ERROR(CheckName("runtime role", s.runtime));
  RETURN_IF_ERROR(EnsureRole(superuser, s.migrator, migrator_password));
  RETURN_IF_ERROR(EnsureRole(superuser, s.runtime, runtime_password));
  ASSIGN_OR_RETURN(pg::Result exists,
                   superuser.Execute(pg::Statement{"bootstrap.db_exists",
                                                   "SELECT 1 FROM pg_database WHERE datname = $1"},
                                     {pg::Text(s.database)}));
  if (exists.empty()) {
    RETURN_IF_ERROR(
        Run(superuser, "bootstrap.create_db",
            absl::StrCat("CREATE DATABASE \"", s.database, "\" OWNER \"", s.migrator, "\"")));
  }
  const std::string db = absl::StrCat("\"", s.database, "\"");
  RETURN_IF_ERROR(Run(superuser, "bootstrap.db_owner",
                      absl::StrCat("ALTER DATABASE ", db, " OWNER TO \"", s.migrator, "\"")));
  RETURN_IF_ERROR(Run(superuser, "bootstrap.db_revoke",
                      absl::StrCat("REVOKE ALL ON DATABASE ", db, " FROM PUBLIC")));
  RETURN_IF_ERROR(Run(superuser, "bootstrap.db_connect",
                      absl::StrCat("GRANT CONNECT ON DATABASE ", db, " TO \"", s.migrator, "\", \"",
                                   s.runtime, "\"")));
  pg::ConnectOptions in_db = connect;
  in_db.conninfo = absl::StrCat(connect.conninfo, " dbname=", s.database);
  ASSIGN_OR_RETURN(std::unique_ptr<pg::Connection> conn, pg::Connection::Connect(in_db));
  RETURN_IF_ERROR(Run(*conn, "bootstrap.hand_over", HandOverSql(s.migrator)));
  // PUBLIC keeps USAGE on schema public (PostgreSQL 15 gives CREATE only to
  // the database owner, the migrator).
  return absl::OkStatus();
}

absl::Status SetOwnPassword(pg::Connection& superuser, const std::string& password) {
  const std::string role = PQuser(superuser.raw());
  RETURN_IF_ERROR(CheckName("superuser", role));
  ASSIGN_OR_RETURN(const std::string verifier, ScramVerifier(superuser, role, password));
  return Run(superuser, "bootstrap.own_password",
             absl::StrCat("ALTER ROLE \"", role, "\" PASSWORD '", verifier, "'"));
}

std::vector<std::string> AclRules(const RedisUser& user) {
  std::vector<std::string> rules = {
      "reset",         "on",    absl::StrCat("#", Sha256Hex(user.password)),
      "resetchannels", "-@all", "+hello",
      "+auth",         "+ping", "+client|setname"};
  auto add = [&](std::initializer_list<std::string> more) {
    rules.insert(rules.end(), more.begin(), more.end());
  };
  switch (user.role) {
    case RedisRole::kOwner: {
      const std::string& stream = user.streams.at(0);
      // XINFO and XPENDING on its own stream: what Admin acknowledged and
      // what was removed unread (outbox/resend.h). XREAD and XDEL on it: an
      // erasure deletes the entries that carry an erased value
      // (outbox/personal_erasure.h), having set their unconfirmed rows
      // PENDING; any other entry deleted leaves its row unproved, which the
      // resend sweep publishes again, so no event is lost by it.
      add({absl::StrCat("~", stream), "+xadd", "+xinfo|stream", "+xinfo|groups", "+xpending",
           "+xread", "+xdel", absl::StrCat("(%R~", stream, ":proofs +xread +xinfo|stream)"),
           // Its cosignatures of Admin's log checkpoints (witness.h).
           absl::StrCat("(%W~", stream, ":cosignatures +xadd)")});
      break;
    }
    case RedisRole::kAdmin: {
      std::vector<std::string> proofs, cosignatures;
      for (const std::string& s : user.streams) {
        rules.push_back(absl::StrCat("~", s));
        proofs.push_back(absl::StrCat("~", s, ":proofs"));
        cosignatures.push_back(absl::StrCat("~", s, ":cosignatures"));
      }
      // Lengths by XLEN and MEMORY USAGE (stream_guard.h), never XINFO
      // STREAM: it answers with whole entries, which the owner chose.
      // Its connections are never closed for client memory (redis_client.h).
      add({"+client|no-evict", "+xreadgroup", "+xack", "+xautoclaim", "+xgroup|create", "+xlen",
           "+memory|usage", "+xtrim", "+xinfo|groups", "+xpending",
           absl::StrCat("(", absl::StrJoin(proofs, " "), " +xadd +xtrim +xlen +memory|usage)"),
           absl::StrCat("(", absl::StrJoin(cosignatures, " "),
                        " +xread +xtrim +xlen +memory|usage)")});
      break;
    }
    case RedisRole::kOps:
      add({"~*", "+@all", "-@dangerous", "+info", "+client|list", "+slowlog|get"});
      break;
  }
  return rules;
}

std::string AclFile(const std::vector<RedisUser>& users) {
  std::string out = "user default off resetkeys resetchannels -@all\n";
  for (const RedisUser& u : users) {
    std::vector<std::string> rules = AclRules(u);
    rules.erase(rules.begin());  // "reset": an ACL file line starts from nothing
    absl::StrAppend(&out, "user ", u.name, " ", absl::StrJoin(rules, " "), "\n");
  }
  return out;
}

absl::Status ApplyAcl(redis::Client& admin, const std::vector<RedisUser>& users) {
  for (const RedisUser& u : users) {
    std::vector<std::string> args = {"ACL", "SETUSER", u.name};
    for (std::string& r : AclRules(u)) args.push_back(std::move(r));
    RETURN_IF_ERROR(admin.Command(args).status());
  }
  return absl::OkStatus();
}

}  // namespace ulticode::bootstrap
