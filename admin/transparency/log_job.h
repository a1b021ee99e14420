// The transparency log's job in Admin: its flags, its signing key, and the
// periodic run of the Sequencer (every --log-sequence-interval, draining a
// backlog batch after batch), with its metrics:
//   ulticode_log_tree_size            leaves sequenced
//   ulticode_log_checkpoint_size      size of the latest checkpoint signed
//   ulticode_log_checkpoint_timestamp_seconds  when it was signed
//   ulticode_log_sequenced_total, ulticode_log_checkpoints_total
// Only the replica holding the sequencer's lock moves them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "admin/transparency/sequencer.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/pg/connection.h"
#include "common/tlog/note.h"
#include "common/worker/periodic.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::admin::transparency {

inline constexpr char kLogSigningKeyFlag[] = "log-signing-key-file";

struct LogOptions {
  // False: this replica neither sequences nor signs nor feeds the witnesses
  // (another replica does); it still serves the log.
  bool sequencer = true;
  std::string signing_key_file;
  // The checkpoints' origin line, also the log key's name in its verifier
  // key and signature lines.
  std::string origin = "ulticode.local/audit";
  absl::Duration sequence_interval = absl::Milliseconds(100);
  int batch = 1000;
  absl::Duration checkpoint_interval = absl::Milliseconds(500);
  // How long the witness feed waits for an owner's cosignature before it
  // sends the latest checkpoint again.
  absl::Duration witness_resend = absl::Seconds(5);
  // Completeness (completeness.h): how often every replica looks for audit
  // rows without a leaf, and how long a row may wait for one.
  absl::Duration completeness_interval = absl::Seconds(30);
  absl::Duration unlogged_after = absl::Seconds(60);
};

void RegisterLogFlags(config::Flags& flags, LogOptions* options);

class LogJob {
 public:
  // Reads the key; FAILED_PRECONDITION naming the flag when none is set.
  static absl::StatusOr<std::unique_ptr<LogJob>> Create(const LogOptions& options,
                                                        prometheus::Registry& registry);

  // Sequences until a run takes less than a full batch (or stopping).
  absl::Status Run(pg::Connection& conn, const worker::Stopping& stopping);
  // The log's verifier key (c2sp.org/signed-note), for start-up logs.
  std::string VerifierKey() const { return signer_.VerifierKey(); }

 private:
  LogJob(const LogOptions& options, std::unique_ptr<const crypto::SigningKey> key,
         tlog::NoteSigner signer, prometheus::Registry& registry);

  const int batch_;
  const std::unique_ptr<const crypto::SigningKey> key_;  // signer_ signs with it
  const tlog::NoteSigner signer_;
  Sequencer sequencer_;
  prometheus::Gauge& tree_size_;
  prometheus::Gauge& checkpoint_size_;
  prometheus::Gauge& checkpoint_time_;
  prometheus::Counter& sequenced_;
  prometheus::Counter& checkpoints_;
};

}  // namespace ulticode::admin::transparency
