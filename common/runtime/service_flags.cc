#include "common/runtime/service_flags.h"

#include <libpq-fe.h>

#include <fstream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/log/log.h"

namespace ulticode::runtime {
namespace {

// "password=..." in a conninfo, or "scheme://user:secret@host" in a URI.
bool HoldsPassword(const std::string& dsn) {
  if (absl::StrContains(absl::AsciiStrToLower(dsn), "password")) return true;
  const size_t scheme = dsn.find("://");
  if (scheme == std::string::npos) return false;
  const size_t at = dsn.find('@', scheme);
  return at != std::string::npos &&
         dsn.substr(scheme + 3, at - scheme - 3).find(':') != std::string::npos;
}

// Reads secret file `path` into `out`; nothing when `path` is empty.
absl::Status ReadIfSet(const std::string& path, std::string* out) {
  if (path.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(*out, crypto::ReadSecretFile(path));
  return absl::OkStatus();
}

}  // namespace

ServiceFlags::ServiceFlags(std::string grpc, std::string metrics, std::string database,
                           int max_receive_bytes, std::string audience)
    : grpc_listen(std::move(grpc)),
      metrics_listen(std::move(metrics)),
      pg_dsn(absl::StrCat("host=127.0.0.1 port=5432 user=postgres dbname=", database)),
      jwt_audience(std::move(audience)),
      grpc_max_receive_bytes(max_receive_bytes) {}

void ServiceFlags::Register(config::Flags& flags) {
  flags.String("grpc-listen", &grpc_listen, "gRPC listen address (host:port)",
               config::ValidateHostPort);
  flags.String("metrics-listen", &metrics_listen, "Prometheus /metrics HTTP address (host:port)",
               config::ValidateHostPort);
  RegisterDatabase(flags);
  RegisterRedis(flags);
  flags.String("public-keys-file", &public_keys_file,
               "key directory: \"<party> <base64 Ed25519 public key>\" per line; re-read when "
               "it changes");
  flags.Require("public-keys-file", [this] { return migrate_only(); });
  RegisterTransport(flags);
  RegisterTokens(flags);
  RegisterServing(flags);
}

void ServiceFlags::RegisterDatabase(config::Flags& flags) {
  flags.String("pg-dsn", &pg_dsn,
               "libpq connection string or URI of this service's own database and runtime role "
               "(no password: see --pg-password-file)",
               [](const std::string& v) {
                 if (v.empty()) return absl::InvalidArgumentError("must not be empty");
                 if (HoldsPassword(v)) {
                   return absl::InvalidArgumentError(
                       "must not hold a password (command lines are visible to every local "
                       "user): use --pg-password-file");
                 }
                 return absl::OkStatus();
               });
  flags.String("pg-password-file", &pg_password_file,
               "file holding the runtime role's password (mode 0600; empty: none)");
  flags.String("pg-migrate-user", &pg_migrate_user,
               "role that owns the schema and runs migrations, then GRANTs the runtime role its "
               "DML (empty: migrate as the runtime role)");
  flags.String("pg-migrate-password-file", &pg_migrate_password_file,
               "file holding the migration role's password (mode 0600)");
  flags.String("migrate", &migrate,
               "schema step at start-up: apply (migrate as --pg-migrate-user, grant, then serve), "
               "only (that, then exit 0: an init step; needs no keys, TLS or JWKS), verify (serve "
               "only if the schema is current; no migration credentials)",
               [](const std::string& v) {
                 return v == "apply" || v == "only" || v == "verify"
                            ? absl::OkStatus()
                            : absl::InvalidArgumentError("must be apply, only or verify");
               });
  flags.Int("pg-pool-size", &pg_pool_size, "maximum PostgreSQL connections for RPC handlers", 1,
            512);
  flags.Int("max-reads-per-principal", &call_limits.reads_per_principal,
            "database reads (unary queries) one principal may have in flight at once; more are "
            "refused with RESOURCE_EXHAUSTED",
            1, 512);
  flags.Duration("pg-idle-in-transaction-timeout", &pg_idle_in_transaction_timeout,
                 "PostgreSQL ends a session of this process that holds a transaction open and idle "
                 "this long (a frozen replica), releasing its locks and uncommitted rows",
                 absl::Seconds(1), absl::Hours(1));
  flags.Duration("pg-lock-timeout", &pg_lock_timeout,
                 "a statement waiting this long for a row lock or another session's uncommitted "
                 "row fails and is retried, instead of waiting as long as that session lives",
                 absl::Milliseconds(100), absl::Hours(1));
  flags.AddCheck([this]() -> absl::Status {
    if (pg_migrate_user.empty()) return absl::OkStatus();
    if (migrate == "verify") {
      return absl::InvalidArgumentError(
          "--migrate=verify never migrates: drop --pg-migrate-user (and its password file)");
    }
    const std::string runtime = RuntimeRoleToGrant();
    if (runtime.empty()) {
      return absl::InvalidArgumentError(
          "--pg-migrate-user needs the runtime role named in --pg-dsn (user=...)");
    }
    if (runtime == pg_migrate_user) {
      return absl::InvalidArgumentError(
          "--pg-migrate-user must differ from the runtime role in --pg-dsn");
    }
    return absl::OkStatus();
  });
}

void ServiceFlags::RegisterRedis(config::Flags& flags) {
  flags.String("redis-addr", &redis_addr, "Redis address (host:port)", config::ValidateHostPort);
  flags.String("redis-user", &redis_user, "Redis ACL user (empty: default user)");
  flags.String("redis-password-file", &redis_password_file,
               "file holding the Redis ACL user's password (mode 0600; empty: none)");
}

void ServiceFlags::RegisterTransport(config::Flags& flags) {
  flags.String("tls-cert-file", &tls.cert_file,
               "PEM certificate chain served on --grpc-listen; re-read when it changes");
  flags.String("tls-key-file", &tls.key_file, "PEM private key of --tls-cert-file (mode 0600)");
  flags.String("tls-client-ca-file", &tls.client_ca_file,
               "PEM CA bundle for mutual TLS: clients must present a certificate it signed");
  flags.Bool("tls-require-client-cert", &tls.require_client_cert,
             "with --tls-client-ca-file: refuse clients without a certificate");
  flags.Duration("tls-refresh-interval", &tls.refresh,
                 "how often certificate files are checked for changes", absl::Seconds(1),
                 absl::Hours(1));
  flags.Bool("grpc-plaintext", &grpc_plaintext,
             "serve gRPC without TLS (an explicit choice: loopback, or a mesh that encrypts)");
  flags.Int("health-max-watches", &health_max_watches,
            "grpc.health.v1 Watch streams (open to anyone, no token) each listener serves at "
            "once; more are refused with RESOURCE_EXHAUSTED (each connection also holds at most "
            "100 streams)",
            1, 1000000);
  flags.String("health-listen", &health_listen,
               "with TLS: plaintext address serving only grpc.health.v1.Health (for probes)",
               [](const std::string& v) {
                 return v.empty() ? absl::OkStatus() : config::ValidateHostPort(v);
               });
  flags.AddCheck([this] { return migrate_only() ? absl::OkStatus() : CheckTransport(); });
}

void ServiceFlags::RegisterTokens(config::Flags& flags) {
  flags.String("jwks-file", &jwks_file,
               "JSON Web Key Set verifying callers' bearer tokens (EdDSA, ES256, RS256); re-read "
               "when it changes");
  flags.Require("jwks-file", [this] { return migrate_only(); });
  auto not_empty = [](const std::string& v) {
    return v.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
  };
  flags.String("jwt-issuer", &jwt_issuer, "the \"iss\" every token must carry", not_empty);
  flags.String("jwt-audience", &jwt_audience,
               "the \"aud\" every token must include (default: this service's own name)",
               not_empty);
  flags.Duration("jwt-clock-skew", &jwt_clock_skew,
                 "clock difference tolerated for a token's exp and nbf", absl::ZeroDuration(),
                 absl::Minutes(10));
}

void ServiceFlags::RegisterServing(config::Flags& flags) {
  flags.String("log-level", &log_level, "debug, info, warn or error", [](const std::string& v) {
    log::Level level;
    return log::ParseLevel(v, &level);
  });
  flags.Int("grpc-threads", &grpc_threads,
            "maximum gRPC calls served at once: threads of the synchronous services, and "
            "calls running or waiting for a pooled connection in an owner's services; "
            "beyond it calls are refused RESOURCE_EXHAUSTED",
            2, 1024);
  flags.Int("grpc-max-receive-bytes", &grpc_max_receive_bytes,
            "largest request message accepted; larger ones are refused before any work", 1024,
            16 * 1024 * 1024);
  flags.Bool("access-log", &access_log, "log one line per gRPC call");
  flags.Duration("shutdown-timeout", &shutdown_timeout,
                 "time allowed for in-flight calls and workers to finish on SIGTERM",
                 absl::ZeroDuration(), absl::Minutes(5));
  flags.Duration(
      "startup-timeout", &startup_timeout,
      "how long start-up waits for PostgreSQL to become reachable (SIGTERM ends the wait at "
      "once; Redis is dialled by the workers, which retry on their own)",
      absl::Seconds(1), absl::Minutes(30));
}

void ServiceFlags::ApplyLogging() const {
  log::Level level = log::Level::kInfo;
  (void)log::ParseLevel(log_level, &level);
  log::SetMinLevel(level);
}

absl::Status ServiceFlags::LoadSecrets() {
  if (!pg_migrate_password_file.empty() && pg_migrate_user.empty()) {
    return absl::InvalidArgumentError("--pg-migrate-password-file needs --pg-migrate-user");
  }
  if (migrate_only()) {
    // The init step reads the password it migrates with, nothing else: the
    // other files (keys, TLS, Redis) need not exist where it runs.
    if (pg_migrate_user.empty()) return ReadIfSet(pg_password_file, &pg_password_);
    return ReadIfSet(pg_migrate_password_file, &pg_migrate_password_);
  }
  if (!grpc_plaintext) {
    // The watcher would serve nothing rather than fail: check both files now
    // (the key like any secret: no access for group or others).
    RETURN_IF_ERROR(crypto::ReadSecretFile(tls.key_file).status());
    std::ifstream cert(tls.cert_file);
    if (!cert || cert.peek() == std::ifstream::traits_type::eof()) {
      return absl::NotFoundError(
          absl::StrCat("--tls-cert-file ", tls.cert_file, " cannot be read or is empty"));
    }
  }
  RETURN_IF_ERROR(ReadIfSet(pg_password_file, &pg_password_));
  RETURN_IF_ERROR(ReadIfSet(pg_migrate_password_file, &pg_migrate_password_));
  return ReadIfSet(redis_password_file, &redis_password_);
}

pg::PoolOptions ServiceFlags::PoolOptions(const std::string& application_name) const {
  pg::PoolOptions options;
  options.connect.conninfo = pg_dsn;
  options.connect.password = pg_password_;
  options.connect.application_name = application_name;
  options.connect.idle_in_transaction_timeout = pg_idle_in_transaction_timeout;
  options.connect.lock_timeout = pg_lock_timeout;
  options.max_size = pg_pool_size;
  return options;
}

pg::ConnectOptions ServiceFlags::MigrateOptions(const std::string& application_name) const {
  pg::ConnectOptions options = PoolOptions(application_name).connect;
  // A migration waits for its locks as long as it takes (MigrateWithRetry
  // bounds the whole step).
  options.idle_in_transaction_timeout = absl::ZeroDuration();
  options.lock_timeout = absl::ZeroDuration();
  if (!pg_migrate_user.empty()) {
    options.user = pg_migrate_user;
    options.password = pg_migrate_password_;
  }
  return options;
}

std::string ServiceFlags::RuntimeRoleToGrant() const {
  if (pg_migrate_user.empty()) return "";
  // The runtime role is whoever --pg-dsn logs in as.
  const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> opts(
      PQconninfoParse(pg_dsn.c_str(), nullptr), &PQconninfoFree);
  for (const PQconninfoOption* o = opts.get(); o != nullptr && o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "user" && o->val != nullptr) return o->val;
  }
  return "";
}

absl::Status ServiceFlags::CheckTransport() const {
  const bool tls_files = !tls.cert_file.empty() || !tls.key_file.empty();
  if (tls_files && (tls.cert_file.empty() || tls.key_file.empty())) {
    return absl::InvalidArgumentError("--tls-cert-file and --tls-key-file go together");
  }
  if (tls_files == grpc_plaintext) {
    return absl::InvalidArgumentError(
        tls_files ? "--grpc-plaintext contradicts --tls-cert-file"
                  : "choose TLS (--tls-cert-file, --tls-key-file) or --grpc-plaintext");
  }
  if (!tls_files && (!tls.client_ca_file.empty() || !health_listen.empty())) {
    return absl::InvalidArgumentError(
        "--tls-client-ca-file and --health-listen need --tls-cert-file");
  }
  return absl::OkStatus();
}

server::ServerOptions ServiceFlags::GrpcOptions(const PrincipalResolver* resolver) const {
  server::ServerOptions o;
  o.listen = grpc_listen;
  o.max_threads = grpc_threads;
  o.access_log = access_log;
  o.principal_resolver = resolver;
  o.max_receive_bytes = grpc_max_receive_bytes;
  if (!grpc_plaintext) o.tls = tls;
  o.health_listen = health_listen;
  o.max_health_watches = health_max_watches;
  return o;
}

jwt::VerifyOptions ServiceFlags::JwtOptions() const {
  return jwt::VerifyOptions{jwt_issuer, jwt_audience, jwt_clock_skew};
}

redis::Options ServiceFlags::RedisOptions() const {
  redis::Options options;
  options.user = redis_user;
  options.password = redis_password_;
  (void)redis::ParseAddress(redis_addr, &options);  // validated by the flag
  return options;
}

}  // namespace ulticode::runtime
