// Dispatcher threads: move committed outbox rows to the owner's Redis Stream.
//
// Each thread owns one PostgreSQL connection and one Redis client. A cycle is
// ONE transaction: it locks a batch of due rows (FOR UPDATE SKIP LOCKED, so
// dispatchers never publish the same row at once), publishes it with one
// pipelined XADD batch while holding the locks, marks the rows PUBLISHED in
// one statement and commits: one write per row instead of a separate claim
// update. It runs again at once while batches come back full (waking
// another thread to help), otherwise it waits for Wake() from a commit of
// this process (mutation::MutationHooks::after_commit; one thread takes
// each wake-up) or the poll interval, whichever comes first. Rows committed
// by other processes are found by the poll: no NOTIFY, which would make
// PostgreSQL serialize every notifying commit through its WAL flush. After
// a cycle that found rows it first lingers briefly, so a busy owner
// publishes many commits per cycle.
//
// Each row's MAC is checked (RowMac, with the key it names) and the rows of
// a cycle are sealed as one bundle (common/seal): one Ed25519 signature per
// cycle, a seal per row, kept with the row so that every later publication
// sends the same seal. A row whose MAC fails was not written by this
// owner's code (someone holding only its database login): DEAD.
//
// Failures never hide in a log line, they are written to the row:
//  - transient (Redis down or slow, PostgreSQL hiccup): the row is
//    rescheduled with capped exponential back-off and jitter, forever;
//  - permanent (an event that can never be published, e.g. too large or not
//    parseable): DEAD at once, with the reason.
// A crash anywhere rolls the cycle back and its rows are due again at once;
// the stream may then see an event twice, which the Admin inbox absorbs. A
// dispatcher that stalls while holding rows (frozen, stuck) is cut off by
// PostgreSQL after `claim_lease` idle in its transaction
// (idle_in_transaction_session_timeout), which releases the rows.
//
// Stop(): no new cycles; the cycle in hand is finished; threads are joined. Thread-safe: Start/Stop
// from one controlling thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/backoff/backoff.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"
#include "common/seal/seal.h"
#include "common/worker/waker.h"
#include "owner/outbox/outbox_store.h"
#include "owner/outbox/resend.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::outbox {

struct DispatcherOptions {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  // Rows of other types were written by a newer release: published untouched.
  audit::KnownEventTypes known_event_types = audit::IsKnownEventType;
  // Stream to publish to; empty means audit::StreamFor(owner).
  std::string stream;
  int threads = 2;
  int batch_size = 256;
  absl::Duration poll_interval = absl::Seconds(1);
  // Woken by this process's commits of audited changes (Wake()); off: the
  // poll interval alone.
  bool wake_on_commit = true;
  // After a cycle that found rows, wait this long before the next claim, so
  // that under load one cycle takes many commits (a wake-up per commit would
  // otherwise mean a cycle per commit). Idle, the first commit is claimed at
  // once.
  absl::Duration linger = absl::Milliseconds(2);
  // How long a cycle may sit idle in its transaction (holding its rows)
  // before PostgreSQL ends the session and other dispatchers take the rows.
  absl::Duration claim_lease = absl::Seconds(30);
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(30)};
  size_t max_event_bytes = audit::kMaxEventBytes;
  // Rows are published again only on evidence of loss (resend.h): at once
  // when their entries are gone unread; when Admin acknowledged them this
  // long ago and they are still unproved, then after twice as long, and so
  // on (RequeueUnproved). Zero turns re-sending off.
  absl::Duration resend_timeout = absl::Seconds(60);
  // Admin's consumer group on the stream (Admin's --inbox-group).
  std::string admin_group = "admin-audit";
  // Seals each cycle's bundle; required.
  const crypto::SigningKey* signer = nullptr;
  // Keys of earlier releases whose rows may still be due (a rotation in
  // progress): their MACs are checked, the bundle is sealed by `signer`.
  std::vector<crypto::SigningKey> previous_keys;
  // The parties' public keys (--public-keys-file): a row whose MAC key is
  // not one of this owner's there is forged, not waiting; a kept seal that
  // verifies with one of them needs no MAC check. Optional.
  const crypto::KeyDirectoryFile* keys = nullptr;
  // Remembers the bundles this dispatcher sealed as verified; shared with
  // the owner's witness, which then checks their seals for a few hashes.
  // The dispatcher's own when null.
  seal::Verifier* seals = nullptr;
  pg::ConnectOptions pg;
  redis::Options redis;
};

