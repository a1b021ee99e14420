#include "common/server/grpc_server.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"
#include "common/server/interceptor.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/support/time.h"

namespace ulticode::server {
namespace {

std::shared_ptr<grpc::ServerCredentials> Credentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  const unsigned refresh =
      static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(tls.refresh)));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls.key_file, tls.cert_file, tls.client_ca_file, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!tls.client_ca_file.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(tls.require_client_cert
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

int Millis(absl::Duration d) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 1, INT32_MAX));
}

void SetConnectionLimits(const ConnectionLimits& limits, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, Millis(limits.idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, Millis(limits.max_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, Millis(limits.age_grace));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, Millis(limits.handshake));
}

}  // namespace

GrpcServer::GrpcServer(ServerOptions options, prometheus::Registry& registry)
    : options_(std::move(options)), registry_(registry) {}

GrpcServer::~GrpcServer() {
  if (server_) Shutdown(absl::ZeroDuration());
}

void GrpcServer::AddService(grpc::Service* service, std::string name) {
  services_.emplace_back(service, std::move(name));
}

absl::Status GrpcServer::Start() {
  health_ = std::make_unique<HealthService>(options_.max_health_watches, "grpc", registry_);
  std::vector<std::string> names = {"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                    "grpc.reflection.v1alpha.ServerReflection"};
  for (const auto& entry : services_) names.push_back(entry.second);
  reflection_ = std::make_unique<ReflectionService>(std::move(names), options_.reflection);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, Credentials(options_.tls), &port_);
  SetConnectionLimits(options_.connections, builder);
  grpc::ResourceQuota quota(absl::StrCat("ulticode-", options_.listen));
  quota.SetMaxThreads(options_.max_threads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(options_.max_receive_bytes);
  builder.SetMaxSendMessageSize(options_.max_send_bytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 2);
  builder.RegisterService(health_.get());
  for (auto& [service, name] : services_) builder.RegisterService(service);
  for (grpc::Service* service : reflection_->services()) builder.RegisterService(service);

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
  if (options_.tls.enabled() && !options_.health_listen.empty()) {
    grpc::ServerBuilder health;
    health.AddListeningPort(options_.health_listen, grpc::InsecureServerCredentials(),
                            &health_port_);
    SetConnectionLimits(options_.connections, health);
    // Probes ask for a service name: nothing larger comes in here.
    health.SetMaxReceiveMessageSize(1024);
    health_only_ =
        std::make_unique<HealthService>(options_.max_health_watches, "health", registry_);
    health.RegisterService(health_only_.get());
    health_reflection_ = std::make_unique<ReflectionService>(
        std::vector<std::string>{"grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                                 "grpc.reflection.v1alpha.ServerReflection"},
        options_.reflection);
    for (grpc::Service* service : health_reflection_->services()) health.RegisterService(service);
    health_server_ = health.BuildAndStart();
    if (health_server_ == nullptr || health_port_ == 0) {
      Shutdown(absl::ZeroDuration());
      return absl::UnavailableError(
          absl::StrCat("cannot serve health on ", options_.health_listen));
    }
  }
  SetServing(false);
  log::Info("grpc", "listening",
            {{"address", options_.listen},
             {"port", absl::StrCat(port_)},
             {"tls", !options_.tls.enabled()               ? "off"
                     : options_.tls.client_ca_file.empty() ? "on"
                                                           : "mutual"},
             {"health_port", absl::StrCat(health_port_)}});
  return absl::OkStatus();
}

void GrpcServer::SetServing(bool serving) {
  for (HealthService* health : {health_.get(), health_only_.get()}) {
    if (health == nullptr) continue;
    health->Set("", serving);  // the whole server
    for (auto& [service, name] : services_) health->Set(name, serving);
  }
}

void GrpcServer::Shutdown(absl::Duration deadline) {
  if (!server_) return;
  SetServing(false);
  // Watchers have NOT_SERVING; their streams end now, not at the deadline.
  for (HealthService* health : {health_.get(), health_only_.get()}) {
    if (health != nullptr) health->EndAll();
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  server_.reset();
  reflection_.reset();
  if (health_server_) {
    health_server_->Shutdown(absl::ToChronoTime(absl::Now()));
    health_server_->Wait();
    health_server_.reset();
    health_reflection_.reset();
  }
  log::Info("grpc", "server stopped", {{"address", options_.listen}});
}

}  // namespace ulticode::server
