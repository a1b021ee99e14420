// Wiring only; see common/runtime/owner_service.h for the start/stop order.
#include "app/app_service.h"
#include "common/runtime/owner_service.h"

namespace ulticode::app {
const std::vector<migrations::Migration>& Migrations();
}

int main(int argc, char** argv) {
  using namespace ulticode;
  runtime::OwnerServiceSpec spec{
      .program = "ulticode-app",
      .description = "App: problems and contests; every change leaves an audit event.",
      .owner = audit::v1::OWNER_APP,
      .grpc_listen = "127.0.0.1:50052",
      .metrics_listen = "127.0.0.1:9102",
      .database = "ulticode_app",
      .service_name = "ulticode.app.v1.AppService",
      .migrations = &app::Migrations(),
      .runtime_grants = &app::RuntimeGrants(),
      .access_rules = &app::AccessRules(),
      .make_service =
          [](pg::Pool& pool, const server::Authorizer& authorizer,
             const crypto::SigningKey& signer) {
            return std::make_unique<app::AppServiceImpl>(pool, authorizer, signer);
          },
  };
  return runtime::RunOwnerService(spec, argc, argv);
}
