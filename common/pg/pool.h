// A bounded pool of PostgreSQL connections.
//
// At most `max_size` connections exist; Acquire() hands one out exclusively
// and waits up to `acquire_timeout` for one to come back (RESOURCE_EXHAUSTED
// after that). Connections are dialled lazily. A connection returned broken
// is dropped, and its slot redials on the next Acquire, so a restarted server
// or a killed backend heals by itself. With a registry it exports
// `ulticode_pg_pool_connections{pool,state}` (in_use, idle),
// `ulticode_pg_pool_max_connections{pool}`, `ulticode_pg_pool_waiters{pool}`
// and `ulticode_pg_pool_acquire_seconds{pool}` (time to get a connection,
// timeouts included). Thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ulticode::pg {

struct PoolOptions {
  ConnectOptions connect;
  int max_size = 8;
  absl::Duration acquire_timeout = absl::Seconds(5);
  // Metrics go here when set, labelled pool=`name`.
  prometheus::Registry* registry = nullptr;
  std::string name = "main";
};

class Pool;

// An exclusively held pooled connection; returns itself to the pool when
// destroyed (dropped instead when broken). Move-only.
class PooledConnection {
 public:
  PooledConnection(PooledConnection&& other) noexcept
      : pool_(other.pool_), conn_(std::move(other.conn_)) {
    other.pool_ = nullptr;
  }
  PooledConnection& operator=(PooledConnection&&) = delete;
  ~PooledConnection();

  Connection* operator->() { return conn_.get(); }
  Connection& operator*() { return *conn_; }
  Connection* get() { return conn_.get(); }

 private:
  friend class Pool;
  PooledConnection(Pool* pool, std::unique_ptr<Connection> conn)
      : pool_(pool), conn_(std::move(conn)) {}
  Pool* pool_;
  std::unique_ptr<Connection> conn_;
};

class Pool {
 public:
  explicit Pool(PoolOptions options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  absl::StatusOr<PooledConnection> Acquire();

  // Closes idle connections and refuses further Acquire() calls
  // (UNAVAILABLE). Connections in use close when they come back.
  void Close();

  struct Stats {
    int idle = 0;
    int in_use = 0;
    int64_t dials = 0;
    int64_t dropped = 0;
  };
  Stats stats() const;

 private:
  friend class PooledConnection;
  void Release(std::unique_ptr<Connection> conn);
  void Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PoolOptions options_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // Slots reserved for dials in progress count as in use.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t dials_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;

  prometheus::Gauge* in_use_gauge_ = nullptr;  // all null without a registry
  prometheus::Gauge* idle_gauge_ = nullptr;
  prometheus::Gauge* waiters_gauge_ = nullptr;
  prometheus::Histogram* acquire_seconds_ = nullptr;
};

}  // namespace ulticode::pg
