// server::CallExecutor behind a real gRPC server on loopback: never more
// handlers run than it has threads, a call waits while the queue has room
// and is refused RESOURCE_EXHAUSTED only when it is full, every accepted
// call finishes with its handler's status, and a call cancelled while it
// waited never runs. Shapes (threads, bound, callers) are generated from
// ULTICODE_EXECUTOR_SEED (printed with each failure).
#include "common/server/call_executor.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::server {
namespace {

// CreateUser holds its handler thread until released; the request's
// username names the call.
class HeldService final : public auth::v1::AuthService::CallbackService {
 public:
  explicit HeldService(CallExecutor& calls) : calls_(calls) {}

  grpc::ServerUnaryReactor* CreateUser(grpc::CallbackServerContext* ctx,
                                       const auth::v1::CreateUserRequest* req,
                                       auth::v1::CreateUserResponse*) override {
    {
      absl::MutexLock lock(&mu_);
      contexts_.push_back(ctx);
    }
    return calls_.Run(ctx, [this, name = req->username()] {
      const int now = ++running_;
      int seen = max_running_.load();
      while (now > seen && !max_running_.compare_exchange_weak(seen, now)) {
      }
      {
        absl::MutexLock lock(&mu_);
        ran_.push_back(name);
      }
      release_.WaitForNotification();
      --running_;
      return grpc::Status::OK;
    });
  }

  void Release() { release_.Notify(); }
  int running() const { return running_.load(); }
  int max_running() const { return max_running_.load(); }
  std::vector<std::string> ran() {
    absl::MutexLock lock(&mu_);
    return ran_;
  }
  // The server side of the `i`th call to arrive (null until it has).
  grpc::CallbackServerContext* context(size_t i) {
    absl::MutexLock lock(&mu_);
    return i < contexts_.size() ? contexts_[i] : nullptr;
  }

 private:
  CallExecutor& calls_;
  absl::Notification release_;
  std::atomic<int> running_{0};
  std::atomic<int> max_running_{0};
  absl::Mutex mu_;
  std::vector<std::string> ran_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc::CallbackServerContext*> contexts_ ABSL_GUARDED_BY(mu_);
};

// A server with `options` and its service, and a stub.
struct Served {
  explicit Served(ExecutorOptions options)
      : metrics(metrics::Metrics::Unexposed("executor")),
        calls(std::make_unique<CallExecutor>(options, metrics->registry())),
        service(*calls),
        server(PlaintextOptions("127.0.0.1:0", 4), metrics->registry()) {
    server.AddService(&service, "ulticode.auth.v1.AuthService");
    EXPECT_TRUE(server.Start().ok());
    stub = auth::v1::AuthService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server.port()), grpc::InsecureChannelCredentials()));
  }
  ~Served() { server.Shutdown(absl::Seconds(5)); }

  double Waiting() {
    for (const auto& family : metrics->registry().Collect()) {
      if (family.name == "ulticode_grpc_calls_waiting") return family.metric.at(0).gauge.value;
    }
    return -1;
  }

  std::unique_ptr<metrics::Metrics> metrics;
  std::unique_ptr<CallExecutor> calls;  // outlives server
  HeldService service;
  GrpcServer server;
  std::unique_ptr<auth::v1::AuthService::Stub> stub;
};

// One asynchronous call and its outcome.
struct Call {
  grpc::ClientContext ctx;
  auth::v1::CreateUserRequest req;
  auth::v1::CreateUserResponse resp;
  absl::Notification done;
  grpc::Status status;
};

std::unique_ptr<Call> Start(Served& s, const std::string& name, absl::Duration deadline) {
  auto call = std::make_unique<Call>();
  call->req.set_username(name);
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  Call* c = call.get();
  s.stub->async()->CreateUser(&c->ctx, &c->req, &c->resp, [c](grpc::Status status) {
    c->status = std::move(status);
    c->done.Notify();
  });
  return call;
}

// Waits up to 10 s for `condition`.
template <typename F>
bool Eventually(F condition) {
  const absl::Time end = absl::Now() + absl::Seconds(10);
  while (absl::Now() < end) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return condition();
}

uint32_t Seed() {
  const char* env = std::getenv("ULTICODE_EXECUTOR_SEED");
  return env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                        : std::random_device{}();
}

TEST(CallExecutorTest, AtMostItsThreadsRunAndOnlyAFullQueueRefuses) {
  const uint32_t seed = Seed();
  SCOPED_TRACE(absl::StrCat("ULTICODE_EXECUTOR_SEED=", seed));
  std::mt19937 rng(seed);
  for (int round = 0; round < 6; ++round) {
    const int threads = 1 + static_cast<int>(rng() % 4);
    const int max_calls = threads + static_cast<int>(rng() % 9);
    const int callers = max_calls + static_cast<int>(rng() % 7);
    SCOPED_TRACE(absl::StrCat("threads=", threads, " max_calls=", max_calls, " callers=", callers));
    Served s({.threads = threads, .max_calls = max_calls});
    std::vector<std::unique_ptr<Call>> calls;
    for (int i = 0; i < callers; ++i) {
      calls.push_back(Start(s, absl::StrCat("c", i), absl::Seconds(30)));
    }
    auto refused = [&] {
      int n = 0;
      for (auto& c : calls) {
        n += c->done.HasBeenNotified() &&
             c->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      }
      return n;
    };
    // Every call beyond the bound is refused at once; the rest are held.
    ASSERT_TRUE(Eventually([&] {
      return refused() == callers - max_calls && s.service.running() == threads &&
             s.Waiting() == max_calls - threads;
    })) << "refused "
        << refused() << ", running " << s.service.running() << ", waiting " << s.Waiting();
    s.service.Release();
    for (auto& c : calls) {
      ASSERT_TRUE(c->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
      EXPECT_TRUE(c->status.ok() || c->status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
          << c->status.error_message();
    }
    EXPECT_EQ(refused(), callers - max_calls);
    EXPECT_EQ(static_cast<int>(s.service.ran().size()), max_calls);
    EXPECT_EQ(s.service.max_running(), threads);
    EXPECT_EQ(s.Waiting(), 0);
  }
}

TEST(CallExecutorTest, ACallCancelledWhileItWaitedNeverRuns) {
  Served s({.threads = 1, .max_calls = 4});
  auto held = Start(s, "held", absl::Seconds(30));
  ASSERT_TRUE(Eventually([&] { return s.service.running() == 1; }));
  auto gave_up = Start(s, "gave-up", absl::Milliseconds(300));
  ASSERT_TRUE(gave_up->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(gave_up->status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server has seen the call end before its thread is free.
  ASSERT_TRUE(Eventually([&] {
    grpc::CallbackServerContext* ctx = s.service.context(1);
    return ctx != nullptr && ctx->IsCancelled();
  }));
  s.service.Release();
  ASSERT_TRUE(held->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(held->status.ok()) << held->status.error_message();
  auto after = Start(s, "after", absl::Seconds(10));
  ASSERT_TRUE(after->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(after->status.ok()) << after->status.error_message();
  EXPECT_EQ(s.service.ran(), (std::vector<std::string>{"held", "after"}));
}

}  // namespace
}  // namespace ulticode::server
