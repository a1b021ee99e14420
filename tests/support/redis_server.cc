#include "tests/support/redis_server.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "tests/support/test_env.h"

namespace ulticode::testing {

RedisServer::RedisServer() : port_(FreePort()) {}

RedisServer::~RedisServer() { Kill(); }

bool RedisServer::Start() {
  Kill();
  child_ = std::make_unique<ChildProcess>();
  if (!child_->Start({"redis-server", "--port", absl::StrCat(port_), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no"})) {
    return false;
  }
  return WaitFor(
      [&] {
        return RunCommand(absl::StrCat("redis-cli -p ", port_, " ping")).output.find("PONG") !=
               std::string::npos;
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
