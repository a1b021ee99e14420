// A server interceptor that logs and measures every call:
//   ulticode_grpc_server_handled_total{grpc_service,grpc_method,grpc_code}
//   ulticode_grpc_server_handling_seconds{grpc_service,grpc_method} (histogram)
//   ulticode_grpc_server_started_total{grpc_service,grpc_method}
// and one access-log line per call (method, code, duration, peer, request id
// from the `x-request-id` metadata). Thread-safe.
#pragma once

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::server {

class CallMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CallMetricsInterceptorFactory(prometheus::Registry& registry, bool access_log);
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  struct Families {
    prometheus::Family<prometheus::Counter>* started;
    prometheus::Family<prometheus::Counter>* handled;
    prometheus::Family<prometheus::Histogram>* latency;
  };

 private:
  Families families_;
  bool access_log_;
};

}  // namespace ulticode::server
