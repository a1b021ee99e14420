#include "common/runtime/service.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/jwt/jwt.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/runtime/startup.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"

namespace ulticode::runtime {

ServiceContext::ServiceContext(const std::string& program, const ServiceFlags& flags,
                               prometheus::Registry& registry, pg::Pool& pool,
                               const crypto::SigningKey& signer,
                               const crypto::KeyDirectoryFile& keys,
                               const server::BearerTokenResolver& resolver)
    : program_(program),
      flags_(flags),
      registry_(registry),
      pool_(pool),
      signer_(signer),
      keys_(keys),
      resolver_(resolver),
      limiter_(flags.call_limits, registry) {}

ServiceContext::~ServiceContext() {
  while (!kept_.empty()) kept_.pop_back();
}

pg::ConnectOptions ServiceContext::Connection(const std::string& role) const {
  return flags_.PoolOptions(absl::StrCat(program_, "-", role)).connect;
}

const server::Authorizer& ServiceContext::Authorizer(const server::AccessTable& rules) {
  return Keep(std::make_unique<server::Authorizer>(resolver_, rules, &limiter_));
}

server::CallExecutor& ServiceContext::Calls() {
  if (calls_ == nullptr) {
    calls_ = &Keep(std::make_unique<server::CallExecutor>(
        server::ExecutorOptions{.threads = flags_.pg_pool_size, .max_calls = flags_.grpc_threads},
        registry_));
  }
  return *calls_;
}

void ServiceContext::StopWorkers() {
  while (!stops_.empty()) {
    stops_.back()();
    stops_.pop_back();
  }
}

namespace {

// Start-up either goes on or ends the process here.
class StartUp {
 public:
  StartUp(std::string component, const server::TerminationWatch& signals)
      : component_(std::move(component)), signals_(signals) {}

  // A Pause that a termination signal interrupts.
  Pause Interruptible() const {
    return [this](absl::Duration d) { return !signals_.WaitFor(d); };
  }
  // Nothing when `status` is OK; else exits: 128 + signal when a signal
  // stopped start-up, 1 otherwise.
  void Check(const absl::Status& status) const {
    if (status.ok()) return;
    if (absl::IsCancelled(status) && signals_.WaitFor(absl::ZeroDuration())) {
      const int sig = signals_.Wait();
      log::Info(component_, "stopped during start-up",
                {{"signal", absl::StrCat(sig)}, {"reason", std::string(status.message())}});
      std::exit(128 + sig);
    }
    DieOnStartup(component_.c_str(), status);
  }
  template <typename T>
  T Check(absl::StatusOr<T> value) const {
    Check(value.status());
    return *std::move(value);
  }

 private:
  const std::string component_;
  const server::TerminationWatch& signals_;
};

}  // namespace

int RunService(const ServiceSpec& spec, int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so absl::Mutex (gRPC's locks
  // too) would track every lock in a global graph to detect deadlocks, a
  // debugging aid that costs a share of every call (docs/performance.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  server::BlockTerminationSignals();
  ServiceFlags common(spec.grpc_listen, spec.metrics_listen, spec.database, spec.max_receive_bytes,
                      spec.program);
  std::string signing_key_file;
  config::Flags flags(spec.program, spec.description);
  common.Register(flags);
  flags.String(spec.signing_key_flag, &signing_key_file, spec.signing_key_help);
  flags.Require(spec.signing_key_flag, [&] { return common.migrate_only(); });
  if (spec.register_flags) spec.register_flags(flags, common);
  config::ParseOrExit(flags, argc, argv);
  common.ApplyLogging();

  const server::TerminationWatch signals;
  const StartUp start(spec.component, signals);
  start.Check(common.LoadSecrets());
  auto prepare_schema = [&] {
    start.Check(PrepareSchema(common, spec.program + "-migrate", spec.migrations,
                              spec.runtime_grants, start.Interruptible()));
  };
  // The init step migrates and exits; a server checks its keys first (a bad
  // key fails at once, not after waiting for the database).
  if (common.migrate_only()) {
    prepare_schema();
    return 0;
  }
  const auto signer = start.Check(crypto::SigningKey::FromFile(signing_key_file));
  const auto keys = start.Check(crypto::KeyDirectoryFile::Open(common.public_keys_file));
  log::Info(spec.component, "keys loaded",
            {{"signing_key_id", signer.key_id()}, {"public_keys", keys->Current()->Describe()}});
  const auto metrics = start.Check(metrics::Metrics::Start(common.metrics_listen, spec.component));
  prepare_schema();

  pg::PoolOptions pool_options = common.PoolOptions(spec.program);
  pool_options.registry = &metrics->registry();
  pool_options.name = "rpc";
  pg::Pool pool(pool_options);
  const auto jwks = start.Check(jwt::JwksFile::Open(common.jwks_file));
  const server::BearerTokenResolver resolver(*jwks, common.JwtOptions());
  ServiceContext context(spec.program, common, metrics->registry(), pool, signer, *keys, resolver);
  start.Check(spec.assemble(context));

  server::GrpcServer grpc_server(common.GrpcOptions(&resolver), metrics->registry());
  for (const auto& [service, name] : context.services()) grpc_server.AddService(service, name);
  start.Check(grpc_server.Start());
  grpc_server.SetServing(true);
  log::Info(spec.component, "serving",
            {{"grpc", common.grpc_listen}, {"metrics", common.metrics_listen}});

  const int sig = signals.Wait();
  log::Info(spec.component, "shutting down", {{"signal", absl::StrCat(sig)}});
  context.RunBeforeDrain();
  grpc_server.Shutdown(common.shutdown_timeout);
  context.StopWorkers();
  pool.Close();
  log::Info(spec.component, "stopped");
  return 0;
}

}  // namespace ulticode::runtime
