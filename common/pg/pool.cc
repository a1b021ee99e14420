#include "common/pg/pool.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"

namespace ulticode::pg {

PooledConnection::~PooledConnection() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Release(std::move(conn_));
}

Pool::Pool(PoolOptions options) : options_(std::move(options)) {
  if (options_.registry == nullptr) return;
  prometheus::Registry& r = *options_.registry;
  const std::string& pool = options_.name;
  auto& connections = prometheus::BuildGauge()
                          .Name("ulticode_pg_pool_connections")
                          .Help("PostgreSQL pool connections by state (in_use, idle)")
                          .Register(r);
  in_use_gauge_ = &connections.Add({{"pool", pool}, {"state", "in_use"}});
  idle_gauge_ = &connections.Add({{"pool", pool}, {"state", "idle"}});
  prometheus::BuildGauge()
      .Name("ulticode_pg_pool_max_connections")
      .Help("Size limit of the PostgreSQL pool")
      .Register(r)
      .Add({{"pool", pool}})
      .Set(options_.max_size);
  waiters_gauge_ = &prometheus::BuildGauge()
                        .Name("ulticode_pg_pool_waiters")
                        .Help("Callers waiting for a PostgreSQL pool connection")
                        .Register(r)
                        .Add({{"pool", pool}});
  acquire_seconds_ = &prometheus::BuildHistogram()
                          .Name("ulticode_pg_pool_acquire_seconds")
                          .Help("Time to get a PostgreSQL pool connection (timeouts included)")
                          .Register(r)
                          .Add({{"pool", pool}}, metrics::LatencyBuckets());
}

void Pool::Publish() {
  if (in_use_gauge_ == nullptr) return;
  in_use_gauge_->Set(in_use_);
  idle_gauge_->Set(static_cast<double>(idle_.size()));
  waiters_gauge_->Set(waiters_);
}

Pool::~Pool() { Close(); }

absl::StatusOr<PooledConnection> Pool::Acquire() {
  std::unique_ptr<Connection> conn;
  {
    const absl::Time start = absl::Now();
    absl::MutexLock lock(&mu_);
    auto can_take = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || !idle_.empty() || in_use_ < options_.max_size;
    };
    ++waiters_;
    Publish();
    const bool got = mu_.AwaitWithTimeout(absl::Condition(&can_take), options_.acquire_timeout);
    --waiters_;
    if (acquire_seconds_ != nullptr) {
      acquire_seconds_->Observe(absl::ToDoubleSeconds(absl::Now() - start));
    }
    if (!got) {
      Publish();
      return absl::ResourceExhaustedError(absl::StrCat(
          "no database connection free within ", absl::FormatDuration(options_.acquire_timeout),
          " (pool size ", options_.max_size, ")"));
    }
    if (closed_) {
      Publish();
      return absl::UnavailableError("database pool is closed");
    }
    ++in_use_;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++dials_;
    }
    Publish();
  }
  if (conn == nullptr) {
    auto dialled = Connection::Connect(options_.connect);
    if (!dialled.ok()) {
      absl::MutexLock lock(&mu_);
      --in_use_;
      Publish();
      return dialled.status();
    }
    conn = std::move(dialled).value();
  }
  return PooledConnection(this, std::move(conn));
}

void Pool::Release(std::unique_ptr<Connection> conn) {
  const bool broken = conn->broken();
  std::unique_ptr<Connection> to_close;
  {
    absl::MutexLock lock(&mu_);
    --in_use_;
    if (broken || closed_) {
      if (broken) ++dropped_;
      to_close = std::move(conn);
    } else {
      idle_.push_back(std::move(conn));
    }
    Publish();
  }
  if (broken) log::Warn("pg.pool", "dropped a broken connection; the next acquire redials");
  // `to_close` is destroyed here, outside the lock.
}

void Pool::Close() {
  std::vector<std::unique_ptr<Connection>> closing;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    closing.swap(idle_);
    Publish();
  }
}

Pool::Stats Pool::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{static_cast<int>(idle_.size()), in_use_, dials_, dropped_};
}

}  // namespace ulticode::pg
