#include "common/config/file_health.h"

#include <map>

#include "absl/synchronization/mutex.h"

namespace ulticode::config {
namespace {

absl::Mutex& Mu() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

std::map<std::string, FileHealth>& Files() ABSL_EXCLUSIVE_LOCKS_REQUIRED(Mu()) {
  static auto* files = new std::map<std::string, FileHealth>;
  return *files;
}

}  // namespace

void RecordReload(const std::string& path, bool loaded) {
  absl::MutexLock lock(&Mu());
  FileHealth& f = Files()[path];
  f.path = path;
  f.stale = !loaded;
  if (!loaded) ++f.failed_reloads;
}

std::vector<FileHealth> FileHealthSnapshot() {
  absl::MutexLock lock(&Mu());
  std::vector<FileHealth> out;
  for (const auto& [path, f] : Files()) out.push_back(f);
  return out;
}

}  // namespace ulticode::config
