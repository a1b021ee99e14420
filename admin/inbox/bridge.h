// The inbox bridge: takes events over from the owner streams into
// consumer_inbox, and only then acknowledges them.
//
// One thread per owner stream, each with its own Redis client and PostgreSQL
// connection, reading as one consumer (unique per process) of group
// `admin-audit`. A cycle reads a batch (XREADGROUP BLOCK + COUNT), validates
// every entry, and in ONE transaction inserts the valid ones if absent and
// stores the poison; after COMMIT it XACKs the whole batch. Hence:
//  - crash before the commit: nothing was acknowledged; the entries stay in
//    this consumer's pending list and another bridge takes them over with
//    XAUTOCLAIM once idle for `claim_idle` (this process re-reads its own
//    pending list first after any failure);
//  - crash after the commit, before XACK: the re-delivery finds the event in
//    the inbox with the same bytes, so it is acknowledged as a duplicate;
//  - the same id with different bytes is a conflict: poison, never an overwrite.
// With `write_audit_logs` (the service's default) the same transaction inserts
// first deliveries PROCESSED together with their audit_logs rows: one commit
// per batch takes an event from the stream to the audit trail. If that
// transaction fails for any reason but a lost connection, the batch is
// inserted PENDING instead and the lease consumer retries it (back-off, DEAD).
// The owner learns nothing from the XACK: it marks its outbox rows
// CONFIRMED only on the log's inclusion proofs (transparency/witness_feed.h),
// and publishes again what is lost on the way, which is what makes a Redis
// that loses data harmless. A re-delivered event already in the inbox asks
// the witness feed to prove it again (RequestProofs).
// A missing group (Redis lost its data, stream deleted) is re-created with
// MKSTREAM from id 0; whatever is re-read is absorbed by the inbox.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "admin/audit_logs/writer.h"
#include "admin/inbox/batch.h"
#include "admin/inbox/entry_validation.h"
#include "admin/inbox/inbox_store.h"
#include "common/backoff/backoff.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/worker/waker.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::admin::inbox {

struct BridgeOptions {
  // Owner -> stream key; one reader thread each.
  std::vector<std::pair<audit::Owner, std::string>> streams;
  std::string group = "admin-audit";
  // Consumer name within the group; unique per process. Empty: host-pid.
  std::string consumer_name;
  // consumer_inbox.consumer of the rows this bridge writes.
  std::string inbox_consumer = "audit_logs";
  // Write audit_logs rows in the inbox transaction (the common path); false:
  // every row goes through the lease consumer.
  bool write_audit_logs = false;
  int batch_size = 256;
  absl::Duration block = absl::Seconds(1);
  // Entries pending this long with another consumer are taken over.
  absl::Duration claim_idle = absl::Seconds(30);
  // How often to scan the group's pending list for such entries.
  absl::Duration claim_interval = absl::Seconds(5);
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(10)};
  ValidationLimits limits;
  // The owners' public keys (entries of "auth" and "app"); required.
  const crypto::KeyDirectoryFile* keys = nullptr;
  pg::ConnectOptions pg;
  redis::Options redis;
};

// Test seams at the crash windows. An error abandons the batch there, as a
// crash would: nothing after it runs.
struct BridgeHooks {
  // After validation, before the inbox transaction.
  std::function<absl::Status(const std::vector<redis::StreamEntry>&)> before_insert;
  // Inside the inbox transaction, after its inserts, before COMMIT (a replica
  // frozen here holds the batch's rows uncommitted).
  std::function<absl::Status(const std::vector<redis::StreamEntry>&)> before_commit;
  // After COMMIT, before XACK.
  std::function<absl::Status(const std::vector<redis::StreamEntry>&)> after_commit;
};

struct BridgeCycle {
  int read = 0;
  int inserted = 0;
  int written = 0;  // audit_logs rows written in the inbox transaction
  int duplicates = 0;
  int poison = 0;  // including conflicts
  int acked = 0;
  int group_created = 0;
};

