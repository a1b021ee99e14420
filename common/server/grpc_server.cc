#include "common/server/grpc_server.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"
#include "common/server/interceptor.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/support/time.h"

namespace ulticode::server {

GrpcServer::GrpcServer(ServerOptions options, prometheus::Registry& registry)
    : options_(std::move(options)), registry_(registry) {}

GrpcServer::~GrpcServer() {
  if (server_) Shutdown(absl::ZeroDuration());
}

void GrpcServer::AddService(grpc::Service* service, std::string name) {
  services_.emplace_back(service, std::move(name));
}

absl::Status GrpcServer::Start() {
  // The default health service speaks grpc.health.v1 without Protobuf's
  // descriptor pool; touching the generated descriptor links health.proto in
  // so reflection can describe grpc.health.v1.Health for grpcurl.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(), &port_);
  grpc::ResourceQuota quota(absl::StrCat("ulticode-", options_.listen));
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options_.max_receive_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  for (auto& [service, name] : services_) builder.RegisterService(service);

  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<CallMetricsInterceptorFactory>(registry_, options_.access_log,
                                                                     options_.principal_resolver));
  builder.experimental().SetInterceptorCreators(std::move(creators));

  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", options_.listen, " (address in use or invalid)"));
  }
  SetServing(false);
  log::Info("grpc", "listening", {{"address", options_.listen}, {"port", absl::StrCat(port_)}});
  return absl::OkStatus();
}

void GrpcServer::SetServing(bool serving) {
  if (!server_) return;
  auto* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);  // the overall "" service
  for (auto& [service, name] : services_) health->SetServingStatus(name, serving);
}

void GrpcServer::Shutdown(absl::Duration deadline) {
  if (!server_) return;
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  server_.reset();
  log::Info("grpc", "server stopped", {{"address", options_.listen}});
}

}  // namespace ulticode::server
