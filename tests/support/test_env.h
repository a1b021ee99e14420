// Where integration tests find the real PostgreSQL and Redis that
// scripts/test.sh starts, and helpers to wait for conditions with a deadline.
//
// Environment (set by scripts/test.sh):
//   ULTICODE_TEST_PG_HOST, ULTICODE_TEST_PG_PORT, ULTICODE_TEST_PG_USER
//   ULTICODE_TEST_REDIS_HOST, ULTICODE_TEST_REDIS_PORT
//   ULTICODE_TEST_BIN_DIR  (build directory, to find server binaries)
// When they are missing a test is skipped locally, but FAILS when CI=true.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "tests/support/process.h"

namespace ulticode::testing {

struct PgEndpoint {
  std::string host;
  int port = 0;
  std::string user;
  // A streaming standby on `host` (0: none). Connections then list both
  // servers and take whichever is the primary (target_session_attrs).
  int standby_port = 0;
  // "host=... port=..." (both servers when there is a standby).
  std::string Server() const;
  // libpq conninfo for `dbname` on this server.
  std::string ConnInfo(const std::string& dbname) const;
};

struct RedisEndpoint {
  std::string host;
  int port = 0;
  // The test harness's all-powerful ACL user (the default user is off in
  // scripts/test.sh's Redis), and the file holding its password.
  std::string user;
  std::string password;
  std::string password_file;
};

std::optional<PgEndpoint> PgFromEnv();
std::optional<RedisEndpoint> RedisFromEnv();

// True when running in CI (CI=true): missing servers are failures there.
bool InCi();

// Creates a fresh database named `<prefix>_<random>` on the test server and
// returns its name. Each test owns its database, so tests never see each
// other's rows. Aborts the test on failure.
std::string CreateScratchDatabase(const PgEndpoint& pg, const std::string& prefix);

// The seed of a generated test: the number in `env_var` when set (to
// reproduce a run), a random one otherwise; printed as "[tag] seed N
// (ENV_VAR=N reproduces it)" so that a failing run can be repeated.
uint32_t SeedFromEnv(const char* env_var, const char* tag);

// A request id (a UUID, as every mutation takes) standing for `name`: the
// same name gives the same id within a process.
std::string RequestIdFor(std::string_view name);

// A random suffix for stream keys, consumer names and the like.
std::string RandomSuffix();

// Checks `condition` every `poll` until it holds (true) or `timeout` passed
// (false). Never a fixed sleep. A condition that starts processes or scrapes
// pages wants a longer poll than the default.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(5));

// Directory that holds the built binaries (ULTICODE_TEST_BIN_DIR).
std::string BinDir();
// The repository root (ULTICODE_TEST_SOURCE_DIR), to find scripts.
std::string SourceDir();

// Runs `body` in bash with scripts/lib/servers.sh sourced (the same helpers
// scripts/test.sh and run-local use: servers, certificates, token keys).
CommandResult RunServersSh(const std::string& body);

}  // namespace ulticode::testing

// Use at the top of an integration test (or in SetUp). Skips locally, fails in CI.
#define ULTI_REQUIRE_PG(var)                                                           \
  auto var##_opt = ::ulticode::testing::PgFromEnv();                                   \
  if (!var##_opt) {                                                                    \
    if (::ulticode::testing::InCi()) FAIL() << "ULTICODE_TEST_PG_* not set (CI=true)"; \
    GTEST_SKIP() << "PostgreSQL not configured; run scripts/test.sh";                  \
  }                                                                                    \
  const ::ulticode::testing::PgEndpoint var = *var##_opt

#define ULTI_REQUIRE_REDIS(var)                                                           \
  auto var##_opt = ::ulticode::testing::RedisFromEnv();                                   \
  if (!var##_opt) {                                                                       \
    if (::ulticode::testing::InCi()) FAIL() << "ULTICODE_TEST_REDIS_* not set (CI=true)"; \
    GTEST_SKIP() << "Redis not configured; run scripts/test.sh";                          \
  }                                                                                       \
  const ::ulticode::testing::RedisEndpoint var = *var##_opt
