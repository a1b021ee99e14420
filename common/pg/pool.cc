#include "common/pg/pool.h"

#include "absl/strings/str_cat.h"
#include "common/log/log.h"

namespace ulticode::pg {

PooledConnection::~PooledConnection() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Release(std::move(conn_));
}

Pool::Pool(PoolOptions options) : options_(std::move(options)) {}

Pool::~Pool() { Close(); }

absl::StatusOr<PooledConnection> Pool::Acquire() {
  std::unique_ptr<Connection> conn;
  {
    absl::MutexLock lock(&mu_);
    auto can_take = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || !idle_.empty() || in_use_ < options_.max_size;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&can_take), options_.acquire_timeout)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no database connection free within ",
                       absl::FormatDuration(options_.acquire_timeout), " (pool size ",
                       options_.max_size, ")"));
    }
    if (closed_) return absl::UnavailableError("database pool is closed");
    ++in_use_;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++dials_;
    }
  }
  if (conn == nullptr) {
    auto dialled = Connection::Connect(options_.connect);
    if (!dialled.ok()) {
      absl::MutexLock lock(&mu_);
      --in_use_;
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
  }
}

Pool::Stats Pool::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{static_cast<int>(idle_.size()), in_use_, dials_, dropped_};
}

}  // namespace ulticode::pg
