// Runs unary handlers that block (on PostgreSQL) for the gRPC callback API:
// a fixed set of threads, one per pooled connection, takes calls from a
// bounded queue, so gRPC's own threads never block, a running call never
// waits for a connection, and a burst of callers waits instead of being
// refused. A call is refused RESOURCE_EXHAUSTED at once only when
// `max_calls` are already running or waiting. A call cancelled (or past its
// deadline) while it waited is finished CANCELLED without running.
//
//   grpc::ServerUnaryReactor* Svc::Get(grpc::CallbackServerContext* ctx,
//                                      const Req* req, Resp* resp) {
//     return calls_.Run(ctx, [=, this] { return ...; /* grpc::Status */ });
//   }
//
// Lifecycle: the gRPC server shuts down (every call finished) before the
// executor is destroyed; the destructor joins the threads. Thread-safe.
#pragma once

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace ulticode::server {

struct ExecutorOptions {
  int threads = 16;     // --pg-pool-size: one per pooled connection
  int max_calls = 320;  // --grpc-threads: running + waiting
};

class CallExecutor {
 public:
  using Work = absl::AnyInvocable<grpc::Status() &&>;

  CallExecutor(ExecutorOptions options, prometheus::Registry& registry);
  ~CallExecutor();
  CallExecutor(const CallExecutor&) = delete;
  CallExecutor& operator=(const CallExecutor&) = delete;

  // The reactor of `ctx`'s call, finished with what `work` returns once a
  // thread ran it (or at once with RESOURCE_EXHAUSTED).
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* ctx, Work work);

 private:
  struct Call {
    grpc::CallbackServerContext* ctx;
    grpc::ServerUnaryReactor* reactor;
    Work work;
  };
  bool Ready() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Serve();

  const ExecutorOptions options_;
  prometheus::Gauge* waiting_gauge_;
  mutable absl::Mutex mu_;
  std::deque<Call> waiting_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ulticode::server
