#include "common/server/health_service.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace ulticode::server {

using grpc::health::v1::HealthCheckResponse;

// No service name is longer (a watch keeps the name it asked for).
constexpr size_t kMaxServiceName = 256;

// One Watch: the latest status goes out whenever it differs from the one
// sent last (statuses in between are skipped, as in gRPC's own service).
class HealthWatch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  HealthWatch(HealthService& service, std::string name, HealthService::Status status)
      : service_(service), name_(std::move(name)), latest_(status) {}

  const std::string& name() const { return name_; }
  void Start() { Pump(); }
  void Update(HealthService::Status status) {
    {
      absl::MutexLock lock(&mu_);
      latest_ = status;
    }
    Pump();
  }
  void End(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!ending_) ending_ = status;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok && !ending_) ending_ = grpc::Status::CANCELLED;
    }
    Pump();
  }
  void OnCancel() override { End(grpc::Status::CANCELLED); }
  void OnDone() override {
    service_.Forget(this);
    delete this;
  }

 private:
  void Pump() {
    enum { kNone, kWrite, kFinish } action = kNone;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      // A write chosen by another thread is not issued yet: that thread
      // pumps again once it is.
      if (finished_ || issuing_) return;
      const bool changed = !sent_ || *sent_ != latest_;
      // An orderly end (shutdown) sends the last status first; a broken or
      // cancelled stream ends at once.
      const bool last_status_first = ending_ && ending_->ok() && (writing_ || changed);
      if (ending_ && !last_status_first) {
        finished_ = true;
        status = *ending_;
        action = kFinish;
      } else if (!writing_ && changed) {
        sent_ = latest_;
        response_.set_status(latest_);
        writing_ = issuing_ = true;
        action = kWrite;
      }
    }
    if (action == kWrite) {
      StartWrite(&response_);
      {
        absl::MutexLock lock(&mu_);
        issuing_ = false;
      }
      Pump();
    } else if (action == kFinish) {
      Finish(status);
    }
  }

  HealthService& service_;
  const std::string name_;
  absl::Mutex mu_;
  HealthService::Status latest_ ABSL_GUARDED_BY(mu_);
  std::optional<HealthService::Status> sent_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> ending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool issuing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  HealthCheckResponse response_;  // read by gRPC until OnWriteDone
};

namespace {

class Refusal final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

HealthService::HealthService(int max_watches, const std::string& listener,
                             prometheus::Registry& registry)
    : max_watches_(max_watches),
      open_(&prometheus::BuildGauge()
                 .Name("ulticode_health_watches")
                 .Help("grpc.health.v1.Health/Watch streams open")
                 .Register(registry)
                 .Add({{"listener", listener}})),
      refused_(&prometheus::BuildCounter()
                    .Name("ulticode_health_watches_refused_total")
                    .Help("Health Watch streams refused: the process held --health-max-watches")
                    .Register(registry)
                    .Add({{"listener", listener}})) {}

HealthService::Status HealthService::StatusOf(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::Set(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  const Status status = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  statuses_[service] = status;
  // Under the lock: a watch leaves the set (OnDone) before it is deleted.
  for (HealthWatch* w : watches_) {
    if (w->name() == service) w->Update(status);
  }
}

void HealthService::EndAll() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  for (HealthWatch* w : watches_) w->End(grpc::Status::OK);
}

void HealthService::Forget(HealthWatch* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(watch);
  open_->Set(static_cast<double>(watches_.size()));
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const grpc::health::v1::HealthCheckRequest* req,
                                               HealthCheckResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (req->service().size() > kMaxServiceName) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "service: name too long"));
    return reactor;
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = statuses_.find(req->service());
  if (it == statuses_.end()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
  } else {
    resp->set_status(it->second);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext*, const grpc::health::v1::HealthCheckRequest* req) {
  if (req->service().size() > kMaxServiceName) {
    return new Refusal(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "service: name too long"));
  }
  HealthWatch* watch = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) {
      return new Refusal(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is stopping"));
    }
    if (static_cast<int>(watches_.size()) >= max_watches_) {
      refused_->Increment();
      return new Refusal(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("this listener already serves ", max_watches_,
                       " health watches (--health-max-watches); use Check, or retry later")));
    }
    watch = new HealthWatch(*this, req->service(), StatusOf(req->service()));
    watches_.insert(watch);
    open_->Set(static_cast<double>(watches_.size()));
  }
  watch->Start();
  return watch;
}

}  // namespace ulticode::server
