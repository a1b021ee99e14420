#include "tests/chaos/load_driver.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "tests/support/test_env.h"
#include "tests/support/tokens.h"

namespace ulticode::chaos {
namespace {

using ::ulticode::testing::Service;
namespace authv1 = ::ulticode::auth::v1;
namespace appv1 = ::ulticode::app::v1;

bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

void Prepare(grpc::ClientContext* ctx, const std::string& principal) {
  ctx->AddMetadata("authorization", testing::SharedTestTokens().Bearer(principal));
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t out;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

testing::MeshOptions ChaosMeshOptions(const std::string& prefix, int redis_port) {
  testing::MeshOptions options;
  options.prefix = prefix;
  options.redis_addr = absl::StrCat("127.0.0.1:", redis_port);
  const std::vector<std::string> common = {"--pg-pool-size=4", "--startup-timeout=120s",
                                           "--shutdown-timeout=2s"};
  // Event numbers: owners attest the ones never committed after 2 s, Admin
  // reports the ones still missing 3 s after a higher one (Verdict
  // missing_numbers), each checked every second.
  options.auth_args = {"--dispatch-resend-timeout=3s", "--dispatch-claim-lease=5s",
                       "--dispatch-backoff-max=1s",    "--dispatch-poll-interval=500ms",
                       "--outbox-number-settle=2s",    "--metrics-sample-interval=1s"};
  options.auth_args.insert(options.auth_args.end(), common.begin(), common.end());
  options.app_args = options.auth_args;
  options.admin_args = {"--inbox-claim-idle=2s",   "--inbox-claim-interval=1s",
                        "--consumer-lease=5s",     "--consumer-heartbeat=1s",
                        "--consumer-retry-max=1s", "--consumer-poll-interval=500ms",
                        "--sequence-gap-grace=3s", "--metrics-sample-interval=1s"};
  options.admin_args.insert(options.admin_args.end(), common.begin(), common.end());
  return options;
}

testing::RedisEndpoint ChaosRedis(int redis_port) {
  testing::RedisEndpoint endpoint;
  endpoint.host = "127.0.0.1";
  endpoint.port = redis_port;
  // The harness's Redis user (the default user is off under scripts/test.sh).
  if (auto shared = testing::RedisFromEnv()) {
    endpoint.user = shared->user;
    endpoint.password = shared->password;
    endpoint.password_file = shared->password_file;
  }
  return endpoint;
}

LoadDriver::LoadDriver(testing::Mesh& mesh, uint64_t seed, int clients)
    : seed_(seed), clients_(clients) {
  for (int r = 0; r < kReplicas; ++r) {
    auth_.push_back(authv1::AuthService::NewStub(mesh.Channel(Service::kAuth, r)));
    app_.push_back(appv1::AppService::NewStub(mesh.Channel(Service::kApp, r)));
  }
}

void LoadDriver::Run(std::atomic<bool>& stop) {
  std::vector<std::thread> threads;
  for (int c = 0; c < clients_; ++c) threads.emplace_back([this, c, &stop] { Client(c, stop); });
  for (auto& t : threads) t.join();
}

std::vector<OkCall> LoadDriver::ok_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return ok_;
}

std::string LoadDriver::first_rejection() {
  std::lock_guard<std::mutex> lock(mu_);
  return first_rejection_;
}

absl::Duration LoadDriver::longest_outage() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<absl::Time> t = ok_times_;
  std::sort(t.begin(), t.end());
  absl::Duration longest;
  for (size_t i = 1; i < t.size(); ++i) longest = std::max(longest, t[i] - t[i - 1]);
  return longest;
}

void LoadDriver::Record(OkCall call) {
  std::lock_guard<std::mutex> lock(mu_);
  ok_.push_back(std::move(call));
  ok_times_.push_back(absl::Now());
}

// Calls `rpc` until OK, a non-retryable status, or the retry budget ends;
// every attempt goes to a random replica with the same request id.
template <typename Call>
grpc::Status LoadDriver::WithRetries(std::mt19937_64& rng, Call&& rpc) {
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  grpc::Status status;
  for (int attempt = 0;; ++attempt) {
    ++attempts_;
    status = rpc(static_cast<int>(rng() % kReplicas));
    if (status.ok() || !Retryable(status.error_code())) return status;
    if (absl::Now() > give_up) return status;
    absl::SleepFor(absl::Milliseconds(std::min(50 * (attempt + 1), 500)));
  }
}

void LoadDriver::Client(int c, std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed_ * 1000 + c);
  const std::string principal = absl::StrCat("chaos-client-", c);
  std::vector<std::string> users, problems;
  static const char* kRoles[] = {"judge", "problem_setter", "admin"};
  for (int n = 0; !stop.load(); ++n) {
    ++operations_;
    const std::string request_id =
        ::ulticode::testing::RequestIdFor(absl::StrCat("chaos-", seed_, "-", c, "-", n));
    const int kind = users.empty() || problems.empty() ? n % 2 : static_cast<int>(rng() % 5);
    grpc::Status s;
    if (kind == 0) {
      authv1::CreateUserRequest req;
      req.set_username(absl::StrCat("u", c, "x", n, "s", seed_ % 100000));
      req.set_email(absl::StrCat(req.username(), "@example.com"));
      req.set_request_id(request_id);
      authv1::CreateUserResponse resp;
      s = WithRetries(rng, [&](int r) {
        grpc::ClientContext ctx;
        Prepare(&ctx, principal);
        return auth_[r]->CreateUser(&ctx, req, &resp);
      });
      if (s.ok()) {
        users.push_back(resp.user().user_id());
        Record({audit::v1::OWNER_AUTH, resp.event_id(), "CreateUser", principal, request_id,
                resp.user().user_id(), "username", req.username()});
      }
    } else if (kind == 1) {
      appv1::CreateProblemRequest req;
      req.set_slug(absl::StrCat("p", c, "x", n, "s", seed_ % 100000));
      req.set_title(absl::StrCat("Problem ", n));
      req.set_statement("Compute.");
      *req.mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(1000);
      req.set_memory_limit_mb(256);
      req.set_difficulty(1 + n % 5);
      req.set_request_id(request_id);
      appv1::ProblemResponse resp;
      s = WithRetries(rng, [&](int r) {
        grpc::ClientContext ctx;
        Prepare(&ctx, principal);
        return app_[r]->CreateProblem(&ctx, req, &resp);
      });
      if (s.ok()) {
        problems.push_back(resp.problem().problem_id());
        Record({audit::v1::OWNER_APP, resp.event_id(), "CreateProblem", principal, request_id,
                resp.problem().problem_id(), "slug", req.slug()});
      }
    } else if (kind == 2 || kind == 3) {
      const bool assign = kind == 2;
      const std::string& user = users[rng() % users.size()];
      const std::string role = kRoles[rng() % 3];
      std::string event_id;
      bool changed = false;
      s = WithRetries(rng, [&](int r) {
        grpc::ClientContext ctx;
        Prepare(&ctx, principal);
        if (assign) {
          authv1::AssignRoleRequest req;
          req.set_user_id(user);
          req.set_role(role);
          req.set_request_id(request_id);
          authv1::AssignRoleResponse resp;
          auto st = auth_[r]->AssignRole(&ctx, req, &resp);
          event_id = resp.event_id();
          changed = resp.changed();
          return st;
        }
        authv1::RevokeRoleRequest req;
        req.set_user_id(user);
        req.set_role(role);
        req.set_request_id(request_id);
        authv1::RevokeRoleResponse resp;
        auto st = auth_[r]->RevokeRole(&ctx, req, &resp);
        event_id = resp.event_id();
        changed = resp.changed();
        return st;
      });
      if (s.ok()) {
        Record({audit::v1::OWNER_AUTH, changed ? event_id : "",
                assign ? "AssignRole" : "RevokeRole", principal, request_id,
                absl::StrCat(user, "/", role), "", ""});
      }
    } else {
      appv1::UpdateProblemRequest req;
      req.mutable_problem()->set_problem_id(problems[rng() % problems.size()]);
      req.mutable_update_mask()->add_paths("title");
      req.mutable_problem()->set_title(absl::StrCat("Title ", request_id));
      req.set_request_id(request_id);
      appv1::ProblemResponse resp;
      s = WithRetries(rng, [&](int r) {
        grpc::ClientContext ctx;
        Prepare(&ctx, principal);
        return app_[r]->UpdateProblem(&ctx, req, &resp);
      });
      if (s.ok()) {
        Record({audit::v1::OWNER_APP, resp.changed() ? resp.event_id() : "", "UpdateProblem",
                principal, request_id, req.problem().problem_id(), "title", req.problem().title()});
      }
    }
    if (!s.ok()) {
      if (Retryable(s.error_code())) {
        ++gave_up_;
      } else {
        ++rejected_;
        std::lock_guard<std::mutex> lock(mu_);
        if (first_rejection_.empty()) first_rejection_ = s.error_message();
      }
    }
  }
}

}  // namespace ulticode::chaos
