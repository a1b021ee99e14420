// A gRPC server with the project's wiring: bounded threads,
// reflection (grpcurl can list and call every service, health included),
// grpc.health.v1 with per-service status and a bound on its streams
// (health_service.h), the call-metrics interceptor, and
// connection limits. Synchronous services' unary handlers run on the
// bounded threads; the owners' services use the callback API with their
// blocking handlers on a CallExecutor (call_executor.h); the streams anyone
// can open without a token (reflection, health Watch) use the callback API
// and cost memory, never a thread.
//
// Lifecycle: AddService() ... Start() -> SetServing(true) -> ... ->
// Shutdown(): health NOT_SERVING first (load balancers stop sending), then
// the server drains in-flight calls until the deadline and cancels the rest.
// Not thread-safe for setup; SetServing/Shutdown may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/server/health_service.h"
#include "common/server/principal.h"
#include "common/server/reflection.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/registry.h"

namespace ulticode::server {

// Request size limits (--grpc-max-receive-bytes defaults): owners take a
// problem statement of up to 64 KiB plus the rest of its request; Admin's
// queries are small.
inline constexpr int kOwnerMaxReceiveBytes = 96 * 1024;
inline constexpr int kAdminMaxReceiveBytes = 16 * 1024;

// Response size limits. A list page ends early (with its next-page token)
// once its rows reach kMaxPageBytes; one row is far smaller than the rest of
// kMaxSendBytes, which is what gRPC clients accept by default (4 MiB). A
// larger response is refused (RESOURCE_EXHAUSTED) rather than sent.
inline constexpr int64_t kMaxPageBytes = 3 * 1024 * 1024;
inline constexpr int kMaxSendBytes = 4 * 1024 * 1024;

// TLS from files that are re-read when they change (a rotated certificate is
// served without a restart): the server's certificate chain and key, and
// optionally a client CA for mutual TLS.
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;       // empty: clients are not asked for a certificate
  bool require_client_cert = true;  // with a client CA: refuse clients without one
  absl::Duration refresh = absl::Seconds(10);
  bool enabled() const { return !cert_file.empty(); }
};

// What one client connection may hold (HTTP/2 settings and timers; the
// defaults are what the binaries use).
struct ConnectionLimits {
  int max_streams_per_connection = 100;  // SETTINGS_MAX_CONCURRENT_STREAMS
  // A connection with no call for this long is closed (GOAWAY).
  absl::Duration idle = absl::Minutes(5);
  // Every connection is closed after this long (clients reconnect, and load
  // spreads over new replicas), then its calls get `age_grace` to finish.
  absl::Duration max_age = absl::Minutes(30);
  absl::Duration age_grace = absl::Minutes(1);
  // A TCP connection that has not finished its TLS/HTTP2 handshake by then
  // is dropped.
  absl::Duration handshake = absl::Seconds(10);
};

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";
  // Upper bound on threads serving synchronous services' calls; beyond it
  // callers get RESOURCE_EXHAUSTED instead of the process growing without
  // bound (callback services bound their calls themselves: CallExecutor).
  int max_threads = 32;
  bool access_log = true;
  // Names the caller in the access log; null logs no principal.
  const PrincipalResolver* principal_resolver = nullptr;
  // Larger request messages are refused (RESOURCE_EXHAUSTED) before any
  // handler runs.
  int max_receive_bytes = kOwnerMaxReceiveBytes;
  int max_send_bytes = kMaxSendBytes;
  // Off: plaintext (tests, run-local on loopback; the binaries make that an
  // explicit choice, --grpc-plaintext).
  TlsFiles tls;
  ConnectionLimits connections;
  ReflectionLimits reflection;
  // Health Watch streams each listener serves at once (health_service.h).
  int max_health_watches = 1000;
  // With TLS: grpc.health.v1.Health alone, in plaintext, on this address
  // (Kubernetes gRPC probes speak no TLS). Empty: none.
  std::string health_listen;
};

// Plaintext options on `listen` (tests; the binaries use runtime::ServiceFlags).
inline ServerOptions PlaintextOptions(std::string listen, int max_threads,
                                      int max_receive_bytes = kOwnerMaxReceiveBytes) {
  ServerOptions o;
  o.listen = std::move(listen);
  o.max_threads = max_threads;
  o.access_log = false;
  o.max_receive_bytes = max_receive_bytes;
  return o;
}

class GrpcServer {
 public:
  GrpcServer(ServerOptions options, prometheus::Registry& registry);
  ~GrpcServer();

  // `name` is the fully-qualified service name used for health checks.
  void AddService(grpc::Service* service, std::string name);

  // Binds and starts serving (health NOT_SERVING until SetServing(true)).
  // UNAVAILABLE with the address when it cannot bind.
  absl::Status Start();
  void SetServing(bool serving);
  void Shutdown(absl::Duration deadline);

  // The port actually bound (useful with port 0 in tests).
  int port() const { return port_; }
  int health_port() const { return health_port_; }

 private:
  ServerOptions options_;
  prometheus::Registry& registry_;
  std::vector<std::pair<grpc::Service*, std::string>> services_;
  std::unique_ptr<HealthService> health_;          // outlives server_
  std::unique_ptr<HealthService> health_only_;     // outlives health_server_
  std::unique_ptr<ReflectionService> reflection_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ReflectionService> health_reflection_;
  std::unique_ptr<grpc::Server> health_server_;  // plaintext health beside TLS
  int port_ = 0;
  int health_port_ = 0;
};

}  // namespace ulticode::server
