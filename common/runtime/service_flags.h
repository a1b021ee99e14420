// The settings every service shares, registered on a config::Flags.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "common/config/flags.h"
#include "common/pg/pool.h"

namespace ulticode::runtime {

struct ServiceFlags {
  std::string grpc_listen;
  std::string metrics_listen;
  std::string pg_dsn;
  int pg_pool_size = 16;
  std::string redis_addr = "127.0.0.1:6379";
  std::string redis_user;
  std::string redis_password;
  std::string log_level = "info";
  int grpc_threads = 32;
  bool access_log = true;
  absl::Duration shutdown_timeout = absl::Seconds(10);
  absl::Duration startup_timeout = absl::Seconds(60);

  // Defaults differ per service (ports, database).
  ServiceFlags(std::string grpc, std::string metrics, std::string database);
  void Register(config::Flags& flags);
  // Applies the log level; call after parsing.
  void ApplyLogging() const;
  pg::PoolOptions PoolOptions(const std::string& application_name) const;
};

}  // namespace ulticode::runtime
