// Wiring only: Auth is the owner skeleton (owner/runtime/owner_service.h)
// plus AuthService; common/runtime/service.h has the start/stop order.
#include "auth/auth_service.h"
#include "auth/migrations.h"
#include "common/base/status_macros.h"
#include "common/runtime/service.h"
#include "common/server/grpc_server.h"
#include "owner/runtime/owner_service.h"

int main(int argc, char** argv) {
  using namespace ulticode;
  runtime::OwnerOptions owner;
  return runtime::RunService(
      {
          .program = "ulticode-auth",
          .component = "auth",
          .description = "Auth: users, roles and the login policy; every change leaves an audit "
                         "event.",
          .grpc_listen = "127.0.0.1:50051",
          .metrics_listen = "127.0.0.1:9101",
          .database = "ulticode_auth",
          .max_receive_bytes = server::kOwnerMaxReceiveBytes,
          .signing_key_flag = runtime::kAuditSigningKeyFlag,
          .signing_key_help = runtime::kAuditSigningKeyHelp,
          .migrations = runtime::WithOutboxMigrations(auth::Migrations()),
          .runtime_grants = runtime::WithOutboxGrants(auth::RuntimeGrants()),
          .register_flags =
              [&](config::Flags& flags, const runtime::ServiceFlags& common) {
                runtime::RegisterOwnerFlags(flags, common, &owner);
              },
          .assemble = [&](runtime::ServiceContext& context) -> absl::Status {
            ASSIGN_OR_RETURN(mutation::MutationHooks hooks,
                             runtime::AssembleOwner(audit::v1::OWNER_AUTH, owner, context));
            context.Serve(
                std::make_unique<auth::AuthServiceImpl>(context.Calls(), context.pool(),
                                                        context.Authorizer(auth::AccessRules()),
                                                        context.signer(), std::move(hooks)),
                "ulticode.auth.v1.AuthService");
            return absl::OkStatus();
          },
      },
      argc, argv);
}
