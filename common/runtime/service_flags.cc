#include "common/runtime/service_flags.h"

#include "absl/strings/str_cat.h"
#include "common/log/log.h"

namespace ulticode::runtime {

ServiceFlags::ServiceFlags(std::string grpc, std::string metrics, std::string database)
    : grpc_listen(std::move(grpc)),
      metrics_listen(std::move(metrics)),
      pg_dsn(absl::StrCat("host=127.0.0.1 port=5432 user=postgres dbname=", database)) {}

void ServiceFlags::Register(config::Flags& flags) {
  flags.String("grpc-listen", &grpc_listen, "gRPC listen address (host:port)",
               config::ValidateHostPort);
  flags.String("metrics-listen", &metrics_listen, "Prometheus /metrics HTTP address (host:port)",
               config::ValidateHostPort);
  flags.String("pg-dsn", &pg_dsn, "libpq connection string or URI of this service's own database",
               [](const std::string& v) {
                 return v.empty() ? absl::InvalidArgumentError("must not be empty")
                                  : absl::OkStatus();
               });
  flags.Int("pg-pool-size", &pg_pool_size, "maximum PostgreSQL connections for RPC handlers", 1,
            512);
  flags.String("redis-addr", &redis_addr, "Redis address (host:port)", config::ValidateHostPort);
  flags.String("redis-user", &redis_user, "Redis ACL user (empty: default user)");
  flags.Secret("redis-password", &redis_password, "Redis password (empty: none)");
  flags.String("log-level", &log_level, "debug, info, warn or error", [](const std::string& v) {
    log::Level level;
    return log::ParseLevel(v, &level);
  });
  flags.Int("grpc-threads", &grpc_threads, "maximum threads serving gRPC calls", 2, 1024);
  flags.Bool("access-log", &access_log, "log one line per gRPC call");
  flags.Duration("shutdown-timeout", &shutdown_timeout,
                 "time allowed for in-flight calls and workers to finish on SIGTERM",
                 absl::ZeroDuration(), absl::Minutes(5));
  flags.Duration("startup-timeout", &startup_timeout,
                 "how long start-up waits for PostgreSQL and Redis to become reachable",
                 absl::Seconds(1), absl::Minutes(30));
}

void ServiceFlags::ApplyLogging() const {
  log::Level level = log::Level::kInfo;
  (void)log::ParseLevel(log_level, &level);
  log::SetMinLevel(level);
}

pg::PoolOptions ServiceFlags::PoolOptions(const std::string& application_name) const {
  pg::PoolOptions options;
  options.connect.conninfo = pg_dsn;
  options.connect.application_name = application_name;
  options.max_size = pg_pool_size;
  return options;
}

}  // namespace ulticode::runtime