// Per-stream reading state, owned by the stream's thread.
struct StreamCursor {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  std::string stream;
  bool group_ready = false;
  // Re-read this consumer's own pending entries before new ones (at start and
  // after a failed batch).
  bool read_own_pending = true;
  // The last cycle read own pending entries: this one reads new entries (and
  // takes over idle ones) first. A batch that cannot settle (another replica
  // froze with the same events uncommitted) is retried every other cycle and
  // never keeps the stream's new entries waiting.
  bool new_entries_next = false;
  absl::Time next_autoclaim = absl::InfinitePast();
  std::string autoclaim_start = "0-0";
  // Pending ids whose entries vanished (XAUTOCLAIM already dropped them from
  // the pending list): carried into every batch until one commits, so their
  // `deleted` poison rows cannot be lost with a failed batch.
  std::vector<std::string> vanished;
};

// Redis options for any connection of Admin's that reads the owner streams
// (the bridge, the stream gauges, GetPipelineStatus: XINFO returns whole
// entries too). Whoever can XADD to a stream chooses the size of what its
// reader gets: an entry over the size limit is not read at all (poison
// too_large, fields omitted), and a single value over 2 MiB (a Redis without
// proto-max-bulk-len) fails the read before it is buffered. Admin then holds
// at most batch_size entries of max_entry_bytes per stream.
redis::Options ReadingOptions(const BridgeOptions& options);

class InboxBridge {
 public:
  InboxBridge(BridgeOptions options, prometheus::Registry& registry, BridgeHooks hooks = {});
  ~InboxBridge();

  void Start();
  void Stop();

  const std::string& consumer_name() const { return consumer_name_; }

  // One read-validate-insert-ack cycle for one stream on the caller's
  // connections (used by the threads and by tests).
  absl::StatusOr<BridgeCycle> RunOnce(pg::Connection& pg, redis::Client& redis,
                                      StreamCursor& cursor);

 private:
  absl::StatusOr<std::vector<redis::StreamEntry>> Read(redis::Client& redis, StreamCursor& cursor,
                                                       BridgeCycle& cycle);
  // Prepare, absorb, acknowledge: the cycle after the read.
  absl::StatusOr<BridgeCycle> TakeOverBatch(pg::Connection& pg, redis::Client& redis,
                                            const StreamCursor& cursor,
                                            const std::vector<redis::StreamEntry>& entries,
                                            BridgeCycle cycle);
  struct Absorbed {
    InsertedBatch inserted;
    std::vector<Poison> poison;  // the batch's refusals, plus conflicts found on insert
  };
  // The inbox transaction: insert if absent (PROCESSED with audit rows when
  // `direct`), store the poison, commit.
  absl::StatusOr<Absorbed> Absorb(pg::Connection& pg, const std::string& stream,
                                  const std::vector<redis::StreamEntry>& entries,
                                  const PreparedBatch& batch, bool direct);
  // Absorb with audit rows when so configured; when the database refused
  // them (and the connection still works), again without: the lease
  // consumer then retries each event with back-off.
  absl::StatusOr<Absorbed> AbsorbOrFallBack(pg::Connection& pg, const std::string& stream,
                                            const std::vector<redis::StreamEntry>& entries,
                                            const PreparedBatch& batch);
  // Outcome counters, poison logs and the arrival lag of first deliveries.
  void Count(const StreamCursor& cursor, const Absorbed& absorbed, BridgeCycle& cycle);
  void StreamLoop(size_t index);

  const BridgeOptions options_;
  const std::string consumer_name_;
  const BridgeHooks hooks_;
  worker::Waker waker_;
  std::vector<std::thread> threads_;
  // Bundle signatures already verified: one Ed25519 verification a bundle.
  seal::Verifier seals_;

  audit_logs::WriterMetrics writer_metrics_;
  prometheus::Counter* direct_fallbacks_;
  prometheus::Family<prometheus::Counter>* entries_;
  prometheus::Family<prometheus::Counter>* poison_;
  prometheus::Family<prometheus::Counter>* personal_values_;
  prometheus::Family<prometheus::Counter>* group_created_;
  prometheus::Family<prometheus::Counter>* autoclaimed_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Histogram>* lag_;
};

}  // namespace ulticode::admin::inbox
