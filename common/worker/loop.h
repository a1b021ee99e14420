// The per-thread state every worker loop shares (dispatcher, proof reader,
// inbox bridge, lease consumer): its own PostgreSQL connection, dialled on
// first use and again after it broke, and the count of consecutive failures
// that drives the back-off. Waits happen on the Waker, so Stop() is prompt.
// One per thread; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/backoff/backoff.h"
#include "common/log/log.h"
#include "common/pg/connection.h"
#include "common/worker/waker.h"

namespace ulticode::worker {

class Loop {
 public:
  Loop(Waker& waker, pg::ConnectOptions pg, backoff::Policy backoff, std::string component);

  // The connection, dialling it when needed. nullptr when the dial failed:
  // the failure was logged and its back-off already waited out; go round.
  pg::Connection* Database();

  // A failed cycle: logs `message` with the error (and `fields`), then waits
  // the back-off for the consecutive failures so far.
  void Failed(absl::string_view message, const absl::Status& status, log::Fields fields = {});
  // Backs off without logging (the caller reported already).
  void BackOff();
  // A good cycle resets the back-off.
  void Succeeded() { failures_ = 0; }

 private:
  Waker& waker_;
  const pg::ConnectOptions pg_;
  const backoff::Policy backoff_;
  const std::string component_;
  std::unique_ptr<pg::Connection> conn_;
  int64_t failures_ = 0;
};

}  // namespace ulticode::worker
