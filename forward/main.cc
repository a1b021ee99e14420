// ulticode-forward: delivers Admin's audit log to the systems security
// teams already run (docs/forwarding.md): HTTP webhooks and syslog
// receivers, each sink with its own filter and position, at least once, in
// log order, every row proved in a witnessed checkpoint before it leaves.
//
//   ulticode-forward --admin=HOST:PORT --token-file=F [--cacert=F]
//                    --sinks-file=F --state-dir=DIR --log-keys-file=F
//                    [--witness-keys-file=F [--witness-quorum=N]] [--owner-keys-file=F]
//                    [--start=beginning|head] [--metrics-listen=ADDR] [--health-listen=ADDR]
//
// Serves /metrics and grpc.health.v1 (SERVING while at least one sink
// runs). Exits 0 on SIGTERM/SIGINT, 1 once every sink has stopped on a
// break in the log or an error a retry cannot fix, 2 for a bad flag or
// sinks file.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/server/grpc_server.h"
#include "common/server/signals.h"
#include "forward/sink_runner.h"
#include "forward/sinks_config.h"
#include "tools/client/admin_channel.h"
#include "tools/client/follower.h"
#include "tools/client/position_file.h"

namespace ulticode::forward {
namespace {

constexpr int kOk = 0, kStopped = 1, kError = 2;

struct Options {
  client::AdminFlags client;
  std::string sinks_file, state_dir, start = "beginning";
  std::string log_keys_file, witness_keys_file, owner_keys_file;
  int64_t witness_quorum = 0;
  std::string metrics_listen = "127.0.0.1:9094";
  std::string health_listen = "127.0.0.1:8084";
  absl::Duration linger = absl::Seconds(1);
  absl::Duration idle_timeout = absl::Seconds(30);
  int64_t max_poisoned_in_a_row = 10;
};

Options ParseFlags(int argc, char** argv) {
  Options o;
  config::Flags flags("ulticode-forward",
                      "Delivers the audit log to webhooks and syslog receivers, each sink with "
                      "its filter and position (docs/forwarding.md).");
  o.client.Register(flags);
  flags.String("sinks-file", &o.sinks_file,
               "the sinks: ulticode.forward.v1.ForwarderConfig as protobuf JSON");
  flags.Require("sinks-file");
  flags.String("state-dir", &o.state_dir,
               "where each sink's position (<sink>.position) and poison file "
               "(<sink>.poison.jsonl) are kept");
  flags.Require("state-dir");
  flags.String("log-keys-file", &o.log_keys_file,
               "the log's verifier keys: a row is forwarded only once proved in a checkpoint "
               "they signed");
  flags.Require("log-keys-file");
  flags.String("witness-keys-file", &o.witness_keys_file,
               "the witnesses' cosignature keys: the checkpoint must be cosigned by them");
  flags.Int("witness-quorum", &o.witness_quorum,
            "how many of those keys must cosign (0: every one)", 0, 1000);
  flags.String("owner-keys-file", &o.owner_keys_file,
               "the owners' public keys: each row's owner seal is checked too");
  flags.String("start", &o.start,
               "where a sink without a position starts: beginning (the whole log) or head",
               [](const std::string& v) -> absl::Status {
                 if (v == "beginning" || v == "head") return absl::OkStatus();
                 return absl::InvalidArgumentError("must be beginning or head");
               });
  flags.String("metrics-listen", &o.metrics_listen, "/metrics address", config::ValidateHostPort);
  flags.String("health-listen", &o.health_listen, "grpc.health.v1 address (plaintext)",
               config::ValidateHostPort);
  flags.Duration("batch-linger", &o.linger,
                 "a partial batch is sent once its first row waited this long",
                 absl::Milliseconds(1), absl::Minutes(1));
  flags.Int("max-poisoned-in-a-row", &o.max_poisoned_in_a_row,
            "rows a destination may refuse for good one after another (each to the sink's poison "
            "file); past them it refuses the sink, not a row, and the sink stops as a "
            "configuration error",
            1, 100000);
  flags.Duration("idle-timeout", &o.idle_timeout,
                 "reconnect to Admin when nothing came for this long", absl::Seconds(1),
                 absl::Hours(1));
  config::ParseOrExit(flags, argc, argv);
  return o;
}

int Fail(const absl::Status& s) {
  log::Error("forward", "cannot start", {{"error", s.ToString()}});
  return kError;
}

// One runner per sink of the file, each resuming from its position file.
absl::StatusOr<std::vector<std::unique_ptr<SinkRunner>>> Runners(
    const Options& o, std::vector<SinkPlan> plans, const client::Verification& verification,
    prometheus::Registry& registry) {
  std::vector<std::unique_ptr<SinkRunner>> sinks;
  for (SinkPlan& plan : plans) {
    SinkOptions s;
    s.name = plan.name;
    s.schema = plan.schema;
    s.max_batch_rows = plan.max_batch_rows;
    s.max_batch_bytes = plan.max_batch_bytes;
    s.linger = o.linger;
    s.max_poisoned_in_a_row = static_cast<int>(o.max_poisoned_in_a_row);
    s.state_dir = o.state_dir;
    s.follow.admin = o.client.admin;
    s.follow.token_file = o.client.token_file;
    s.follow.cacert = o.client.cacert;
    s.follow.filter = plan.filter;
    s.follow.idle_timeout = o.idle_timeout;
    s.follow.verification = verification;
    const std::string position = absl::StrCat(o.state_dir, "/", plan.name, ".position");
    ASSIGN_OR_RETURN(s.follow.start, client::LoadPosition(position));
    if (s.follow.start && !s.follow.start->verified()) {
      return absl::InvalidArgumentError(
          absl::StrCat(position,
                       ": a resume token without the log index and checkpoint the sink verified; "
                       "delete it to send the sink the history again"));
    }
    s.follow.from_beginning = o.start == "beginning";
    sinks.push_back(
        std::make_unique<SinkRunner>(std::move(s), std::move(plan.destination), registry));
  }
  return sinks;
}

int Main(int argc, char** argv) {
  const Options o = ParseFlags(argc, argv);
  server::BlockTerminationSignals();
  std::signal(SIGPIPE, SIG_IGN);
  auto plans = LoadSinks(o.sinks_file);
  if (!plans.ok()) return Fail(plans.status());
  auto verification = client::VerificationFromFiles(o.log_keys_file, o.witness_keys_file,
                                                    o.witness_quorum, o.owner_keys_file);
  if (!verification.ok()) return Fail(verification.status());
  if (auto token = crypto::ReadSecretFile(o.client.token_file); !token.ok()) {
    return Fail(token.status());
  }
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  if (ec) return Fail(absl::InvalidArgumentError(absl::StrCat("--state-dir: ", ec.message())));
  auto metrics = metrics::Metrics::Start(o.metrics_listen, "ulticode-forward");
  if (!metrics.ok()) return Fail(metrics.status());
  server::GrpcServer health(server::PlaintextOptions(o.health_listen, 4), (*metrics)->registry());
  if (absl::Status s = health.Start(); !s.ok()) return Fail(s);

  auto sinks = Runners(o, *std::move(plans), *verification, (*metrics)->registry());
  if (!sinks.ok()) return Fail(sinks.status());
  std::atomic<int> running{static_cast<int>(sinks->size())};
  absl::Notification all_stopped;
  std::vector<std::thread> threads;
  for (auto& sink : *sinks) {
    threads.emplace_back([&sink, &running, &all_stopped] {
      (void)sink->Run();
      if (running.fetch_sub(1) == 1) all_stopped.Notify();
    });
  }
  health.SetServing(true);
  log::Info("forward", "forwarding", {{"sinks", absl::StrCat(sinks->size())}});
  server::TerminationWatch signals;
  int code = kOk;
  while (!signals.WaitFor(absl::Milliseconds(200))) {
    if (all_stopped.HasBeenNotified()) {
      code = kStopped;
      break;
    }
  }
  health.SetServing(false);
  for (auto& sink : *sinks) sink->Stop();
  for (auto& t : threads) t.join();
  health.Shutdown(absl::Seconds(1));
  return code;
}

}  // namespace
}  // namespace ulticode::forward

int main(int argc, char** argv) { return ulticode::forward::Main(argc, argv); }
