// A configuration file that is re-read when it changes, so an operator's
// edit (a key added or removed) takes effect without a restart. `T` has
// `static absl::StatusOr<T> FromFile(const std::string&)` and
// `std::string Describe() const` (for the reload log). The file is checked at
// most once per `check_every`; one that no longer loads keeps the last good
// value, is logged once per change and is reported (file_health.h).
// Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config/file_health.h"
#include "common/log/log.h"

namespace ulticode::config {

// mtime, size and inode of `path` ("" when it cannot be stat'ed).
std::string FileStamp(const std::string& path);

template <typename T>
class WatchedFile {
 public:
  static absl::StatusOr<std::unique_ptr<WatchedFile>> Open(
      std::string path, absl::Duration check_every = absl::Seconds(1)) {
    const std::string stamp = FileStamp(path);
    absl::StatusOr<T> first = T::FromFile(path);
    if (!first.ok()) return first.status();
    RecordReload(path, true);  // its series exist, at 0, from the start
    return std::unique_ptr<WatchedFile>(
        new WatchedFile(std::move(path), check_every, *std::move(first), stamp));
  }

  std::shared_ptr<const T> Current() const {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now < next_check_) return current_;
    next_check_ = now + check_every_;
    const std::string stamp = FileStamp(path_);
    if (stamp == stamp_ || stamp == failed_stamp_) return current_;
    absl::StatusOr<T> next = T::FromFile(path_);
    if (!next.ok()) {
      failed_stamp_ = stamp;
      RecordReload(path_, false);
      log::Error("config", "file changed but does not load; keeping the previous version",
                 {{"path", path_}, {"error", next.status().ToString()}});
      return current_;
    }
    stamp_ = stamp;
    failed_stamp_.clear();
    RecordReload(path_, true);
    current_ = std::make_shared<const T>(*std::move(next));
    log::Info("config", "file reloaded", {{"path", path_}, {"content", current_->Describe()}});
    return current_;
  }

 private:
  WatchedFile(std::string path, absl::Duration check_every, T first, std::string stamp)
      : path_(std::move(path)),
        check_every_(check_every),
        current_(std::make_shared<const T>(std::move(first))),
        stamp_(std::move(stamp)),
        next_check_(absl::Now() + check_every) {}

  const std::string path_;
  const absl::Duration check_every_;
  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const T> current_ ABSL_GUARDED_BY(mu_);
  mutable std::string stamp_ ABSL_GUARDED_BY(mu_);
  mutable std::string failed_stamp_ ABSL_GUARDED_BY(mu_);  // the version that did not load
  mutable absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ulticode::config
