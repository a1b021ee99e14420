#include "common/server/call_executor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ulticode::server {

CallExecutor::CallExecutor(ExecutorOptions options, prometheus::Registry& registry)
    : options_(options),
      waiting_gauge_(&prometheus::BuildGauge()
                          .Name("ulticode_grpc_calls_waiting")
                          .Help("Calls waiting for a handler thread (one per pooled connection, "
                                "--pg-pool-size); beyond --grpc-threads running and waiting, "
                                "calls are refused RESOURCE_EXHAUSTED")
                          .Register(registry)
                          .Add({})) {
  const int threads = std::max(1, options_.threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Serve(); });
}

CallExecutor::~CallExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

grpc::ServerUnaryReactor* CallExecutor::Run(grpc::CallbackServerContext* ctx, Work work) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  {
    absl::MutexLock lock(&mu_);
    if (running_ + static_cast<int>(waiting_.size()) < options_.max_calls && !stopping_) {
      waiting_.push_back(Call{ctx, reactor, std::move(work)});
      waiting_gauge_->Set(static_cast<double>(waiting_.size()));
      return reactor;
    }
  }
  reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               absl::StrCat("this server already holds ", options_.max_calls,
                                            " calls (--grpc-threads); retry with back-off")));
  return reactor;
}

bool CallExecutor::Ready() const { return stopping_ || !waiting_.empty(); }

void CallExecutor::Serve() {
  for (;;) {
    Call call;
    {
      absl::MutexLock lock(&mu_, absl::Condition(this, &CallExecutor::Ready));
      if (waiting_.empty()) return;  // stopping, and nothing left
      call = std::move(waiting_.front());
      waiting_.pop_front();
      ++running_;
      waiting_gauge_->Set(static_cast<double>(waiting_.size()));
    }
    call.reactor->Finish(
        call.ctx->IsCancelled()
            ? grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled while it waited")
            : std::move(call.work)());
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace ulticode::server
