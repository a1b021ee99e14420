// The skeleton every service's main() runs, given a ServiceSpec:
//
//   flags -> secrets -> [--migrate=only: migrate, grant, exit]
//   -> signing key and key directory -> metrics -> schema (migrate or verify)
//   -> RPC pool -> JWKS -> spec.assemble (workers start, gRPC services are
//   handed over) -> gRPC -> SERVING
//
// and on SIGTERM/SIGINT: the BeforeDrain hooks, NOT_SERVING, drain gRPC, stop the workers in
// reverse order of start, close the pool, exit 0. A signal while start-up waits for the database
// ends the wait at once (an attempt in progress runs to its connect timeout): the process exits
// with 128 + the signal's number, having served nothing. A signal later in start-up takes the
// normal stop once the service is up. Any other start-up failure is logged and exits 1.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/runtime/service_flags.h"
#include "common/server/bearer_resolver.h"
#include "common/server/call_executor.h"
#include "common/server/principal.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "prometheus/registry.h"

namespace ulticode::runtime {

// What the skeleton built, for the service's parts; and where they hand
// back what must run. Used on main()'s thread only.
class ServiceContext {
 public:
  ServiceContext(const std::string& program, const ServiceFlags& flags,
                 prometheus::Registry& registry, pg::Pool& pool, const crypto::SigningKey& signer,
                 const crypto::KeyDirectoryFile& keys, const server::BearerTokenResolver& resolver);
  // Drops what Keep() kept, newest first (the workers stopped before).
  ~ServiceContext();
  ServiceContext(const ServiceContext&) = delete;
  ServiceContext& operator=(const ServiceContext&) = delete;

  const ServiceFlags& flags() const { return flags_; }
  prometheus::Registry& registry() { return registry_; }
  // The RPC handlers' pool, as the runtime role.
  pg::Pool& pool() { return pool_; }
  // Options for a worker's own connection, named "<program>-<role>" in
  // pg_stat_activity.
  pg::ConnectOptions Connection(const std::string& role) const;
  redis::Options Redis() const { return flags_.RedisOptions(); }
  // This service's private key, and the parties' public keys.
  const crypto::SigningKey& signer() const { return signer_; }
  const crypto::KeyDirectoryFile& keys() const { return keys_; }
  // An authorizer of callers by bearer token against `rules`; lives as long
  // as the context.
  const server::Authorizer& Authorizer(const server::AccessTable& rules);

  // The executor of the callback services' blocking handlers (one per
  // process, made on first use): --pg-pool-size threads, at most
  // --grpc-threads calls running or waiting. Outlives gRPC's drain.
  server::CallExecutor& Calls();

  // Keeps `object` alive until the service has stopped.
  template <typename T>
  T& Keep(std::unique_ptr<T> object) {
    T& kept = *object;
    kept_.push_back(std::shared_ptr<T>(std::move(object)));
    return kept;
  }
  // Starts `worker` (Start()) now; Stop() runs at shutdown, after gRPC has
  // drained, in reverse order of start.
  template <typename W>
  W& Start(std::unique_ptr<W> worker) {
    W& started = Keep(std::move(worker));
    started.Start();
    stops_.push_back([&started] { started.Stop(); });
    return started;
  }
  // Runs `fn` at shutdown before gRPC drains (e.g. ending streams that would
  // otherwise hold the drain to its deadline).
  void BeforeDrain(std::function<void()> fn) { before_drain_.push_back(std::move(fn)); }
  void RunBeforeDrain() {
    for (const auto& fn : before_drain_) fn();
  }
  // Serves `service` under its full name (health, reflection) once gRPC starts.
  template <typename S>
  S& Serve(std::unique_ptr<S> service, std::string name) {
    S& served = Keep(std::move(service));
    services_.emplace_back(&served, std::move(name));
    return served;
  }

  const std::vector<std::pair<grpc::Service*, std::string>>& services() const { return services_; }
  // Stops every started worker, newest first.
  void StopWorkers();

 private:
  const std::string program_;
  const ServiceFlags& flags_;
  prometheus::Registry& registry_;
  pg::Pool& pool_;
  const crypto::SigningKey& signer_;
  const crypto::KeyDirectoryFile& keys_;
  const server::BearerTokenResolver& resolver_;
  server::CallLimiter limiter_;
  server::CallExecutor* calls_ = nullptr;  // in kept_
  std::vector<std::shared_ptr<void>> kept_;
  std::vector<std::function<void()>> stops_;
  std::vector<std::function<void()>> before_drain_;
  std::vector<std::pair<grpc::Service*, std::string>> services_;
};

struct ServiceSpec {
  std::string program;      // "ulticode-admin": --help, application_name prefix
  std::string component;    // "admin": the log component and the metrics' service label
  std::string description;  // --help text
  // Defaults of the shared flags.
  std::string grpc_listen;
  std::string metrics_listen;
  std::string database;
  int max_receive_bytes = 0;
  // The flag naming this service's Ed25519 private key, and its help.
  std::string signing_key_flag;
  std::string signing_key_help;
  // The whole schema, in order, and the DML its runtime role is granted.
  std::vector<migrations::Migration> migrations;
  std::vector<std::string> runtime_grants;
  // Registers the service's own flags (and their checks) before parsing;
  // the shared flags tell whether this run only migrates.
  std::function<void(config::Flags&, const ServiceFlags&)> register_flags;
  // Builds the service's parts once the schema is ready: starts its workers
  // and hands over its gRPC services. An error ends start-up.
  std::function<absl::Status(ServiceContext&)> assemble;
};

// Runs the service until SIGTERM/SIGINT; returns main()'s exit code.
int RunService(const ServiceSpec& spec, int argc, char** argv);

}  // namespace ulticode::runtime