// Test seams at the exact crash windows. Returning an error abandons the
// cycle there, as a crash would (its transaction rolls back).
struct FaultHooks {
  std::function<absl::Status(const std::vector<ClaimedRow>&)> after_claim;
  std::function<absl::Status(const std::vector<ClaimedRow>&)> after_publish;
};

struct CycleResult {
  int claimed = 0;
  int published = 0;  // marked PUBLISHED
  int rescheduled = 0;
  int dead = 0;
};

class Dispatcher {
 public:
  Dispatcher(DispatcherOptions options, prometheus::Registry& registry, FaultHooks hooks = {});
  ~Dispatcher();

  void Start();
  void Stop();

  // A commit of this process wrote outbox rows: one waiting thread runs a
  // cycle (wake-ups that come together make one). Nothing with
  // wake_on_commit off. Thread-safe.
  void Wake();

  // One lock-publish-settle cycle (one transaction) on the caller's
  // connections. Used by the threads and by tests.
  absl::StatusOr<CycleResult> RunOnce(pg::Connection& pg, redis::Client& redis);

  // Puts PUBLISHED rows whose entries are lost, or acknowledged long ago
  // and still unproved, back to PENDING (resend.h; thread 0 runs it a few
  // times per resend timeout). Returns how many.
  absl::StatusOr<int64_t> SweepUnconfirmed(pg::Connection& pg, redis::Client& redis);

  // OK when `row` can be published: its kept seal verifies with a key of
  // this owner, or its MAC does. INVALID_ARGUMENT with the reason it never
  // can (DEAD: too large, not an event of this owner, a MAC that does not
  // verify or names a key that is not this owner's), UNAVAILABLE when its
  // MAC's key is this owner's but not loaded here (the row waits for a
  // dispatcher that holds it).
  absl::Status CheckRow(const ClaimedRow& row) const;

 private:
  void WorkerLoop(int index);
  // Whether the seal `row` kept verifies with a key of this owner's.
  bool KeptSealVerifies(const ClaimedRow& row) const;
  // Whether `key_id` is one of this owner's keys in the key directory
  // (true when there is no directory to ask).
  bool OwnersKey(const std::string& key_id) const;
  // Publishes `rows`: those never published as one sealed bundle, the
  // others with the seal they were first published with. Returns each
  // row's entry id and new seal.
  absl::StatusOr<std::vector<Published>> Publish(redis::Client& redis,
                                                 const std::vector<const ClaimedRow*>& rows);
  // The sweep's rows, `limit` at a time, until a batch comes back short.
  template <typename Requeue>
  absl::StatusOr<int64_t> RequeueAll(const Requeue& requeue);

  const DispatcherOptions options_;
  const std::string stream_;
  // key id -> the key, for MAC checks (the signer's and previous_keys).
  absl::flat_hash_map<std::string, const crypto::SigningKey*> mac_keys_;
  // Seals made or checked (one verification a bundle; thread-safe).
  seal::Verifier own_seals_;
  seal::Verifier* const seals_;
  const FaultHooks hooks_;

  worker::Waker waker_;
  std::vector<std::thread> threads_;
  // The sweep's view of the stream (one sweeping thread, or a test).
  StreamWatch watch_;
  AckHistory acked_;

  prometheus::Counter* claimed_;
  prometheus::Counter* published_;
  prometheus::Counter* transient_failures_;
  prometheus::Counter* dead_;
  prometheus::Counter* wakeups_;
  prometheus::Counter* resends_;
  prometheus::Counter* seals_replaced_;
  prometheus::Histogram* lag_;
};

}  // namespace ulticode::outbox
