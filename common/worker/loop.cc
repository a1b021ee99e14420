#include "common/worker/loop.h"

namespace ulticode::worker {

Loop::Loop(Waker& waker, pg::ConnectOptions pg, backoff::Policy backoff, std::string component)
    : waker_(waker), pg_(std::move(pg)), backoff_(backoff), component_(std::move(component)) {}

pg::Connection* Loop::Database() {
  if (conn_ != nullptr && !conn_->broken()) return conn_.get();
  conn_.reset();
  auto dialled = pg::Connection::Connect(pg_);
  if (!dialled.ok()) {
    Failed("database unavailable", dialled.status());
    return nullptr;
  }
  conn_ = std::move(dialled).value();
  return conn_.get();
}

void Loop::Failed(absl::string_view message, const absl::Status& status, log::Fields fields) {
  fields.emplace_back("error", status.ToString());
  log::Warn(component_, message, fields);
  BackOff();
}

void Loop::BackOff() {
  ++failures_;
  waker_.WaitForWork(backoff::Delay(backoff_, failures_), std::nullopt);
}

}  // namespace ulticode::worker
