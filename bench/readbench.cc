// ulticode-readbench: the latency of one of Admin's read RPCs on a database
// of any size, for the benchmark's log and growth phases (bench/suite.py).
// --clients threads each make --call back to back for --duration, with a
// fresh argument each time (a random leaf of the latest checkpoint's tree,
// or a random line of --values-file), and it prints JSON: the call, calls,
// errors and latency percentiles in ms. Exits 1 when any call failed.
//
// --call:
//   inclusion        GetInclusionProof of a random index
//   inclusion-by-id  GetInclusionProof of an event id (--values-file)
//   consistency      GetConsistencyProof from a random size to the latest
//   checkpoint       GetCheckpoint (the latest)
//   entries          ListLogEntries, 100 from a random index
//   tile             GetTile, a random full tile of level 0
//   get              GetAuditLog of an event id (--values-file)
//   query            QueryAuditLogs, 100 rows, filtered by --filter:
//                      none, owner (auth), actor, action, entity_type,
//                      entity ("type/id"), window (--values-file holds Unix
//                      seconds: one hour from there), next_page (the
//                      second page of an unfiltered query)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/latency.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "grpcpp/grpcpp.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode::bench {
namespace {

namespace v1 = admin::v1;

struct Options {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  std::string call = "inclusion";
  std::string filter = "none";
  std::string values_file;
  int clients = 4;
  absl::Duration duration = absl::Seconds(10);
};

// What every call may draw from: the latest tree size and the sampled values.
struct Inputs {
  uint64_t size = 0;
  std::vector<std::string> values;
};

// One call with arguments drawn from `rng`, its contexts made by `context`
// (each carries the token); its status and how long the timed RPC took.
struct Timed {
  grpc::Status status;
  absl::Duration took;
};
using Context = std::function<std::unique_ptr<grpc::ClientContext>()>;
using Call = std::function<Timed(const Context&, std::mt19937_64&)>;

// Times one RPC: `rpc` gets a fresh context.
template <typename Rpc>
Timed Time(const Context& context, Rpc rpc) {
  auto ctx = context();
  const absl::Time t0 = absl::Now();
  grpc::Status s = rpc(ctx.get());
  return {std::move(s), absl::Now() - t0};
}

absl::StatusOr<std::vector<std::string>> ReadValues(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--values-file ", path, ": cannot be read"));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  if (out.empty())
    return absl::InvalidArgumentError(absl::StrCat("--values-file ", path, " is empty"));
  return out;
}

const std::string& Pick(const Inputs& in, std::mt19937_64& rng) {
  return in.values[rng() % in.values.size()];
}

// QueryAuditLogs with --filter applied; `next_page` reads a first page and
// times only the second.
absl::StatusOr<Call> QueryCall(v1::AdminService::Stub& stub, const Options& o, const Inputs& in) {
  using Fill = std::function<void(v1::QueryAuditLogsRequest&, std::mt19937_64&)>;
  Fill fill;
  const std::string& f = o.filter;
  if (f == "none" || f == "next_page") {
    fill = [](v1::QueryAuditLogsRequest&, std::mt19937_64&) {};
  } else if (f == "owner") {
    fill = [](v1::QueryAuditLogsRequest& r, std::mt19937_64&) {
      r.mutable_filter()->set_owner(audit::v1::OWNER_AUTH);
    };
  } else if (f == "actor" || f == "action" || f == "entity_type" || f == "entity" ||
             f == "window") {
    if (in.values.empty())
      return absl::InvalidArgumentError("--filter=" + f + " needs --values-file");
    fill = [&in, f](v1::QueryAuditLogsRequest& r, std::mt19937_64& rng) {
      const std::string& v = Pick(in, rng);
      if (f == "actor") r.mutable_filter()->set_actor(v);
      if (f == "action") r.mutable_filter()->set_action(v);
      if (f == "entity_type") r.mutable_filter()->set_entity_type(v);
      if (f == "entity") {
        std::pair<std::string, std::string> te = absl::StrSplit(v, absl::MaxSplits('/', 1));
        r.mutable_filter()->set_entity_type(te.first);
        r.mutable_filter()->set_entity_id(te.second);
      }
      int64_t from = 0;
      if (f == "window" && absl::SimpleAtoi(v, &from)) {
        r.mutable_filter()->mutable_start_time()->set_seconds(from);
        r.mutable_filter()->mutable_end_time()->set_seconds(from + 3600);
      }
    };
  } else {
    return absl::InvalidArgumentError("--filter: unknown filter " + f);
  }
  const bool second_page = f == "next_page";
  return Call([&stub, fill, second_page](const Context& context, std::mt19937_64& rng) {
    v1::QueryAuditLogsRequest req;
    fill(req, rng);
    v1::QueryAuditLogsResponse page;
    if (second_page) {  // the first page, untimed
      auto first = context();
      if (grpc::Status s = stub.QueryAuditLogs(first.get(), req, &page); !s.ok()) {
        return Timed{s, absl::ZeroDuration()};
      }
      req.set_page_token(page.next_page_token());
    }
    return Time(context,
                [&](grpc::ClientContext* ctx) { return stub.QueryAuditLogs(ctx, req, &page); });
  });
}

absl::StatusOr<Call> MakeCall(v1::AuditLogService::Stub& log, v1::AdminService::Stub& admin,
                              const Options& o, const Inputs& in) {
  const uint64_t size = in.size;
  const bool needs_values = o.call == "inclusion-by-id" || o.call == "get";
  if (needs_values && in.values.empty()) {
    return absl::InvalidArgumentError("--call=" + o.call + " needs --values-file");
  }
  if (o.call == "inclusion") {
    return Call([&log, size](const Context& context, std::mt19937_64& rng) {
      v1::GetInclusionProofRequest req;
      req.set_leaf_index(rng() % size);
      req.set_tree_size(size);
      v1::InclusionProof out;
      return Time(context,
                  [&](grpc::ClientContext* ctx) { return log.GetInclusionProof(ctx, req, &out); });
    });
  }
  if (o.call == "inclusion-by-id") {
    return Call([&log, &in, size](const Context& context, std::mt19937_64& rng) {
      v1::GetInclusionProofRequest req;
      req.set_event_id(Pick(in, rng));
      req.set_tree_size(size);
      v1::InclusionProof out;
      return Time(context,
                  [&](grpc::ClientContext* ctx) { return log.GetInclusionProof(ctx, req, &out); });
    });
  }
  if (o.call == "consistency") {
    return Call([&log, size](const Context& context, std::mt19937_64& rng) {
      v1::GetConsistencyProofRequest req;
      req.set_first_tree_size(1 + rng() % (size - 1));
      req.set_second_tree_size(size);
      v1::ConsistencyProof out;
      return Time(context, [&](grpc::ClientContext* ctx) {
        return log.GetConsistencyProof(ctx, req, &out);
      });
    });
  }
  if (o.call == "checkpoint") {
    return Call([&log](const Context& context, std::mt19937_64&) {
      v1::SignedCheckpoint out;
      return Time(context, [&](grpc::ClientContext* ctx) {
        return log.GetCheckpoint(ctx, v1::GetCheckpointRequest(), &out);
      });
    });
  }
  if (o.call == "entries") {
    return Call([&log, size](const Context& context, std::mt19937_64& rng) {
      v1::ListLogEntriesRequest req;
      req.set_start_index(rng() % (size - std::min<uint64_t>(size - 1, 100)));
      req.set_page_size(100);
      v1::ListLogEntriesResponse out;
      return Time(context,
                  [&](grpc::ClientContext* ctx) { return log.ListLogEntries(ctx, req, &out); });
    });
  }
  if (o.call == "tile") {
    return Call([&log, size](const Context& context, std::mt19937_64& rng) {
      v1::GetTileRequest req;
      req.set_level(0);
      req.set_index(rng() % std::max<uint64_t>(1, size / 256));
      req.set_width(256);
      v1::Tile out;
      return Time(context, [&](grpc::ClientContext* ctx) { return log.GetTile(ctx, req, &out); });
    });
  }
  if (o.call == "get") {
    return Call([&admin, &in](const Context& context, std::mt19937_64& rng) {
      v1::GetAuditLogRequest req;
      req.set_event_id(Pick(in, rng));
      v1::AuditLog out;
      return Time(context,
                  [&](grpc::ClientContext* ctx) { return admin.GetAuditLog(ctx, req, &out); });
    });
  }
  if (o.call == "query") return QueryCall(admin, o, in);
  return absl::InvalidArgumentError("--call: unknown call " + o.call);
}

int Run(const Options& o, const std::string& token) {
  auto channel = grpc::CreateChannel(o.admin, grpc::InsecureChannelCredentials());
  auto log = v1::AuditLogService::NewStub(channel);
  auto admin = v1::AdminService::NewStub(channel);
  const Context context = [&token]() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  };
  Inputs in;
  v1::SignedCheckpoint latest;
  if (grpc::Status s = log->GetCheckpoint(context().get(), v1::GetCheckpointRequest(), &latest);
      !s.ok()) {
    std::fprintf(stderr, "ulticode-readbench: GetCheckpoint: %s\n", s.error_message().c_str());
    return 1;
  }
  in.size = latest.tree_size();
  if (!o.values_file.empty()) {
    auto values = ReadValues(o.values_file);
    if (!values.ok()) {
      std::fprintf(stderr, "ulticode-readbench: %s\n", values.status().ToString().c_str());
      return 2;
    }
    in.values = *std::move(values);
  }
  if (in.size < 2) {
    std::fprintf(stderr, "ulticode-readbench: the log has %llu leaves; at least 2 are needed\n",
                 static_cast<unsigned long long>(in.size));
    return 1;
  }
  auto call = MakeCall(*log, *admin, o, in);
  if (!call.ok()) {
    std::fprintf(stderr, "ulticode-readbench: %s\n", call.status().ToString().c_str());
    return 2;
  }
  std::mutex mu;
  std::vector<int64_t> us;
  std::string first_error;
  std::atomic<int64_t> errors{0};
  const absl::Time end = absl::Now() + o.duration;
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(static_cast<uint64_t>(c) * 7919 + 1);
      std::vector<int64_t> mine;
      while (absl::Now() < end) {
        const Timed t = (*call)(context, rng);
        if (t.status.ok()) {
          mine.push_back(absl::ToInt64Microseconds(t.took));
        } else if (errors.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(mu);
          first_error = t.status.error_message();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      us.insert(us.end(), mine.begin(), mine.end());
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first_error.empty()) {
    std::fprintf(stderr, "ulticode-readbench: %s: first error: %s\n", o.call.c_str(),
                 first_error.c_str());
  }
  const size_t calls = us.size();
  const Latency l = Summarize(us);
  std::printf(
      "{\"call\": \"%s\", \"filter\": \"%s\", \"tree_size\": %llu, \"calls\": %zu, "
      "\"errors\": %lld, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
      o.call.c_str(), o.call == "query" ? o.filter.c_str() : "",
      static_cast<unsigned long long>(in.size), calls, static_cast<long long>(errors.load()),
      l.p50_ms, l.p99_ms, l.max_ms);
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ulticode::bench

int main(int argc, char** argv) {
  using namespace ulticode;
  bench::Options o;
  config::Flags flags("ulticode-readbench", "Times one of Admin's read RPCs; prints JSON.");
  flags.String("admin", &o.admin, "Admin gRPC address", config::ValidateHostPort);
  flags.String("token-file", &o.token_file, "file holding an audit.reader token (mode 0600)");
  flags.Require("token-file");
  flags.String("call", &o.call,
               "inclusion, inclusion-by-id, consistency, checkpoint, entries, tile, get or query");
  flags.String("filter", &o.filter,
               "for --call=query: none, owner, actor, action, entity_type, entity, window or "
               "next_page");
  flags.String("values-file", &o.values_file,
               "one argument per line (event ids, actors, actions, entity types, type/id, Unix "
               "seconds), drawn at random");
  flags.Int("clients", &o.clients, "calls in flight", 1, 256);
  flags.Duration("duration", &o.duration, "how long to call", absl::Seconds(1), absl::Hours(1));
  config::ParseOrExit(flags, argc, argv);
  auto token = crypto::ReadSecretFile(o.token_file);
  if (!token.ok()) {
    std::fprintf(stderr, "ulticode-readbench: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  return bench::Run(o, *token);
}
