// Admin as one service: its flags, the grants of its runtime role, and the
// parts it runs (lease consumer, inbox bridge, the transparency log,
// housekeeping, the AdminService query API and its watches, the
// AuditLogService and the AdminOperations repairs). Admin's main() is
// a runtime::ServiceSpec made of these.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "admin/consumer/lease_consumer.h"
#include "admin/inbox/bridge.h"
#include "admin/maintenance/housekeeping.h"
#include "admin/transparency/log_job.h"
#include "admin/watch/watch_hub.h"
#include "common/config/flags.h"
#include "common/runtime/service.h"

namespace ulticode::admin {

// The signing-key flag of Admin (the owners' has the same name).
inline constexpr char kAuditSigningKeyFlag[] = "audit-signing-key-file";
inline constexpr char kAuditSigningKeyHelp[] =
    "Admin's Ed25519 private key (PKCS#8 PEM, mode 0600): signs every audit record of Admin's "
    "own operations";

struct Options {
  inbox::BridgeOptions bridge;
  std::string auth_stream;  // empty: audit::StreamFor(OWNER_AUTH)
  std::string app_stream;
  consumer::ConsumerOptions consumer;
  maintenance::AdminHousekeepingOptions housekeeping;
  transparency::LogOptions log;
  watch::WatchOptions watch;
  // --query-max-cost (query::QueryServiceOptions::max_cost).
  int64_t query_max_cost = 100000;
  // --export-max-concurrent (query::QueryServiceOptions::max_exports).
  int64_t export_max_concurrent = 2;
  // ErasePersonalData's way to the owners: "auth=host:port,app=host:port"
  // (--owner-operations), its token and CA files.
  std::string owner_operations;
  std::string owner_token_file;
  std::string owner_cacert;
  // --personal-data-commitments for Admin's own records.
  bool personal_data_commitments = true;
};

// The --inbox-*, --consumer-*, --log-*, --watch-*, --query-max-cost,
// --export-max-concurrent, --owner-*, --personal-data-commitments, retention
// and sampling flags.
void RegisterFlags(config::Flags& flags, Options* options);

// Least privilege for Admin's runtime role: the audit trail is append-only
// (INSERT and SELECT on audit_logs, never UPDATE, DELETE or TRUNCATE).
const std::vector<std::string>& RuntimeGrants();

// Starts the lease consumer, the inbox bridge, the log's sequencer and the
// housekeeping jobs, and serves AdminService, AuditLogService and
// AdminOperations.
absl::Status Assemble(Options options, runtime::ServiceContext& context);

}  // namespace ulticode::admin
