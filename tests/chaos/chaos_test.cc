// The chaos test: the whole pipeline's promise under faults.
//
// Starts a private PostgreSQL and Redis (it restarts and wipes them, so it
// never shares them with other tests) and TWO replicas of Auth, App and Admin
// (real binaries, real ports). Concurrent clients send mutating RPCs for a
// bounded time, retrying with their idempotency keys on UNAVAILABLE /
// DEADLINE_EXCEEDED and friends, and record every call that returned OK.
// Meanwhile a seeded, printed fault schedule kills service processes with
// SIGKILL (restarting them after a pause), restarts Redis WITHOUT persistence
// (streams, groups and proofs vanish; once at least while Admin is down,
// so a backlog of published events vanishes), freezes Redis with SIGSTOP,
// crashes PostgreSQL and terminates its backends.
//
// Then, with the faults over, it waits for quiescence and checks the three
// databases directly: every committed change has exactly one audit row with
// the right content, no audit row without its outbox row, no duplicates, no
// DEAD inbox rows and no unconfirmed outbox rows, every OK call reflected.
// One summary line; any loss, duplicate or orphan fails the test.
//
// Environment: ULTICODE_CHAOS_SEED (default: random, printed),
// ULTICODE_CHAOS_SECONDS (load duration, default 40; e.g. 600 for a soak),
// ULTICODE_CHAOS_CLIENTS (default 4).
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/pg/connection.h"
#include "gtest/gtest.h"
#include "tests/chaos/load_driver.h"
#include "tests/chaos/verdict.h"
#include "tests/support/mesh.h"
#include "tests/support/pg_query.h"
#include "tests/support/pg_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/tokens.h"

namespace ulticode {
namespace {

using ::ulticode::chaos::Connect;
using ::ulticode::chaos::EnvInt;
using ::ulticode::chaos::kReplicas;
using ::ulticode::chaos::LoadDriver;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::Service;

// ----------------------------------------------------------------- faults

enum class Fault {
  kKillService,
  kRedisWipe,           // Redis restarted without persistence
  kRedisWipeAdminDown,  // the same while Admin is down: a backlog of published events vanishes
  kRedisFreeze,
  kPgCrash,
  kPgTerminate
};

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kKillService:
      return "kill-9";
    case Fault::kRedisWipe:
      return "redis-wipe";
    case Fault::kRedisWipeAdminDown:
      return "redis-wipe-admin-down";
    case Fault::kRedisFreeze:
      return "redis-freeze";
    case Fault::kPgCrash:
      return "pg-crash";
    case Fault::kPgTerminate:
      return "pg-terminate-backends";
  }
  return "?";
}

struct ScheduledFault {
  absl::Duration at;  // since the load started
  Fault fault;
  Service service = Service::kAuth;  // kKillService
  int replica = 0;
  absl::Duration pause;  // how long the victim stays down / frozen
};

std::vector<ScheduledFault> MakeSchedule(uint64_t seed, absl::Duration load) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  // Kinds come from shuffled bags, so every kind occurs; a Redis wipe is
  // always among the first faults.
  std::vector<Fault> bag;
  std::vector<ScheduledFault> out;
  absl::Duration at = absl::Seconds(3);
  while (at < load - absl::Seconds(3)) {
    if (bag.empty()) {
      bag = {Fault::kKillService, Fault::kKillService,       Fault::kRedisWipe,
             Fault::kRedisFreeze, Fault::kPgCrash,           Fault::kPgTerminate,
             Fault::kKillService, Fault::kRedisWipeAdminDown};
      std::shuffle(bag.begin(), bag.end(), rng);
      if (out.empty()) {
        std::swap(*std::find(bag.begin(), bag.end(), Fault::kRedisWipeAdminDown), bag.back());
      }
    }
    ScheduledFault f;
    f.at = at;
    f.fault = bag.back();
    bag.pop_back();
    f.service = static_cast<Service>(uniform(0, 2));
    f.replica = uniform(0, kReplicas - 1);
    f.pause = absl::Milliseconds(uniform(500, 2500));
    out.push_back(f);
    at += absl::Milliseconds(uniform(1500, 4000));
  }
  return out;
}

const char* ServiceName(Service s) {
  switch (s) {
    case Service::kAuth:
      return "auth";
    case Service::kApp:
      return "app";
    case Service::kAdmin:
      return "admin";
  }
  return "?";
}

