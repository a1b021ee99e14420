// The settings every service shares, registered on a config::Flags.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "common/config/flags.h"
#include "common/jwt/jwt.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/server/grpc_server.h"

namespace ulticode::runtime {

using server::PrincipalResolver;

struct ServiceFlags {
  std::string grpc_listen;
  std::string metrics_listen;
  std::string pg_dsn;
  int pg_pool_size = 16;
  server::CallLimits call_limits;
  int health_max_watches = 1000;
  // Every connection's bounds on a transaction left open and on a lock wait:
  // no replica that freezes inside a transaction stalls another for longer
  // (docs/guarantees.md, "Topologies"). Components with a tighter bound of
  // their own (the dispatcher's claim lease) keep it.
  absl::Duration pg_idle_in_transaction_timeout = absl::Seconds(15);
  absl::Duration pg_lock_timeout = absl::Seconds(5);
  std::string redis_addr = "127.0.0.1:6379";
  std::string pg_password_file;
  std::string pg_migrate_user;
  std::string pg_migrate_password_file;
  // apply | only | verify (see --migrate).
  std::string migrate = "apply";
  std::string redis_user;
  std::string redis_password_file;
  std::string public_keys_file;
  std::string jwks_file;
  server::TlsFiles tls;
  bool grpc_plaintext = false;
  std::string health_listen;
  std::string jwt_issuer = "ulticode";
  // This service's own name (its program, e.g. "ulticode-auth"): a token
  // for one service is not a token for another.
  std::string jwt_audience;
  absl::Duration jwt_clock_skew = absl::Seconds(60);
  std::string log_level = "info";
  // Enough that a burst of clients waits for a database connection (the
  // pool queues) instead of being refused RESOURCE_EXHAUSTED by gRPC's sync
  // server; threads are created on demand.
  int grpc_threads = 320;
  int grpc_max_receive_bytes = server::kOwnerMaxReceiveBytes;
  bool access_log = true;
  absl::Duration shutdown_timeout = absl::Seconds(10);
  absl::Duration startup_timeout = absl::Seconds(60);

  // Defaults differ per service (ports, database, token audience).
  ServiceFlags(std::string grpc, std::string metrics, std::string database, int max_receive_bytes,
               std::string audience);
  void Register(config::Flags& flags);
  // --migrate=only: migrate, grant and exit; no keys, TLS or serving.
  bool migrate_only() const { return migrate == "only"; }
  // Applies the log level; call after parsing.
  void ApplyLogging() const;
  // Reads the password files (refusing ones others may read). Call after
  // parsing; errors name the file, never a secret.
  absl::Status LoadSecrets();
  // The runtime role's pool.
  pg::PoolOptions PoolOptions(const std::string& application_name) const;
  // The connection migrations run on: the migration role when
  // --pg-migrate-user is set, else the runtime role (development).
  pg::ConnectOptions MigrateOptions(const std::string& application_name) const;
  // The runtime role to GRANT the service's DML to after migrating; empty
  // when migrations run as the runtime role itself.
  std::string RuntimeRoleToGrant() const;
  redis::Options RedisOptions() const;
  jwt::VerifyOptions JwtOptions() const;
  // INVALID_ARGUMENT unless exactly one of TLS (cert and key files) or
  // --grpc-plaintext was chosen.
  absl::Status CheckTransport() const;
  server::ServerOptions GrpcOptions(const PrincipalResolver* resolver)
      const;  // DieOnStartup-worthy errors were checked by Register

 private:
  // Register's groups, in --help order.
  void RegisterDatabase(config::Flags& flags);
  void RegisterRedis(config::Flags& flags);
  void RegisterTransport(config::Flags& flags);
  void RegisterTokens(config::Flags& flags);
  void RegisterServing(config::Flags& flags);

  std::string pg_password_;
  std::string pg_migrate_password_;
  std::string redis_password_;
};

}  // namespace ulticode::runtime
