// What every data owner (Auth, App) runs beside its own gRPC service: the
// outbox's schema and grants after the owner's, the dispatcher, the witness
// of Admin's log and its proof reader, the outbox housekeeping and the OutboxOperations service. An
// owner's main() is a ServiceSpec (service.h) made of these and its service.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/audit/event.h"
#include "common/config/flags.h"
#include "common/migrations/migrations.h"
#include "common/runtime/service.h"
#include "owner/mutation/mutation.h"
#include "owner/outbox/dispatcher.h"
#include "owner/outbox/housekeeping.h"

namespace ulticode::runtime {

// The signing-key flag of every owner.
inline constexpr char kAuditSigningKeyFlag[] = "audit-signing-key-file";
inline constexpr char kAuditSigningKeyHelp[] =
    "this owner's Ed25519 private key (PKCS#8 PEM, mode 0600): MACs every outbox row in its "
    "transaction and seals each published bundle of them";

struct OwnerOptions {
  outbox::DispatcherOptions dispatch;
  outbox::OwnerHousekeepingOptions housekeeping;
  // The verifier keys of Admin's transparency log: the owner witnesses it
  // and confirms its rows on the log's proofs (outbox/witness.h).
  std::string log_keys_file;
  // Private keys this owner signed with before (a rotation in progress):
  // the MACs of rows they made are still checked. Comma-separated paths.
  std::string previous_signing_key_files;
  // Personal values committed to (schema_version 2), not embedded
  // (outbox::SetPersonalDataCommitments).
  bool personal_data_commitments = true;
};

// The --dispatch-*, --log-keys-file (required unless the run only
// migrates), --previous-audit-signing-key-files, retention and sampling
// flags.
void RegisterOwnerFlags(config::Flags& flags, const ServiceFlags& common, OwnerOptions* options);

// The owner's own migrations (or grants) followed by the outbox's.
std::vector<migrations::Migration> WithOutboxMigrations(
    const std::vector<migrations::Migration>& owner);
std::vector<std::string> WithOutboxGrants(const std::vector<std::string>& owner);

// Starts the dispatcher, the witness and the housekeeping jobs of
// `owner`, and serves OutboxOperations. Returns the hooks the owner's
// mutating service runs with: each commit of an audited change wakes the
// dispatcher.
absl::StatusOr<mutation::MutationHooks> AssembleOwner(audit::Owner owner, OwnerOptions options,
                                                      ServiceContext& context);

}  // namespace ulticode::runtime
