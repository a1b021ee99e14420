#include "tests/support/test_env.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "libpq-fe.h"

namespace ulticode::testing {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

std::string PgEndpoint::Server() const {
  if (standby_port == 0) return absl::StrCat("host=", host, " port=", port);
  return absl::StrCat("host=", host, ",", host, " port=", port, ",", standby_port,
                      " target_session_attrs=read-write");
}

std::string PgEndpoint::ConnInfo(const std::string& dbname) const {
  return absl::StrCat(Server(), " user=", user, " dbname=", dbname, " connect_timeout=5");
}

std::optional<PgEndpoint> PgFromEnv() {
  auto host = Env("ULTICODE_TEST_PG_HOST");
  auto port = Env("ULTICODE_TEST_PG_PORT");
  if (!host || !port) return std::nullopt;
  PgEndpoint pg;
  pg.host = *host;
  if (!absl::SimpleAtoi(*port, &pg.port)) return std::nullopt;
  pg.user = Env("ULTICODE_TEST_PG_USER").value_or("postgres");
  return pg;
}

std::optional<RedisEndpoint> RedisFromEnv() {
  auto host = Env("ULTICODE_TEST_REDIS_HOST");
  auto port = Env("ULTICODE_TEST_REDIS_PORT");
  if (!host || !port) return std::nullopt;
  RedisEndpoint r;
  r.host = *host;
  if (!absl::SimpleAtoi(*port, &r.port)) return std::nullopt;
  r.user = Env("ULTICODE_TEST_REDIS_USER").value_or("");
  r.password_file = Env("ULTICODE_TEST_REDIS_PASSWORD_FILE").value_or("");
  if (!r.password_file.empty()) {
    auto password = crypto::ReadSecretFile(r.password_file);
    if (!password.ok()) return std::nullopt;
    r.password = *password;
  }
  return r;
}

bool InCi() {
  auto ci = Env("CI");
  return ci && (*ci == "true" || *ci == "1");
}

uint32_t SeedFromEnv(const char* env_var, const char* tag) {
  const char* env = std::getenv(env_var);
  const uint32_t seed = env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                                       : std::random_device{}();
  std::printf("[%s] seed %u (%s=%u reproduces it)\n", tag, seed, env_var, seed);
  return seed;
}

std::string RequestIdFor(std::string_view name) {
  // Two FNV-1a hashes of the name make the 128 bits; version 8 (custom).
  auto fnv = [&](uint64_t h) {
    for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
    return h;
  };
  const uint64_t hi = fnv(0xcbf29ce484222325ULL), lo = fnv(0x84222325cbf29ce4ULL);
  char out[37];
  std::snprintf(out, sizeof out, "%08x-%04x-8%03x-a%03x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xfff),
                static_cast<unsigned>(lo >> 52),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return out;
}

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  for (int i = 0; i < 10; ++i) out.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
  return out;
}

std::string CreateScratchDatabase(const PgEndpoint& pg, const std::string& prefix) {
  const std::string name = absl::StrCat(prefix, "_", RandomSuffix());
  const std::unique_ptr<PGconn, decltype(&PQfinish)> owned(
      PQconnectdb(pg.ConnInfo("postgres").c_str()), &PQfinish);
  PGconn* conn = owned.get();
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  // Identifiers cannot be parameters; the name is generated from [a-z0-9_].
  const std::unique_ptr<PGresult, decltype(&PQclear)> res(
      PQexec(conn, absl::StrCat("CREATE DATABASE ", name).c_str()), &PQclear);
  EXPECT_EQ(PQresultStatus(res.get()), PGRES_COMMAND_OK) << PQerrorMessage(conn);
  return name;
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
}

std::string SourceDir() { return Env("ULTICODE_TEST_SOURCE_DIR").value_or("."); }

std::string BinDir() { return Env("ULTICODE_TEST_BIN_DIR").value_or("."); }

CommandResult RunServersSh(const std::string& body) {
  return RunCommand(
      absl::StrCat("bash -c 'source ", SourceDir(), "/scripts/lib/servers.sh && ", body, "'"));
}

}  // namespace ulticode::testing
