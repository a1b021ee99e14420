// AdminService/WatchAuditLogs (docs/watching.md): the transparency log as it
// grows, for each watcher the rows its filters match, in log order.
//
// A watch is a callback-API stream (a reactor): waiting costs it memory, never
// a thread. Three kinds of threads serve every watch at once:
//   - the tail: every --watch-poll-interval it reads the log's size (and the
//     newest checkpoint when the size changed) and the rows the log gained
//     into a cache of the newest --watch-cache-rows rows, then wakes the
//     watches that are behind it, sends progress frames to those that sent
//     nothing for --watch-progress-interval, and ends those whose caller
//     stopped reading; a watch that is caught up takes its rows from the
//     cache (each row read and built once, however many watch it);
//   - --watch-fetch-threads fetchers: each takes the next watch that wants
//     rows the cache does not hold and reads them from PostgreSQL (at most kFetchRows rows among at
//     most kFetchLeaves leaves), then hands them to the watch;
//   - gRPC's callback threads: a watch writes one frame at a time, and asks
//     for more rows once its last frame is written.
// The source of every row is the database (log_leaves joined to audit_logs),
// read by index: history and live rows are the same query, so there is no
// switch to get wrong, and a watch that resumes at a position, on any
// replica, after any restart, gets exactly the rows after it. Frames and
// endings carry that position as an opaque resume token.
//
// Limits: --watch-max-watchers in all and --watch-max-per-principal per
// principal (RESOURCE_EXHAUSTED beyond them; a watch counts until its stream
// is gone). A caller that has not read a frame for --watch-stall-timeout is
// ended with RESOURCE_EXHAUSTED; Stop() ends every watch with UNAVAILABLE.
// Both carry a RetryInfo and an ErrorInfo with the resume token. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "admin/query/audit_rows.h"
#include "common/config/flags.h"
#include "common/pg/connection.h"
#include "common/server/principal.h"
#include "common/worker/waker.h"
#include "grpcpp/support/server_callback.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::admin::watch {

namespace v1 = ::ulticode::admin::v1;

// Rows one fetch reads at most, and leaves it considers at most (a filter
// that matches little is read in bounded steps, each a progress point).
inline constexpr int kFetchRows = 32;
inline constexpr int64_t kFetchLeaves = 10000;

// The opaque resume token of a watch that goes on at leaf `next` (the
// first leaf it has not considered), and the position a token holds
// (INVALID_ARGUMENT "resume_token: ..." for anything else). A token is a
// position in the log, so any filter may resume with it.
std::string ResumeToken(uint64_t next);
absl::StatusOr<uint64_t> DecodeResumeToken(absl::string_view token);

struct WatchOptions {
  pg::ConnectOptions pg;
  absl::Duration poll_interval = absl::Milliseconds(50);
  absl::Duration progress_interval = absl::Seconds(5);
  absl::Duration stall_timeout = absl::Seconds(30);
  int max_watchers = 1000;
  int max_per_principal = 16;
  int fetch_threads = 2;
  // The newest rows kept in memory, shared by the watches that are caught
  // up (0: every watch reads PostgreSQL).
  int cache_rows = 4096;
};

// --watch-* flags.
void RegisterWatchFlags(config::Flags& flags, WatchOptions* options);

class Watch;

class WatchHub {
 public:
  WatchHub(WatchOptions options, prometheus::Registry& registry);
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Starts the tail and the fetchers.
  void Start();
  // Ends every watch (UNAVAILABLE, with its resume token) and refuses new
  // ones: call before gRPC drains, so watches do not hold the drain.
  void EndAll();
  // EndAll(), then stops the threads (after gRPC has drained).
  void Stop();

  // A stream that only finishes with `status` (a caller refused).
  static grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* Refuse(const grpc::Status& status);
  // The stream of one WatchAuditLogs call by `principal`; never null (an
  // invalid request or a limit gets a reactor that only finishes).
  grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* Open(grpc::CallbackServerContext* ctx,
                                                             const v1::WatchAuditLogsRequest& req,
                                                             const server::Principal& principal);

 private:
  friend class Watch;
  struct Tail {
    uint64_t size = 0;
    std::shared_ptr<const v1::SignedCheckpoint> checkpoint;
  };

  void RunTail();
  void RunFetcher();
  // Queues `watch` for a fetch (once: a queued watch is not queued again).
  void WantRows(const std::shared_ptr<Watch>& watch);
  void Closed(Watch* watch);
  Tail tail();
  // The cached rows after `next` that `filters` match, at most kFetchRows,
  // and where the next look starts; false when the cache does not hold
  // `next`.
  bool FromCache(uint64_t next, const query::AuditFilters& filters,
                 std::vector<std::shared_ptr<const v1::WatchAuditLogsResponse>>* frames,
                 uint64_t* after);
  // Reads the rows the log gained since the cache's end into it, while any
  // watch is open (none: the cache is emptied and starts at `size`).
  void FillCache(pg::Connection& conn, uint64_t size);

  const WatchOptions options_;
  worker::Waker waker_;
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<Watch*, std::shared_ptr<Watch>> watches_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> per_principal_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Watch>> wanting_ ABSL_GUARDED_BY(mu_);
  Tail tail_ ABSL_GUARDED_BY(mu_);
  // Rows [cache_first_, cache_first_ + cache_.size()) of the log, in order.
  std::deque<std::shared_ptr<const v1::WatchAuditLogsResponse>> cache_ ABSL_GUARDED_BY(mu_);
  // The newest personal_erasures id when the cache was filled (-1: unknown,
  // so every fill starts over until it can be read).
  int64_t cached_erasure_ ABSL_GUARDED_BY(mu_) = -1;
  uint64_t cache_first_ ABSL_GUARDED_BY(mu_) = 0;

  prometheus::Gauge& open_;
  prometheus::Counter& rows_;
  prometheus::Counter& progress_;
  prometheus::Family<prometheus::Counter>& ended_;
};

}  // namespace ulticode::admin::watch
