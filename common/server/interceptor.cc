#include "common/server/interceptor.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/server/principal.h"
#include "grpcpp/support/status_code_enum.h"

namespace ulticode::server {
namespace {

class CallMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallMetricsInterceptor(grpc::experimental::ServerRpcInfo* info,
                         const CallMetricsInterceptorFactory::Families& families, bool access_log,
                         const PrincipalResolver* resolver)
      : info_(info),
        families_(families),
        access_log_(access_log),
        resolver_(resolver),
        start_(absl::Now()) {
    // "/ulticode.auth.v1.AuthService/CreateUser"
    std::string full = info->method() == nullptr ? "" : info->method();
    if (!full.empty() && full[0] == '/') full.erase(0, 1);
    auto slash = full.find('/');
    service_ = slash == std::string::npos ? full : full.substr(0, slash);
    method_ = slash == std::string::npos ? "" : full.substr(slash + 1);
    families_.started->Add({{"grpc_service", service_}, {"grpc_method", method_}}).Increment();
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      if (auto* md = methods->GetRecvInitialMetadata(); md != nullptr) {
        if (auto it = md->find("x-request-id"); it != md->end()) {
          request_id_.assign(it->second.data(), std::min<size_t>(it->second.size(), 128));
        }
      }
      if (access_log_ && resolver_ != nullptr && info_->server_context() != nullptr) {
        auto principal = resolver_->Resolve(*info_->server_context());
        principal_ = principal.ok() ? principal->id : "anonymous";
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
      const std::string code =
          absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
      families_.handled
          ->Add({{"grpc_service", service_}, {"grpc_method", method_}, {"grpc_code", code}})
          .Increment();
      families_.latency
          ->Add({{"grpc_service", service_}, {"grpc_method", method_}}, metrics::LatencyBuckets())
          .Observe(seconds);
      if (access_log_) {
        log::Fields fields{{"method", absl::StrCat(service_, "/", method_)},
                           {"code", code},
                           {"duration_ms", absl::StrCat(seconds * 1000.0)}};
        if (!request_id_.empty()) fields.emplace_back("request_id", request_id_);
        if (!principal_.empty()) fields.emplace_back("principal", principal_);
        log::Write(status.ok() ? log::Level::kInfo : log::Level::kWarn, "grpc.access", "call",
                   fields);
      }
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  const CallMetricsInterceptorFactory::Families& families_;
  const bool access_log_;
  const PrincipalResolver* resolver_;
  const absl::Time start_;
  std::string service_;
  std::string method_;
  std::string request_id_;
  std::string principal_;
};

}  // namespace

CallMetricsInterceptorFactory::CallMetricsInterceptorFactory(prometheus::Registry& registry,
                                                             bool access_log,
                                                             const PrincipalResolver* resolver)
    : access_log_(access_log), resolver_(resolver) {
  families_.started = &prometheus::BuildCounter()
                           .Name("ulticode_grpc_server_started_total")
                           .Help("gRPC calls started on the server")
                           .Register(registry);
  families_.handled = &prometheus::BuildCounter()
                           .Name("ulticode_grpc_server_handled_total")
                           .Help("gRPC calls completed on the server, by status code")
                           .Register(registry);
  families_.latency = &prometheus::BuildHistogram()
                           .Name("ulticode_grpc_server_handling_seconds")
                           .Help("Time from the start of a call to its status being sent")
                           .Register(registry);
}

grpc::experimental::Interceptor* CallMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new CallMetricsInterceptor(info, families_, access_log_, resolver_);
}

}  // namespace ulticode::server
