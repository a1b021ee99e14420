#include "tests/support/redis_server.h"

#include <signal.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "tests/support/test_env.h"

namespace ulticode::testing {

RedisServer::RedisServer() : port_(FreePort()) {
  // The same users as the shared test Redis (scripts/test.sh): the default
  // user off, the harness's user with its password. Kept in a file, so a
  // restart (a wipe) keeps them, and ACL SAVE keeps users added later.
  const auto shared = RedisFromEnv();
  if (!shared || shared->user.empty()) return;
  char tmpl[] = "/tmp/ulticode-redis-acl-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) return;
  aclfile_ = tmpl;
  const std::string acl =
      absl::StrCat("user default off resetkeys resetchannels -@all\nuser ", shared->user, " on #",
                   absl::BytesToHexString(crypto::Sha256(shared->password)), " ~* &* +@all\n");
  (void)!::write(fd, acl.data(), acl.size());
  ::close(fd);
}

RedisServer::~RedisServer() {
  Kill();
  if (!aclfile_.empty()) ::unlink(aclfile_.c_str());
}

bool RedisServer::Start() {
  Kill();
  child_ = std::make_unique<ChildProcess>();
  std::vector<std::string> argv = {"redis-server", "--port", absl::StrCat(port_), "--bind",
                                   "127.0.0.1", "--save", "", "--appendonly", "no",
                                   // Bounded as every Redis of the mesh (scripts/lib/servers.sh):
                                   // Admin's defaults for two owners, with noeviction.
                                   "--proto-max-bulk-len", "1mb", "--maxmemory", "642mb",
                                   "--maxmemory-policy", "noeviction", "--maxmemory-clients",
                                   "64mb"};
  if (!aclfile_.empty()) {
    argv.push_back("--aclfile");
    argv.push_back(aclfile_);
  }
  if (!child_->Start(argv)) return false;
  return WaitFor(
      [&] {
        const std::string out = RunCommand(absl::StrCat("redis-cli -p ", port_, " ping")).output;
        return out.find("PONG") != std::string::npos || out.find("NOAUTH") != std::string::npos;
      },
      std::chrono::seconds(10));
}

void RedisServer::Kill() {
  if (child_) child_->Stop(SIGKILL, std::chrono::seconds(5));
  child_.reset();
}

void RedisServer::Freeze() {
  if (child_) ::kill(child_->pid(), SIGSTOP);
}

void RedisServer::Thaw() {
  if (child_) ::kill(child_->pid(), SIGCONT);
}

}  // namespace ulticode::testing
