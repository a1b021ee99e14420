// ulticode-proofbench: the latency of AuditLogService/GetInclusionProof on
// a log of any size, for the benchmark's log phase (bench/suite.py).
// --clients threads each call it back to back for --duration, for a random
// leaf of the latest checkpoint's tree, and it prints JSON: calls, errors
// and latency percentiles in ms.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "grpcpp/grpcpp.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode::bench {
namespace {

namespace v1 = admin::v1;

struct Options {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  int clients = 4;
  absl::Duration duration = absl::Seconds(10);
};

double Percentile(std::vector<int64_t>& us, double p) {
  if (us.empty()) return 0;
  const size_t k = std::min(us.size() - 1, static_cast<size_t>(p * us.size()));
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(k), us.end());
  return static_cast<double>(us[k]) / 1000.0;
}

int Run(const Options& o, const std::string& token) {
  auto stub = v1::AuditLogService::NewStub(
      grpc::CreateChannel(o.admin, grpc::InsecureChannelCredentials()));
  grpc::ClientContext first;
  first.AddMetadata("authorization", "Bearer " + token);
  v1::SignedCheckpoint latest;
  if (grpc::Status s = stub->GetCheckpoint(&first, v1::GetCheckpointRequest(), &latest); !s.ok()) {
    std::fprintf(stderr, "ulticode-proofbench: GetCheckpoint: %s\n", s.error_message().c_str());
    return 1;
  }
  const uint64_t size = latest.tree_size();
  std::mutex mu;
  std::vector<int64_t> us;
  std::atomic<int64_t> errors{0};
  const absl::Time end = absl::Now() + o.duration;
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(static_cast<uint64_t>(c) * 7919 + 1);
      std::vector<int64_t> mine;
      while (absl::Now() < end) {
        v1::GetInclusionProofRequest req;
        req.set_index(rng() % size);
        req.set_tree_size(size);
        v1::InclusionProof proof;
        grpc::ClientContext ctx;
        ctx.AddMetadata("authorization", "Bearer " + token);
        const absl::Time t0 = absl::Now();
        const grpc::Status s = stub->GetInclusionProof(&ctx, req, &proof);
        if (s.ok()) {
          mine.push_back(absl::ToInt64Microseconds(absl::Now() - t0));
        } else {
          ++errors;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      us.insert(us.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : threads) t.join();
  const size_t calls = us.size();
  const double p50 = Percentile(us, 0.50), p99 = Percentile(us, 0.99);
  const double max =
      us.empty() ? 0 : static_cast<double>(*std::max_element(us.begin(), us.end())) / 1000.0;
  std::printf(
      "{\"tree_size\": %llu, \"calls\": %zu, \"errors\": %lld, \"p50_ms\": %.3f, "
      "\"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
      static_cast<unsigned long long>(size), calls, static_cast<long long>(errors.load()), p50, p99,
      max);
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ulticode::bench

int main(int argc, char** argv) {
  using namespace ulticode;
  bench::Options o;
  config::Flags flags("ulticode-proofbench", "Times GetInclusionProof; prints JSON.");
  flags.String("admin", &o.admin, "Admin gRPC address", config::ValidateHostPort);
  flags.String("token-file", &o.token_file, "file holding an audit.reader token (mode 0600)");
  flags.Require("token-file");
  flags.Int("clients", &o.clients, "calls in flight", 1, 256);
  flags.Duration("duration", &o.duration, "how long to call", absl::Seconds(1), absl::Hours(1));
  config::ParseOrExit(flags, argc, argv);
  auto token = crypto::ReadSecretFile(o.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "ulticode-proofbench: %s\n",
                 std::string(token.status().message()).c_str());
    return 2;
  }
  return bench::Run(o, *token);
}
