// ulticode-loadgen: drives the real mutating RPCs of Auth and App over gRPC
// (callback API) and reports throughput and latency percentiles as JSON.
//
//   closed loop: --clients N calls always in flight (each starts the next
//                when it completes) for --duration;
//   open loop:   --rate R calls per second on a fixed schedule, latency
//                measured from the scheduled start (no coordinated omission),
//                at most --max-in-flight outstanding (beyond: counted as
//                "dropped", never silently delayed).
//
// Every call carries a request id (a UUID: <run-id>-8000-a000-<n in 12 hex
// digits>, so a run's rows are found by the prefix) and a bearer token
// (--token-file; the token never appears on the command line). Calls mix
// CreateUser (Auth) and CreateProblem (App) by --mix.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/ids/uuid.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::bench {
namespace {

struct Options {
  std::string auth = "127.0.0.1:50051";
  std::string app = "127.0.0.1:50052";
  std::string token_file;
  std::string mode = "closed";
  int clients = 32;
  int rate = 100;
  int max_in_flight = 1024;
  absl::Duration duration = absl::Seconds(20);
  std::string mix = "both";  // auth, app or both
  std::string out;
  std::string run_id;
};

// This process's CPU time so far (user + system).
double CpuSeconds() {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  return static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
         static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
}

// Latency samples and outcome counts, shared by all callbacks.
class Recorder {
 public:
  void Record(absl::Duration latency, grpc::StatusCode code) {
    std::lock_guard<std::mutex> lock(mu_);
    if (code == grpc::StatusCode::OK) {
      latencies_us_.push_back(absl::ToInt64Microseconds(latency));
    } else {
      ++errors_[static_cast<int>(code)];
    }
  }
  void Dropped() { dropped_.fetch_add(1); }

  std::string Json(const Options& o, absl::Duration elapsed) {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(latencies_us_.begin(), latencies_us_.end());
    auto pct = [&](double p) -> double {
      if (latencies_us_.empty()) return 0;
      const size_t i = std::min(latencies_us_.size() - 1,
                                static_cast<size_t>(p * static_cast<double>(latencies_us_.size())));
      return static_cast<double>(latencies_us_[i]) / 1000.0;
    };
    std::vector<std::string> errors;
    for (int code = 0; code < 17; ++code) {
      if (errors_[code] > 0) {
        errors.push_back(absl::StrCat("\"", code, "\":", errors_[code]));
      }
    }
    const double seconds = absl::ToDoubleSeconds(elapsed);
    return absl::StrCat(
        "{\"run_id\":\"", o.run_id, "\",\"mode\":\"", o.mode, "\",\"mix\":\"", o.mix,
        "\",\"clients\":", o.clients, ",\"rate\":", o.mode == "open" ? o.rate : 0,
        ",\"seconds\":", seconds, ",\"ok\":", latencies_us_.size(),
        ",\"ok_per_second\":", static_cast<double>(latencies_us_.size()) / seconds,
        ",\"dropped\":", dropped_.load(), ",\"errors_by_code\":{", absl::StrJoin(errors, ","),
        "},\"latency_ms\":{\"p50\":", pct(0.50), ",\"p90\":", pct(0.90), ",\"p99\":", pct(0.99),
        ",\"p999\":", pct(0.999), ",\"max\":", latencies_us_.empty() ? 0 : pct(1.0),
        "},\"cpu_seconds\":", CpuSeconds(), "}");
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> latencies_us_;
  int64_t errors_[17] = {};
  std::atomic<int64_t> dropped_{0};
};

class LoadGenerator {
 public:
  LoadGenerator(Options o, std::string token)
      : o_(std::move(o)),
        token_(std::move(token)),
        auth_(auth::v1::AuthService::NewStub(
            grpc::CreateChannel(o_.auth, grpc::InsecureChannelCredentials()))),
        app_(app::v1::AppService::NewStub(
            grpc::CreateChannel(o_.app, grpc::InsecureChannelCredentials()))) {}

  std::string Run() {
    const absl::Time start = absl::Now();
    deadline_ = start + o_.duration;
    if (o_.mode == "open") {
      OpenLoop(start);
    } else {
      for (int i = 0; i < o_.clients; ++i) Issue(absl::Now(), /*closed=*/true);
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return in_flight_ == 0 && absl::Now() >= deadline_; });
    return recorder_.Json(o_, absl::Now() - start);
  }

 private:
  void OpenLoop(absl::Time start) {
    const absl::Duration gap = absl::Seconds(1) / o_.rate;
    for (int64_t n = 0;; ++n) {
      const absl::Time at = start + gap * n;
      if (at >= deadline_) break;
      absl::SleepFor(at - absl::Now());
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (in_flight_ >= o_.max_in_flight) {
          recorder_.Dropped();
          continue;
        }
      }
      Issue(at, /*closed=*/false);
    }
  }

