#include "admin/transparency/log_job.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::admin::transparency {

void RegisterLogFlags(config::Flags& flags, LogOptions* options) {
  flags.Bool("log-sequencer", &options->sequencer,
             "Run the log's sequencer, checkpoint signer and witness feed on this replica (one "
             "replica at a time does, whichever holds the lock); false: only serve the log");
  flags.String(kLogSigningKeyFlag, &options->signing_key_file,
               "The transparency log's Ed25519 private key (PKCS#8 PEM, mode 0600): signs every "
               "checkpoint. Verifiers take a set of log keys, so a new key is rolled out by adding "
               "its verifier key to theirs first");
  flags.String("log-origin", &options->origin,
               "The log's name: the first line of every checkpoint, and the log key's name",
               [](const std::string& v) -> absl::Status {
                 if (v.empty() || absl::StrContains(v, "+") ||
                     v.find_first_of(" \t\r\n") != std::string::npos) {
                   return absl::InvalidArgumentError("must be non-empty, without '+' or spaces");
                 }
                 return absl::OkStatus();
               });
  flags.Duration("log-sequence-interval", &options->sequence_interval,
                 "How often the sequencer gives new audit rows their log index",
                 absl::Milliseconds(10), absl::Seconds(10));
  flags.Int("log-sequence-batch", &options->batch, "Audit rows sequenced per transaction", 1,
            100000);
  flags.Duration("log-checkpoint-interval", &options->checkpoint_interval,
                 "The shortest time between two checkpoints: while the log grows, a new one is "
                 "signed this long after the last (plus up to a sequence interval)",
                 absl::Milliseconds(100), absl::Minutes(10));
  flags.Duration("log-witness-resend", &options->witness_resend,
                 "How long the witness feed waits for an owner's cosignature before it sends its "
                 "checkpoint, with every proof since the owner's cosigned size, again",
                 absl::Milliseconds(100), absl::Minutes(10));
  flags.Duration("log-completeness-interval", &options->completeness_interval,
                 "How often every replica looks for audit rows that have no log leaf (one "
                 "anti-join of audit_logs and the leaves) and queues again those that left the "
                 "queue",
                 absl::Seconds(1), absl::Hours(1));
  flags.Duration("log-unlogged-after", &options->unlogged_after,
                 "How long a committed audit row may wait for its log leaf before it counts in "
                 "ulticode_admin_audit_rows_unlogged (and is queued again if it left the queue)",
                 absl::Seconds(1), absl::Hours(24));
}

absl::StatusOr<std::unique_ptr<LogJob>> LogJob::Create(const LogOptions& options,
                                                       prometheus::Registry& registry) {
  if (options.signing_key_file.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--", kLogSigningKeyFlag, ": required (the log signs its checkpoints)"));
  }
  ASSIGN_OR_RETURN(crypto::SigningKey key, crypto::SigningKey::FromFile(options.signing_key_file));
  auto held = std::make_unique<const crypto::SigningKey>(std::move(key));
  ASSIGN_OR_RETURN(tlog::NoteSigner signer, tlog::NoteSigner::Create(options.origin, *held));
  return std::unique_ptr<LogJob>(new LogJob(options, std::move(held), std::move(signer), registry));
}

namespace {

prometheus::Gauge& Gauge(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Counter& Counter(prometheus::Registry& registry, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

LogJob::LogJob(const LogOptions& options, std::unique_ptr<const crypto::SigningKey> key,
               tlog::NoteSigner signer, prometheus::Registry& registry)
    : batch_(options.batch),
      key_(std::move(key)),
      signer_(std::move(signer)),
      sequencer_({options.origin, &signer_, options.batch, options.checkpoint_interval}),
      tree_size_(Gauge(registry, "ulticode_log_tree_size",
                       "Audit rows with a log index: the transparency log's size")),
      checkpoint_size_(Gauge(registry, "ulticode_log_checkpoint_size",
                             "Tree size of the latest checkpoint this replica signed")),
      checkpoint_time_(Gauge(registry, "ulticode_log_checkpoint_timestamp_seconds",
                             "When this replica signed its latest checkpoint")),
      sequenced_(Counter(registry, "ulticode_log_sequenced_total",
                         "Audit rows this replica gave a log index")),
      checkpoints_(
          Counter(registry, "ulticode_log_checkpoints_total", "Checkpoints this replica signed")) {}

absl::Status LogJob::Run(pg::Connection& conn, const worker::Stopping& stopping) {
  while (!stopping()) {
    ASSIGN_OR_RETURN(const SequencerRun run, sequencer_.RunOnce(conn));
    if (run.locked) tree_size_.Set(static_cast<double>(run.size));
    sequenced_.Increment(static_cast<double>(run.sequenced));
    if (run.checkpointed) {
      checkpoints_.Increment();
      checkpoint_size_.Set(static_cast<double>(run.size));
      checkpoint_time_.SetToCurrentTime();
    }
    if (run.taken < batch_) break;
  }
  return absl::OkStatus();
}

}  // namespace ulticode::admin::transparency