TEST(ChaosTest, NoLossNoDuplicatesNoOrphansUnderKillsRedisWipesAndDatabaseCrashes) {
  const uint64_t seed =
      static_cast<uint64_t>(EnvInt("ULTICODE_CHAOS_SEED", std::random_device{}() % 1000000));
  const absl::Duration load = absl::Seconds(EnvInt("ULTICODE_CHAOS_SECONDS", 40));
  const int clients = static_cast<int>(EnvInt("ULTICODE_CHAOS_CLIENTS", 4));
  std::printf("[chaos] seed=%llu load=%s clients=%d (reproduce: ULTICODE_CHAOS_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), absl::FormatDuration(load).c_str(), clients,
              static_cast<unsigned long long>(seed));

  // Private servers: this test crashes and wipes them.
  testing::PgServer pg;
  std::string error;
  ASSERT_TRUE(pg.Start(&error)) << error;
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start());

  const testing::MeshOptions options = chaos::ChaosMeshOptions("chaos", redis.port());
  Mesh mesh(pg.endpoint(), chaos::ChaosRedis(redis.port()), options);
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) ASSERT_TRUE(mesh.Start(s, r, &error)) << error;
  }

  const auto schedule = MakeSchedule(seed, load);
  for (const auto& f : schedule) {
    const std::string victim =
        f.fault == Fault::kKillService ? absl::StrCat(ServiceName(f.service), "-", f.replica) : "-";
    std::printf("[chaos] schedule t=%-8s %-22s %-8s pause=%s\n", absl::FormatDuration(f.at).c_str(),
                FaultName(f.fault), victim.c_str(), absl::FormatDuration(f.pause).c_str());
  }

  // --- load and faults ---
  LoadDriver driver(mesh, seed, clients);
  std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  std::thread load_thread([&] { driver.Run(stop); });
  std::map<Fault, int> counts;
  std::vector<std::string> wiped_backlog;  // PUBLISHED event ids lost with Redis
  for (const auto& f : schedule) {
    absl::SleepFor(start + f.at - absl::Now());
    ++counts[f.fault];
    switch (f.fault) {
      case Fault::kKillService:
        mesh.Kill(f.service, f.replica);
        absl::SleepFor(f.pause);
        EXPECT_TRUE(mesh.Start(f.service, f.replica, &error)) << error;
        break;
      case Fault::kRedisWipe:
        redis.Kill();
        absl::SleepFor(f.pause);
        EXPECT_TRUE(redis.Start()) << "redis restart";
        break;
      case Fault::kRedisWipeAdminDown: {
        for (int r = 0; r < kReplicas; ++r) mesh.Kill(Service::kAdmin, r);
        absl::SleepFor(f.pause);  // owners keep publishing; nobody reads
        // What is about to vanish: events published and not yet confirmed.
        for (Service owner : {Service::kAuth, Service::kApp}) {
          if (auto db = Connect(mesh.Dsn(owner))) {
            pg::Statement st{"chaos.backlog",
                             "SELECT event_id::text FROM audit_outbox WHERE state = 'PUBLISHED'"};
            if (auto r = db->Execute(st); r.ok()) {
              for (int i = 0; i < r->rows(); ++i) wiped_backlog.push_back(r->GetString(i, 0));
            }
          }
        }
        redis.Kill();
        EXPECT_TRUE(redis.Start()) << "redis restart";
        for (int r = 0; r < kReplicas; ++r) {
          EXPECT_TRUE(mesh.Start(Service::kAdmin, r, &error)) << error;
        }
        break;
      }
      case Fault::kRedisFreeze:
        redis.Freeze();
        absl::SleepFor(f.pause + absl::Milliseconds(2500));  // beyond the 2 s command timeouts
        redis.Thaw();
        break;
      case Fault::kPgCrash:
        EXPECT_TRUE(pg.Crash(&error)) << error;
        break;
      case Fault::kPgTerminate:
        pg.TerminateBackends();
        break;
    }
  }
  absl::SleepFor(start + load - absl::Now());
  stop = true;
  load_thread.join();
  const absl::Time load_end = absl::Now();
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) {
      EXPECT_TRUE(mesh.Running(s, r)) << ServiceName(s) << "-" << r << " died by itself:\n"
                                      << mesh.Output(s, r);
    }
  }

  chaos::Verdict v;
  chaos::Settle(mesh, driver.ok_calls(), load_end, v);
  ASSERT_FALSE(HasFatalFailure());
  int64_t backlog_recovered = 0;
  for (const std::string& id : wiped_backlog) {
    auto it = v.outbox.find(id);
    if (it != v.outbox.end() && it->second.state == "CONFIRMED" && v.logged.contains(id))
      ++backlog_recovered;
  }

  std::printf(
      "[chaos] SUMMARY seed=%llu operations=%lld attempts=%lld gave_up=%lld "
      "kills=%d redis_wipes=%d redis_wipes_admin_down=%d redis_freezes=%d pg_crashes=%d "
      "pg_terminations=%d wiped_backlog=%zu recovered=%lld %s\n",
      static_cast<unsigned long long>(seed), static_cast<long long>(driver.operations()),
      static_cast<long long>(driver.attempts()), static_cast<long long>(driver.gave_up()),
      counts[Fault::kKillService], counts[Fault::kRedisWipe], counts[Fault::kRedisWipeAdminDown],
      counts[Fault::kRedisFreeze], counts[Fault::kPgCrash], counts[Fault::kPgTerminate],
      wiped_backlog.size(), static_cast<long long>(backlog_recovered), v.Summary().c_str());

  v.ExpectClean();
  EXPECT_GT(wiped_backlog.size(), 0u) << "the Redis wipe with Admin down destroyed nothing";
  EXPECT_EQ(backlog_recovered, static_cast<int64_t>(wiped_backlog.size()))
      << "events that vanished with Redis were not all re-sent and confirmed";
  EXPECT_EQ(driver.rejected(), 0) << "a retried call was refused: " << driver.first_rejection();
}

}  // namespace
}  // namespace ulticode