  // One call; `scheduled` is when it should have started.
  void Issue(absl::Time scheduled, bool closed) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++in_flight_;
    }
    const int64_t n = next_.fetch_add(1);
    const bool use_auth = o_.mix == "auth" || (o_.mix == "both" && n % 2 == 0);
    auto ctx = std::make_shared<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const std::string id = absl::StrFormat("%s-8000-a000-%012x", o_.run_id, n);
    auto finish = [this, scheduled, closed, ctx](grpc::Status s) {
      recorder_.Record(absl::Now() - scheduled, s.error_code());
      bool again = false;
      {
        // Notified under the lock: Run() cannot return (and destroy done_)
        // while this callback still uses it.
        std::lock_guard<std::mutex> lock(mu_);
        --in_flight_;
        again = closed && absl::Now() < deadline_;
        if (!again) done_.notify_all();
      }
      if (again) Issue(absl::Now(), true);
    };
    if (use_auth) {
      auto req = std::make_shared<auth::v1::CreateUserRequest>();
      auto resp = std::make_shared<auth::v1::CreateUserResponse>();
      req->set_username(absl::StrCat("b", id.substr(id.size() > 24 ? id.size() - 24 : 0)));
      req->set_email(absl::StrCat(req->username(), "@bench.example"));
      req->set_request_id(id);
      auth_->async()->CreateUser(ctx.get(), req.get(), resp.get(),
                                 [finish, req, resp](grpc::Status s) { finish(std::move(s)); });
    } else {
      auto req = std::make_shared<app::v1::CreateProblemRequest>();
      auto resp = std::make_shared<app::v1::ProblemResponse>();
      req->set_slug(absl::StrCat("b-", id.substr(id.size() > 40 ? id.size() - 40 : 0)));
      req->set_title("Bench problem");
      req->set_statement(std::string(200, 's'));
      *req->mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(1000);
      req->set_memory_limit_mb(256);
      req->set_difficulty(3);
      req->set_request_id(id);
      app_->async()->CreateProblem(ctx.get(), req.get(), resp.get(),
                                   [finish, req, resp](grpc::Status s) { finish(std::move(s)); });
    }
  }

  const Options o_;
  const std::string token_;
  std::unique_ptr<auth::v1::AuthService::Stub> auth_;
  std::unique_ptr<app::v1::AppService::Stub> app_;
  Recorder recorder_;
  std::atomic<int64_t> next_{0};
  std::mutex mu_;
  std::condition_variable done_;
  int in_flight_ = 0;
  absl::Time deadline_;
};

}  // namespace
}  // namespace ulticode::bench

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the services
  using namespace ulticode;
  bench::Options o;
  config::Flags flags("ulticode-loadgen", "Drives Auth and App mutations; prints JSON results.");
  flags.String("auth", &o.auth, "Auth gRPC address", config::ValidateHostPort);
  flags.String("app", &o.app, "App gRPC address", config::ValidateHostPort);
  flags.String("token-file", &o.token_file, "file holding the bearer token (mode 0600)");
  flags.Require("token-file");
  flags.String(
      "mode", &o.mode, "closed (N in flight) or open (fixed rate)", [](const std::string& v) {
        return v == "closed" || v == "open" ? absl::OkStatus()
                                            : absl::InvalidArgumentError("must be closed or open");
      });
  flags.Int("clients", &o.clients, "closed loop: calls in flight", 1, 4096);
  flags.Int("rate", &o.rate, "open loop: calls per second", 1, 1000000);
  flags.Int("max-in-flight", &o.max_in_flight, "open loop: outstanding calls before dropping", 1,
            100000);
  flags.Duration("duration", &o.duration, "how long to send", absl::Seconds(1), absl::Hours(2));
  flags.String("mix", &o.mix, "auth, app or both", [](const std::string& v) {
    return v == "auth" || v == "app" || v == "both"
               ? absl::OkStatus()
               : absl::InvalidArgumentError("must be auth, app or both");
  });
  flags.String("out", &o.out, "also write the JSON here");
  flags.String("run-id", &o.run_id,
               "the first two groups of every request id, 8 and 4 hex digits (\"a1b2c3d4-e5f6\"; "
               "default: the first 13 characters of a new UUID)",
               [](const std::string& v) {
                 return v.empty() || ids::IsValidUuid(v + "-8000-a000-000000000000")
                            ? absl::OkStatus()
                            : absl::InvalidArgumentError("must be 8 hex digits, '-', 4 hex digits");
               });
  config::ParseOrExit(flags, argc, argv);
  if (o.run_id.empty()) o.run_id = ids::NewUuidV7().substr(0, 13);
  auto token = crypto::ReadSecretFile(o.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "ulticode-loadgen: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  const std::string json = bench::LoadGenerator(o, *token).Run();
  std::printf("%s\n", json.c_str());
  if (!o.out.empty()) std::ofstream(o.out) << json << "\n";
  return 0;
}
