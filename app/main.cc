// Wiring only: App is the owner skeleton (owner/runtime/owner_service.h)
// plus AppService; common/runtime/service.h has the start/stop order.
#include "app/app_service.h"
#include "app/migrations.h"
#include "common/base/status_macros.h"
#include "common/runtime/service.h"
#include "common/server/grpc_server.h"
#include "owner/runtime/owner_service.h"

int main(int argc, char** argv) {
  using namespace ulticode;
  runtime::OwnerOptions owner;
  return runtime::RunService(
      {
          .program = "ulticode-app",
          .component = "app",
          .description = "App: problems and contests; every change leaves an audit event.",
          .grpc_listen = "127.0.0.1:50052",
          .metrics_listen = "127.0.0.1:9102",
          .database = "ulticode_app",
          .max_receive_bytes = server::kOwnerMaxReceiveBytes,
          .signing_key_flag = runtime::kAuditSigningKeyFlag,
          .signing_key_help = runtime::kAuditSigningKeyHelp,
          .migrations = runtime::WithOutboxMigrations(app::Migrations()),
          .runtime_grants = runtime::WithOutboxGrants(app::RuntimeGrants()),
          .register_flags =
              [&](config::Flags& flags, const runtime::ServiceFlags& common) {
                runtime::RegisterOwnerFlags(flags, common, &owner);
              },
          .assemble = [&](runtime::ServiceContext& context) -> absl::Status {
            ASSIGN_OR_RETURN(mutation::MutationHooks hooks,
                             runtime::AssembleOwner(audit::v1::OWNER_APP, owner, context));
            context.Serve(
                std::make_unique<app::AppServiceImpl>(context.Calls(), context.pool(),
                                                      context.Authorizer(app::AccessRules()),
                                                      context.signer(), std::move(hooks)),
                "ulticode.app.v1.AppService");
            return absl::OkStatus();
          },
      },
      argc, argv);
}
