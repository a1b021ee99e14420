#include "common/worker/notify_listener.h"

#include <memory>

#include "common/log/log.h"

namespace ulticode::worker {

void RunNotifyListener(const NotifyListenerOptions& options, Waker& waker) {
  std::unique_ptr<pg::Connection> conn;
  int64_t failures = 0;
  while (!waker.stopping()) {
    if (conn == nullptr || conn->broken()) {
      auto dialled = pg::Connection::Connect(options.pg);
      absl::Status s = dialled.ok() ? (*dialled)->Listen(options.channel) : dialled.status();
      if (!s.ok()) {
        ++failures;
        conn.reset();
        log::Warn(options.component, "listener cannot LISTEN; polling meanwhile",
                  {{"channel", options.channel}, {"error", s.ToString()}});
        waker.WaitForWork(backoff::Delay(options.backoff, failures), std::nullopt);
        continue;
      }
      conn = std::move(dialled).value();
      failures = 0;
      waker.Wake();  // anything committed while we were not listening
    }
    auto got = conn->WaitForNotifications(absl::Milliseconds(250));
    if (!got.ok()) {
      ++failures;
      conn.reset();
      waker.WaitForWork(backoff::Delay(options.backoff, failures), std::nullopt);
      continue;
    }
    if (!got->empty()) {
      if (options.on_notifications) options.on_notifications(got->size());
      waker.Wake();
    }
  }
}

}  // namespace ulticode::worker
