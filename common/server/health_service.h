// grpc.health.v1.Health with a bound on the streams anyone can hold.
//
// Health is served without a token (probes and load balancers have none),
// so its Watch streams are open to every client that reaches the port:
// gRPC's default health service keeps every one for as long as the client
// likes. Here each connection holds at most its HTTP/2 stream limit
// (ConnectionLimits::max_streams_per_connection) and each listener (the
// gRPC port; the plaintext health port beside TLS) at most `max_watches`
// in all (--health-max-watches); a Watch past it is refused with
// RESOURCE_EXHAUSTED and counted in ulticode_health_watches_refused_total.
// A service name over 256 bytes is refused (INVALID_ARGUMENT). Check
// answers as gRPC's own does (NOT_FOUND for a service it does not know); a
// Watch of an unknown service gets SERVICE_UNKNOWN and then every change.
// At EndAll() a watch gets the last status first, then its end.
//
// Thread-safe. EndAll() ends every Watch (at shutdown, after the last
// status went out); the service must outlive the server's calls.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::server {

class HealthWatch;

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `listener` labels the metrics ("grpc", or "health" for the plaintext
  // health port beside TLS).
  HealthService(int max_watches, const std::string& listener, prometheus::Registry& registry);

  // The status of `service` ("" is the whole server); watchers see it.
  void Set(const std::string& service, bool serving);
  void EndAll();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* req,
                                  grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req) override;

 private:
  friend class HealthWatch;
  Status StatusOf(const std::string& service) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Forget(HealthWatch* watch);

  const int max_watches_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Status> statuses_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<HealthWatch*> watches_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  prometheus::Gauge* open_;
  prometheus::Counter* refused_;
};

}  // namespace ulticode::server
