// Wiring only; see common/runtime/owner_service.h for the start/stop order.
#include "auth/auth_service.h"
#include "common/runtime/owner_service.h"

namespace ulticode::auth {
const std::vector<migrations::Migration>& Migrations();
}

int main(int argc, char** argv) {
  using namespace ulticode;
  runtime::OwnerServiceSpec spec{
      .program = "ulticode-auth",
      .description = "Auth: users, roles and the login policy; every change leaves an audit event.",
      .owner = audit::v1::OWNER_AUTH,
      .grpc_listen = "127.0.0.1:50051",
      .metrics_listen = "127.0.0.1:9101",
      .database = "ulticode_auth",
      .service_name = "ulticode.auth.v1.AuthService",
      .migrations = &auth::Migrations(),
      .runtime_grants = &auth::RuntimeGrants(),
      .access_rules = &auth::AccessRules(),
      .make_service =
          [](pg::Pool& pool, const server::Authorizer& authorizer,
             const crypto::SigningKey& signer) {
            return std::make_unique<auth::AuthServiceImpl>(pool, authorizer, signer);
          },
  };
  return runtime::RunOwnerService(spec, argc, argv);
}
