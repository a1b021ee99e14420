#include "tests/support/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/support/test_env.h"

namespace ulticode::testing {

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && Running()) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
  if (!log_path_.empty()) ::unlink(log_path_.c_str());
}

bool ChildProcess::Start(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  char tmpl[] = "/tmp/ulticode-child-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) return false;
  log_path_ = tmpl;
  pid_ = ::fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
    // Servers block SIGTERM/SIGINT themselves; start from a clean mask.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::perror("execvp");
    ::_exit(127);
  }
  ::close(fd);
  return true;
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int st;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    pid_ = -pid_;
    return false;
  }
  return r == 0;
}

int ChildProcess::Stop(int sig, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return status_;
  ::kill(pid_, sig);
  if (!WaitFor([this] { return !Running(); }, timeout)) return -1;
  return status_;
}

std::string ChildProcess::Output() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int st = ::pclose(pipe);
  result.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return result;
}

int FreePort() {
  // Below the kernel's ephemeral range (32768+ here), so that a server
  // restarted on its port never finds it taken by some client connection's
  // local end; random within 20000-32000 and checked bindable.
  static std::atomic<uint64_t> calls{0};
  std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(::getpid()) << 20) ^ ++calls);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = 20000 + static_cast<int>(rng() % 12000);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

int64_t ProcessMemory(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string digits;
    for (char c : line) {
      if (c >= '0' && c <= '9') digits += c;
    }
    return digits.empty() ? -1 : std::stoll(digits) * 1024;  // kB
  }
  return -1;
}

}  // namespace ulticode::testing
