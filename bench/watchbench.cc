// ulticode-watchbench: WatchAuditLogs under load, for the benchmark's watch
// phase (bench/suite.py). --watchers streams start at the head, each on a
// connection of its own (as separate followers would be; --per-connection
// puts up to 100 on one), and read for --duration.
//   latency mode: every row's delay from its occurred_at (the owner's clock,
//     in its business transaction) to its arrival at the watcher; prints
//     JSON: watchers, rows, p50/p99/max ms.
//   --idle: every stream filters on an actor nobody is, so only progress
//     frames come; prints JSON: watchers, progress frames, errors.
// Exits 1 when a stream failed.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/latency.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::bench {
namespace {

namespace v1 = admin::v1;

struct Options {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  int watchers = 1;
  int per_connection = 1;
  bool idle = false;
  absl::Duration duration = absl::Seconds(10);
};

int Run(const Options& o, const std::string& token) {
  std::vector<std::unique_ptr<v1::AdminService::Stub>> stubs;
  for (int c = 0; c < (o.watchers + o.per_connection - 1) / o.per_connection; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // a connection of its own
    stubs.push_back(v1::AdminService::NewStub(
        grpc::CreateCustomChannel(o.admin, grpc::InsecureChannelCredentials(), args)));
  }
  std::mutex mu;
  std::vector<int64_t> us;
  std::atomic<int64_t> progress{0}, errors{0};
  std::string first_error;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(o.watchers);
  std::vector<std::thread> threads;
  for (int w = 0; w < o.watchers; ++w) {
    contexts[w] = std::make_unique<grpc::ClientContext>();
    contexts[w]->AddMetadata("authorization", "Bearer " + token);
    threads.emplace_back([&, w] {
      v1::WatchAuditLogsRequest req;
      if (o.idle) req.mutable_filter()->set_actor("nobody-is-this-actor");
      auto reader = stubs[w / o.per_connection]->WatchAuditLogs(contexts[w].get(), req);
      std::vector<int64_t> mine;
      v1::WatchAuditLogsResponse frame;
      while (reader->Read(&frame)) {
        if (frame.has_audit_log()) {
          const absl::Time occurred =
              absl::FromUnixMicros(google::protobuf::util::TimeUtil::TimestampToMicroseconds(
                  frame.audit_log().audit_log().occurred_at()));
          mine.push_back(absl::ToInt64Microseconds(absl::Now() - occurred));
        } else {
          ++progress;
        }
      }
      const grpc::Status s = reader->Finish();
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
        if (errors++ == 0) first_error = s.error_message();
      }
      us.insert(us.end(), mine.begin(), mine.end());
    });
  }
  absl::SleepFor(o.duration);
  for (auto& ctx : contexts) ctx->TryCancel();
  for (std::thread& t : threads) t.join();
  if (!first_error.empty()) std::fprintf(stderr, "ulticode-watchbench: %s\n", first_error.c_str());
  const size_t rows = us.size();
  const Latency l = Summarize(us);
  std::printf(
      "{\"watchers\": %d, \"idle\": %s, \"rows\": %zu, \"progress_frames\": %lld, "
      "\"errors\": %lld, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
      o.watchers, o.idle ? "true" : "false", rows, static_cast<long long>(progress.load()),
      static_cast<long long>(errors.load()), l.p50_ms, l.p99_ms, l.max_ms);
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ulticode::bench

int main(int argc, char** argv) {
  using namespace ulticode;
  bench::Options o;
  config::Flags flags("ulticode-watchbench", "Times WatchAuditLogs deliveries; prints JSON.");
  flags.String("admin", &o.admin, "Admin gRPC address", config::ValidateHostPort);
  flags.String("token-file", &o.token_file, "file holding an audit.reader token (mode 0600)");
  flags.Require("token-file");
  flags.Int("watchers", &o.watchers, "streams at once", 1, 10000);
  flags.Int("per-connection", &o.per_connection, "streams per connection", 1, 100);
  flags.Bool("idle", &o.idle, "streams that match nothing (progress frames only)");
  flags.Duration("duration", &o.duration, "how long to watch", absl::Seconds(1), absl::Hours(1));
  config::ParseOrExit(flags, argc, argv);
  auto token = crypto::ReadSecretFile(o.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "ulticode-watchbench: %s\n",
                 std::string(token.status().message()).c_str());
    return 2;
  }
  return bench::Run(o, *token);
}
