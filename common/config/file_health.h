// How this process's watched configuration files (key directory, JWKS, TLS
// files) last reloaded, for the metrics: a file that changed on disk but does
// not load keeps its previous version in use, so a key revoked by editing the
// file with a mistake in it stays trusted. That must be seen
// (ulticode_config_file_stale, alert UlticodeConfigFileStale), not only
// logged. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ulticode::config {

struct FileHealth {
  std::string path;
  int64_t failed_reloads = 0;  // changes of the file that did not load
  bool stale = false;          // the file on disk does not load now
};

// `path` was loaded (true) or failed to load after a change (false).
void RecordReload(const std::string& path, bool loaded);

// Every file recorded so far, in path order.
std::vector<FileHealth> FileHealthSnapshot();

}  // namespace ulticode::config
