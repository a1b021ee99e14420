#include "owner/runtime/owner_service.h"

#include <memory>

#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/retention/retention.h"
#include "common/seal/seal.h"
#include "common/tlog/note.h"
#include "common/tlog/witnessing.h"
#include "common/worker/periodic.h"
#include "owner/operations/operations_service.h"
#include "owner/outbox/dispatcher_flags.h"
#include "owner/outbox/migrations.h"
#include "owner/outbox/number_attestor.h"
#include "owner/outbox/outbox_store.h"
#include "owner/outbox/proof_reader.h"
#include "owner/outbox/witness.h"
#include "owner/outbox/witness_service.h"

namespace ulticode::runtime {
namespace {

// Bundles the dispatcher and the witness remember as verified: minutes of
// cycles at full speed, against proofs that come within seconds (about
// 100 bytes each).
constexpr size_t kRememberedBundles = 1 << 15;

absl::StatusOr<outbox::Dispatcher*> StartDispatcherAndWitness(audit::Owner owner,
                                                              const OwnerOptions& options,
                                                              ServiceContext& context) {
  outbox::DispatcherOptions dispatch = options.dispatch;
  dispatch.owner = owner;
  dispatch.signer = &context.signer();
  dispatch.keys = &context.keys();
  // The bundles this owner sealed are known to its witness: their proofs'
  // seals cost a few hashes there, not an Ed25519 verification.
  dispatch.seals = &context.Keep(std::make_unique<seal::Verifier>(kRememberedBundles));
  for (absl::string_view file :
       absl::StrSplit(options.previous_signing_key_files, ',', absl::SkipWhitespace())) {
    ASSIGN_OR_RETURN(crypto::SigningKey key, crypto::SigningKey::FromFile(std::string(file)));
    dispatch.previous_keys.push_back(std::move(key));
  }
  dispatch.pg = context.Connection("dispatcher");
  // Cycle commits (PUBLISHED, re-schedules) and sweeps: a lost one leaves the
  // row to be published again (docs/guarantees.md).
  dispatch.pg.asynchronous_commit = true;
  dispatch.redis = context.Redis();
  const std::string audit_stream =
      dispatch.stream.empty() ? audit::StreamFor(owner) : dispatch.stream;
  outbox::Dispatcher& dispatcher =
      context.Start(std::make_unique<outbox::Dispatcher>(dispatch, context.registry()));

  outbox::WitnessOptions witness{owner,           audit_stream,  {}, &context.signer(),
                                 &context.keys(), dispatch.seals};
  ASSIGN_OR_RETURN(witness.log_keys,
                   tlog::VerifiersFromFile<tlog::NoteVerifier>(options.log_keys_file));
  ASSIGN_OR_RETURN(std::unique_ptr<outbox::Witness> made,
                   outbox::Witness::Create(std::move(witness), context.registry()));

  outbox::ProofReaderOptions proofs;
  proofs.owner = owner;
  proofs.stream = tlog::ProofStreamFor(audit_stream);
  proofs.witness = &context.Keep(std::move(made));
  // Entries older than two resend timeouts prove rows that are confirmed
  // or being re-sent (and proved again) anyway.
  proofs.start_lookback = 2 * dispatch.resend_timeout;
  proofs.pg = context.Connection("proofs");
  // A lost CONFIRMED only causes a re-send, which Admin proves again.
  proofs.pg.asynchronous_commit = true;
  proofs.redis = dispatch.redis;
  // Admin writes the proof stream: what this owner reads of it is bounded
  // like what Admin reads of the owners' (a checkpoint entry with its 256
  // proofs is well under 1 MiB).
  proofs.redis.reply_limits = {.max_array_bytes = size_t{4} << 20,
                               .max_array_elements = 1024,
                               .max_element_bytes = size_t{2} << 20};
  context.Start(std::make_unique<outbox::ProofReader>(proofs, context.registry()));
  return &dispatcher;
}

void StartHousekeeping(audit::Owner owner, const outbox::OwnerHousekeepingOptions& options,
                       ServiceContext& context) {
  auto& retention = context.Keep(std::make_unique<retention::Retention>(
      outbox::RetentionTables(options), retention::kMaxBatchSize, context.registry()));
  auto& gauges = context.Keep(std::make_unique<outbox::OutboxGauges>(owner, context.registry()));
  auto& numbers = context.Keep(std::make_unique<outbox::NumberAttestor>(
      owner, context.signer(), outbox::AttestorOptions{.settle = options.number_settle},
      context.registry()));
  context.Start(std::make_unique<worker::Periodic>(
      context.Connection("housekeeping"),
      std::vector<worker::PeriodicJob>{
          {"outbox.retention", options.retention_interval,
           [&retention](pg::Connection* c, const worker::Stopping& stopping) {
             return retention.RunOnce(*c, stopping);
           }},
          {"outbox.gauges", options.sample_interval,
           [&gauges](pg::Connection* c, const worker::Stopping&) { return gauges.Sample(*c); }},
          {"outbox.numbers", options.sample_interval,
           [&numbers](pg::Connection* c, const worker::Stopping&) { return numbers.RunOnce(*c); }}},
      context.registry()));
}

}  // namespace

void RegisterOwnerFlags(config::Flags& flags, const ServiceFlags& common, OwnerOptions* options) {
  outbox::RegisterDispatcherFlags(flags, &options->dispatch);
  outbox::RegisterHousekeepingFlags(flags, &options->housekeeping);
  flags.String("log-keys-file", &options->log_keys_file,
               "Verifier keys of Admin's transparency log, one a line: this owner witnesses the "
               "log, refuses forks and rollbacks, cosigns what it accepts, and confirms its "
               "outbox rows on the log's inclusion proofs");
  flags.Require("log-keys-file", [&common] { return common.migrate_only(); });
  flags.String("previous-audit-signing-key-files", &options->previous_signing_key_files,
               "private keys this owner used before a rotation (comma-separated, mode 0600): "
               "the MACs of outbox rows they made are still checked; drop a file once no row "
               "of its key is PENDING");
  flags.Bool("personal-data-commitments", &options->personal_data_commitments,
             "commit to personal values in audit events (schema_version 2, erasable: "
             "docs/personal-data.md); off embeds them (schema_version 1), for an owner upgraded "
             "before Admin reads version 2");
}

std::vector<migrations::Migration> WithOutboxMigrations(
    const std::vector<migrations::Migration>& owner) {
  std::vector<migrations::Migration> all = owner;
  all.insert(all.end(), outbox::Migrations().begin(), outbox::Migrations().end());
  return all;
}

std::vector<std::string> WithOutboxGrants(const std::vector<std::string>& owner) {
  std::vector<std::string> all = owner;
  all.insert(all.end(), outbox::RuntimeGrants().begin(), outbox::RuntimeGrants().end());
  return all;
}

absl::StatusOr<mutation::MutationHooks> AssembleOwner(audit::Owner owner, OwnerOptions options,
                                                      ServiceContext& context) {
  outbox::SetPersonalDataCommitments(options.personal_data_commitments);
  ASSIGN_OR_RETURN(outbox::Dispatcher * dispatcher,
                   StartDispatcherAndWitness(owner, options, context));
  StartHousekeeping(owner, options.housekeeping, context);
  context.Serve(
      std::make_unique<operations::OutboxOperationsService>(
          owner, context.pool(), context.Authorizer(operations::AccessRules()), context.signer(),
          context.Redis(),
          options.dispatch.stream.empty() ? audit::StreamFor(owner) : options.dispatch.stream),
      operations::kServiceName);
  ASSIGN_OR_RETURN(std::unique_ptr<outbox::WitnessService> witness,
                   outbox::WitnessService::Create(owner, context.pool(),
                                                  context.Authorizer(outbox::WitnessAccessRules()),
                                                  context.signer()));
  context.Serve(std::move(witness), outbox::kWitnessServiceName);
  mutation::MutationHooks hooks;
  hooks.after_commit = [dispatcher] { dispatcher->Wake(); };
  return hooks;
}

}  // namespace ulticode::runtime
