// Least privilege, set up once per deployment by someone who holds the
// PostgreSQL superuser and a Redis user allowed to manage ACLs:
//
// PostgreSQL, per service: a migration role that owns the database and its
// schema, and a runtime login role (SCRAM password) that gets only the DML
// the service GRANTs it after migrating (migrations::GrantRuntime). Nobody
// else may CONNECT to the database. Passwords are turned into SCRAM
// verifiers on this side (PQencryptPasswordConn): the server never sees them.
//
// Redis, per service: an ACL user that can touch only its own keys with only
// the commands it uses (AclRules), an `ops` user for operators, and the
// default user off.
//
// run-local uses it through the ulticode-bootstrap tool; the e2e and chaos
// tests call it directly for their per-test roles and users.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"

namespace ulticode::bootstrap {

// A random password: 32 hex digits (128 bits).
std::string NewPassword();

// The secret in `path`, made (mode 0600) with NewPassword() when absent.
absl::StatusOr<std::string> EnsureSecretFile(const std::string& path);

struct ServiceDatabase {
  std::string database;  // e.g. ulticode_admin
  std::string migrator;  // owns the database and schema, runs migrations
  std::string runtime;   // the service's login role
};

// Creates or updates both roles (LOGIN, no superuser, no CREATEDB/CREATEROLE,
// SCRAM passwords), creates the database if absent, makes the migrator its
// owner (and of any object an earlier superuser-run setup left there), and
// lets only the two roles CONNECT. `superuser` is connected to any database
// of the cluster; `connect` reaches the cluster as the same superuser (to
// enter `database`). Idempotent.
absl::Status BootstrapDatabase(pg::Connection& superuser, const pg::ConnectOptions& connect,
                               const ServiceDatabase& service, const std::string& migrator_password,
                               const std::string& runtime_password);

// Sets the password of the role `superuser` is logged in as (a SCRAM
// verifier, computed here).
absl::Status SetOwnPassword(pg::Connection& superuser, const std::string& password);

enum class RedisRole { kOwner, kAdmin, kOps };

struct RedisUser {
  std::string name;
  RedisRole role = RedisRole::kOwner;
  std::string password;
  // kOwner: its audit stream; kAdmin: every owner stream it reads.
  std::vector<std::string> streams;
};

// The ACL rules of `user` (without the name), as separate arguments of
// ACL SETUSER; the password is given as its SHA-256 ("#<hex>"):
// - owner: XADD, XINFO STREAM/GROUPS and XPENDING on its stream; XADD to
//   its cosignature stream; XREAD and XINFO STREAM of its proof stream;
//   nothing else.
// - admin: read, acknowledge, claim, trim and create groups on the owner
//   streams, XINFO GROUPS/XPENDING for the pipeline status, XLEN and MEMORY
//   USAGE for the stream guard; XADD (and trim) only to their proof
//   streams; read and trim their cosignature streams.
// - ops: every key and command except the dangerous ones (FLUSHALL, CONFIG,
//   DEBUG, KEYS, ACL, SHUTDOWN, ...).
std::vector<std::string> AclRules(const RedisUser& user);

// Lines of a Redis ACL file: "user default off", then one line per user.
std::string AclFile(const std::vector<RedisUser>& users);

// ACL SETUSER for each user (resetting it first), through a client allowed
// to manage ACLs.
absl::Status ApplyAcl(redis::Client& admin, const std::vector<RedisUser>& users);

}  // namespace ulticode::bootstrap
