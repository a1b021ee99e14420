// The chaos test in the topology we deploy: database failover.
//
// The owners' databases and Admin's database live on two separate PostgreSQL
// clusters, each a primary with a streaming standby (pg_basebackup, loopback);
// the services connect with multi-host DSNs (target_session_attrs=read-write)
// and find the primary themselves. Two replicas of Auth, App and Admin run
// under the chaos clients (retries with idempotency keys) while a seeded
// schedule fails the clusters over, alternately: the replication connection
// (the standby's WAL receiver and the primary's WAL sender) is frozen for a
// few seconds under load, so the standby is certainly behind; the primary is
// killed with SIGKILL, the standby is promoted, and the dead node comes back
// only as a new standby of the new primary.
//
// Then the same verdict as the single-server chaos test (lost=0
// duplicated=0 orphaned=0 wrong=0 unconfirmed=0), plus: every OK answer's
// business change still exists (ok_vanished=0).
//
// With synchronous replication (the default, as deploy/k8s/overlays/prod runs
// it) it passes; ULTICODE_CHAOS_REPLICATION=async runs the same schedule on
// asynchronous clusters, where it must fail (docs/testing.md).
//
// Environment: ULTICODE_CHAOS_SEED, ULTICODE_CHAOS_SECONDS (default 45),
// ULTICODE_CHAOS_CLIENTS (default 4), ULTICODE_CHAOS_REPLICATION
// (sync | async).
#include <atomic>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/chaos/load_driver.h"
#include "tests/chaos/verdict.h"
#include "tests/support/mesh.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/redis_server.h"

namespace ulticode {
namespace {

using ::ulticode::chaos::EnvInt;
using ::ulticode::chaos::kReplicas;
using ::ulticode::chaos::LoadDriver;
using ::ulticode::testing::Mesh;
using ::ulticode::testing::PgCluster;
using ::ulticode::testing::Service;

struct Failover {
  absl::Duration at;   // since the load started
  bool admin = false;  // Admin's cluster, else the owners'
  absl::Duration lag;  // how long replication is frozen first
};

// Failovers every 10-14 s, alternating clusters (the owners' first).
std::vector<Failover> MakeSchedule(uint64_t seed, absl::Duration load) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Failover> out;
  bool admin = false;
  for (absl::Duration at = absl::Seconds(uniform(5, 8)); at < load - absl::Seconds(8);
       at += absl::Seconds(uniform(10, 14))) {
    out.push_back({at, admin, absl::Milliseconds(uniform(2000, 4000))});
    admin = !admin;
  }
  return out;
}

PgCluster::Replication ReplicationFromEnv() {
  const char* v = std::getenv("ULTICODE_CHAOS_REPLICATION");
  return v != nullptr && std::string(v) == "async" ? PgCluster::Replication::kAsynchronous
                                                   : PgCluster::Replication::kSynchronous;
}

TEST(ChaosFailoverTest, NoLossNoOrphansNoVoidOkAcrossDatabaseFailovers) {
  const uint64_t seed =
      static_cast<uint64_t>(EnvInt("ULTICODE_CHAOS_SEED", std::random_device{}() % 1000000));
  const absl::Duration load = absl::Seconds(EnvInt("ULTICODE_CHAOS_SECONDS", 45));
  const int clients = static_cast<int>(EnvInt("ULTICODE_CHAOS_CLIENTS", 4));
  const PgCluster::Replication replication = ReplicationFromEnv();
  const char* mode = replication == PgCluster::Replication::kSynchronous ? "sync" : "async";
  std::printf(
      "[failover] seed=%llu load=%s clients=%d replication=%s (reproduce: "
      "ULTICODE_CHAOS_SEED=%llu ULTICODE_CHAOS_REPLICATION=%s)\n",
      static_cast<unsigned long long>(seed), absl::FormatDuration(load).c_str(), clients, mode,
      static_cast<unsigned long long>(seed), mode);

  PgCluster owners_db(replication), admin_db(replication);
  std::string error;
  ASSERT_TRUE(owners_db.Start(&error)) << error;
  ASSERT_TRUE(admin_db.Start(&error)) << error;
  testing::RedisServer redis;
  ASSERT_TRUE(redis.Start());

  testing::MeshOptions options = chaos::ChaosMeshOptions("failover", redis.port());
  options.admin_pg = admin_db.endpoint();
  Mesh mesh(owners_db.endpoint(), chaos::ChaosRedis(redis.port()), options);
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) ASSERT_TRUE(mesh.Start(s, r, &error)) << error;
  }

  const auto schedule = MakeSchedule(seed, load);
  for (const Failover& f : schedule) {
    std::printf("[failover] schedule t=%-6s %-6s lag=%s\n", absl::FormatDuration(f.at).c_str(),
                f.admin ? "admin" : "owners", absl::FormatDuration(f.lag).c_str());
  }

  LoadDriver driver(mesh, seed, clients);
  std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  std::thread load_thread([&] { driver.Run(stop); });
  int failovers = 0;
  for (const Failover& f : schedule) {
    absl::SleepFor(start + f.at - absl::Now());
    PgCluster& cluster = f.admin ? admin_db : owners_db;
    EXPECT_TRUE(cluster.FreezeReplication(&error)) << error;
    absl::SleepFor(f.lag);  // the load goes on; the standby falls behind
    const absl::Time killed = absl::Now();
    cluster.KillPrimary();
    const absl::Duration kill_took = absl::Now() - killed;
    cluster.ThawReplication();
    EXPECT_TRUE(cluster.Promote(&error)) << error;
    const absl::Duration promoted = absl::Now() - killed;
    EXPECT_TRUE(cluster.RebuildStandby(&error)) << error;
    std::printf(
        "[failover] %s failed over at t=%s: kill took %s, promoted %s after the kill, "
        "new standby streaming %s after it\n",
        f.admin ? "admin" : "owners", absl::FormatDuration(killed - start).c_str(),
        absl::FormatDuration(kill_took).c_str(), absl::FormatDuration(promoted).c_str(),
        absl::FormatDuration(absl::Now() - killed).c_str());
    ++failovers;
  }
  absl::SleepFor(start + load - absl::Now());
  stop = true;
  load_thread.join();
  const absl::Time load_end = absl::Now();
  for (Service s : {Service::kAdmin, Service::kAuth, Service::kApp}) {
    for (int r = 0; r < kReplicas; ++r) {
      EXPECT_TRUE(mesh.Running(s, r)) << "replica " << r << " died by itself:\n"
                                      << mesh.Output(s, r);
    }
  }

  chaos::Verdict v;
  chaos::Settle(mesh, driver.ok_calls(), load_end, v);
  ASSERT_FALSE(HasFatalFailure());
  std::printf(
      "[failover] SUMMARY seed=%llu replication=%s failovers=%d operations=%lld attempts=%lld "
      "gave_up=%lld longest_client_outage=%s %s\n",
      static_cast<unsigned long long>(seed), mode, failovers,
      static_cast<long long>(driver.operations()), static_cast<long long>(driver.attempts()),
      static_cast<long long>(driver.gave_up()),
      absl::FormatDuration(driver.longest_outage()).c_str(), v.Summary().c_str());

  EXPECT_GE(failovers, 2) << "each cluster fails over at least once";
  v.ExpectClean();
  EXPECT_EQ(driver.rejected(), 0) << "a retried call was refused: " << driver.first_rejection();
}

}  // namespace
}  // namespace ulticode
