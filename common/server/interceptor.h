// A server interceptor that logs and measures every call:
//   ulticode_grpc_server_handled_total{grpc_service,grpc_method,grpc_code}
//   ulticode_grpc_server_handling_seconds{grpc_service,grpc_method} (histogram)
//   ulticode_grpc_server_started_total{grpc_service,grpc_method}
// and one access-log line per call (method, code, duration, the caller's
// principal as the PrincipalResolver sees it, and the `x-request-id`
// metadata). Thread-safe.
#pragma once

#include <memory>

#include "common/server/principal.h"
#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::server {

class CallMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `resolver` may be null (then no principal is logged); it must outlive
  // the server.
  CallMetricsInterceptorFactory(prometheus::Registry& registry, bool access_log,
                                const PrincipalResolver* resolver);
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
  const PrincipalResolver* resolver_;
};

}  // namespace ulticode::server
