#include "common/config/watched_file.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace ulticode::config {

std::string FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat(st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, "/", st.st_size, "/", st.st_ino);
}

}  // namespace ulticode::config
