#include "common/worker/instance_id.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace ulticode::worker {

std::string DefaultInstanceId() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "-", ::getpid());
}

}  // namespace ulticode::worker
