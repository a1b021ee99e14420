// The chaos tests' clients: concurrent callers of Auth and App that retry
// with their idempotency keys on UNAVAILABLE, DEADLINE_EXCEEDED and friends
// (each attempt to a random replica), and record every call that returned OK.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/audit/event.h"
#include "tests/support/mesh.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::chaos {

// The integer in environment variable `name`, or `fallback`.
int64_t EnvInt(const char* name, int64_t fallback);

// Replicas of each service the chaos tests run.
inline constexpr int kReplicas = 2;

// The mesh both chaos tests run: short intervals (re-sends after 3 s, leases
// of 5 s) so that faults heal within the run, services on the Redis at
// `redis_port` as the harness's Redis user.
testing::MeshOptions ChaosMeshOptions(const std::string& prefix, int redis_port);
testing::RedisEndpoint ChaosRedis(int redis_port);

struct OkCall {
  audit::Owner owner;
  std::string event_id;  // empty when the call changed nothing
  std::string method;
  std::string principal;
  std::string request_id;
  std::string entity_id;
  // A new_value field the audit row must carry, and its value.
  std::string value_key, value;
};

class LoadDriver {
 public:
  LoadDriver(testing::Mesh& mesh, uint64_t seed, int clients);

  // Runs the clients until `stop`, then lets in-flight calls finish their
  // retries (bounded).
  void Run(std::atomic<bool>& stop);

  std::vector<OkCall> ok_calls();
  std::string first_rejection();
  int64_t attempts() const { return attempts_.load(); }
  int64_t operations() const { return operations_.load(); }
  int64_t gave_up() const { return gave_up_.load(); }
  int64_t rejected() const { return rejected_.load(); }
  // The longest time during which no call completed OK: what clients saw of
  // the worst outage.
  absl::Duration longest_outage();

 private:
  template <typename Call>
  grpc::Status WithRetries(std::mt19937_64& rng, Call&& rpc);
  void Record(OkCall call);
  void Client(int c, std::atomic<bool>& stop);

  const uint64_t seed_;
  const int clients_;
  std::vector<std::unique_ptr<auth::v1::AuthService::Stub>> auth_;
  std::vector<std::unique_ptr<app::v1::AppService::Stub>> app_;
  std::mutex mu_;
  std::vector<OkCall> ok_;
  std::string first_rejection_;
  std::vector<absl::Time> ok_times_;  // completion of each OK call
  std::atomic<int64_t> attempts_{0}, operations_{0}, gave_up_{0}, rejected_{0};
};

}  // namespace ulticode::chaos
