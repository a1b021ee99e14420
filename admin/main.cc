// Wiring only: Admin's parts are in admin/admin.h; common/runtime/service.h
// has the start/stop order.
#include "admin/admin.h"
#include "admin/migrations.h"
#include "common/runtime/service.h"
#include "common/server/grpc_server.h"

int main(int argc, char** argv) {
  using namespace ulticode;
  admin::Options options;
  return runtime::RunService(
      {
          .program = "ulticode-admin",
          .component = "admin",
          .description = "Admin: audit inbox, audit_logs and the audit query API.",
          .grpc_listen = "127.0.0.1:50053",
          .metrics_listen = "127.0.0.1:9103",
          .database = "ulticode_admin",
          .max_receive_bytes = server::kAdminMaxReceiveBytes,
          .signing_key_flag = admin::kAuditSigningKeyFlag,
          .signing_key_help = admin::kAuditSigningKeyHelp,
          .migrations = admin::Migrations(),
          .runtime_grants = admin::RuntimeGrants(),
          .register_flags =
              [&](config::Flags& flags, const runtime::ServiceFlags&) {
                admin::RegisterFlags(flags, &options);
              },
          .assemble =
              [&](runtime::ServiceContext& context) { return admin::Assemble(options, context); },
      },
      argc, argv);
}
