// A thread that LISTENs on one PostgreSQL channel and wakes a Waker on every
// notification, so workers react to commits within milliseconds instead of
// waiting out their poll interval.
//
// Losing the connection is harmless: the workers keep polling; the listener
// redials with back-off and, once listening again, wakes the workers once for
// anything committed while it was away. Stops when the Waker stops.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "common/backoff/backoff.h"
#include "common/pg/connection.h"
#include "common/worker/waker.h"

namespace ulticode::worker {

struct NotifyListenerOptions {
  pg::ConnectOptions pg;
  std::string channel;
  // Component name for logs.
  std::string component;
  backoff::Policy backoff{absl::Milliseconds(200), absl::Seconds(10)};
  // Called with the number of notifications received (for a metric).
  std::function<void(size_t)> on_notifications;
};

// Runs the listener on the calling thread until waker.stopping().
void RunNotifyListener(const NotifyListenerOptions& options, Waker& waker);

}  // namespace ulticode::worker
