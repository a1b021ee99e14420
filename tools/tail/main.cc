// ulticode-tail: `tail -f` of the audit trail (docs/watching.md). Follows
// AdminService/WatchAuditLogs and prints each row as one JSON line on
// stdout, in log order. With --position-file it keeps its place there (the
// resume token of the last row it printed, or of the last progress frame)
// and starts there next time, so a restart, a reconnect or an Admin failover
// prints exactly the rows not printed yet (a crash between printing a row
// and saving its token prints that row again: dedupe on log_index).
//
//   ulticode-tail --admin=HOST:PORT --token-file=F [--cacert=F]
//                 [--position-file=F] [--from-beginning | --resume-token=T]
//                 [--owner=auth|app] [--actor=A] [--action=A]
//                 [--entity-type=T [--entity-id=I]] [--progress] [--max-rows=N]
//                 [--verify --log-keys-file=F [--witness-keys-file=F [--witness-quorum=N]]
//                  [--owner-keys-file=F]]
//
// With --verify it prints a row only once it has checked it against the
// log: the row's fields are its envelope (its log entry), sealed by its
// owner when --owner-keys-file gives the owners' keys, the entry
// is proved (GetInclusionProof) in a checkpoint signed by the log and
// cosigned by the witness policy, and every checkpoint extends the one
// before (GetConsistencyProof). Rows wait for such a checkpoint (about a
// second). On a break it prints nothing more, names the row or checkpoint,
// and exits 1; the position file then holds the last row that verified.
// A verifying tail asks for every leaf and filters them itself, and its
// position file holds its verified place (the next log index and the
// checkpoint that proved the leaves before it): a restart must go on at
// exactly that index in a log that extends that checkpoint, so
// --resume-token (Admin's word alone) does not go with --verify.
//
// It reconnects (with back-off, reading the token file again) whenever the
// stream ends in a way a retry can fix: Admin restarting or shutting down,
// the stream's limits, a caller that fell behind, the network, or nothing
// heard for --idle-timeout. It exits 2 on what a retry cannot fix (a bad
// filter, a resume token beyond the log, no permission, a log that lost a row),
// naming it, and 0 after --max-rows rows or on SIGINT/SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/tlog/note.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "tools/client/admin_channel.h"
#include "tools/client/follower.h"
#include "tools/client/position_file.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::tail {
namespace {

namespace v1 = admin::v1;

constexpr int kOk = 0, kBroken = 1, kError = 2;

struct Options {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  std::string cacert;
  std::string position_file;
  bool from_beginning = false;
  std::string resume_token;
  std::string owner, actor, action, entity_type, entity_id;
  bool progress = false;
  int64_t max_rows = 0;
  absl::Duration idle_timeout = absl::Seconds(30);
  bool verify = false;
  std::string log_keys_file, witness_keys_file, owner_keys_file;
  int64_t witness_quorum = 0;
};

void Say(const std::string& line) { std::fprintf(stderr, "ulticode-tail: %s\n", line.c_str()); }

using client::LoadPosition;
using client::SavePosition;

bool Print(const v1::AuditLog& log) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(log, &json, opts).ok()) return false;
  json += "\n";
  return std::fwrite(json.data(), 1, json.size(), stdout) == json.size() &&
         std::fflush(stdout) == 0;
}

void PrintProgress(const v1::WatchProgress& p) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  if (google::protobuf::util::MessageToJsonString(p, &json, opts).ok()) {
    std::fprintf(stdout, "{\"progress\":%s}\n", json.c_str());
    std::fflush(stdout);
  }
}

v1::AuditLogFilter FilterOf(const Options& o) {
  v1::AuditLogFilter f;
  if (o.owner == "auth") f.set_owner(audit::v1::OWNER_AUTH);
  if (o.owner == "app") f.set_owner(audit::v1::OWNER_APP);
  f.set_actor(o.actor);
  f.set_action(o.action);
  f.set_entity_type(o.entity_type);
  f.set_entity_id(o.entity_id);
  return f;
}

// The follower of `o`, printing each row; `rows` counts them.
std::unique_ptr<client::Follower> FollowerOf(const Options& o,
                                             std::optional<client::Verification> verification,
                                             std::optional<client::Position> start, int64_t* rows) {
  client::FollowOptions f;
  f.admin = o.admin;
  f.token_file = o.token_file;
  f.cacert = o.cacert;
  f.filter = FilterOf(o);
  f.start = std::move(start);
  f.from_beginning = o.from_beginning;
  f.idle_timeout = o.idle_timeout;
  f.verification = std::move(verification);
  client::FollowHandlers h;
  h.row = [&o, rows](const v1::WatchedAuditLog& row,
                     const client::Position&) -> absl::StatusOr<bool> {
    // Not retried: the row was not printed, and its index not saved.
    if (!Print(row.audit_log())) return absl::FailedPreconditionError("cannot write to stdout");
    return o.max_rows == 0 || ++*rows < o.max_rows;
  };
  h.passed = [&o](const client::Position& position) {
    if (o.position_file.empty()) return;
    if (absl::Status s = SavePosition(o.position_file, position); !s.ok()) {
      Say(std::string(s.message()));
    }
  };
  if (o.progress) h.progress = PrintProgress;
  h.say = Say;
  return std::make_unique<client::Follower>(std::move(f), std::move(h));
}

// Where the first stream starts: the position file, else the flags.
absl::StatusOr<std::optional<client::Position>> Start(const Options& o) {
  if (!o.position_file.empty()) {
    auto saved = LoadPosition(o.position_file);
    if (!saved.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--position-file ", saved.status().message()));
    }
    if (*saved) return saved;
  }
  if (!o.resume_token.empty()) {
    return std::optional<client::Position>(client::Position{o.resume_token, {}, {}});
  }
  return std::optional<client::Position>();
}

}  // namespace

// What --verify checks, from the flags; nullopt without --verify.
absl::StatusOr<std::optional<client::Verification>> Policy(const Options& o) {
  if (!o.verify) {
    if (!o.log_keys_file.empty() || !o.witness_keys_file.empty() || !o.owner_keys_file.empty()) {
      return absl::InvalidArgumentError(
          "--log-keys-file, --witness-keys-file and --owner-keys-file need --verify");
    }
    return std::nullopt;
  }
  if (o.log_keys_file.empty()) return absl::InvalidArgumentError("--verify: needs --log-keys-file");
  if (!o.resume_token.empty()) {
    return absl::InvalidArgumentError(
        "--resume-token does not go with --verify: a verifying tail starts at a place it verified "
        "(--position-file), the beginning or the head");
  }
  return client::VerificationFromFiles(o.log_keys_file, o.witness_keys_file, o.witness_quorum,
                                       o.owner_keys_file);
}

}  // namespace ulticode::tail

int main(int argc, char** argv) {
  using namespace ulticode;
  tail::Options o;
  config::Flags flags("ulticode-tail",
                      "Follows the audit trail (AdminService/WatchAuditLogs): one JSON line per "
                      "row, in log order; resumable with --position-file.");
  flags.String("admin", &o.admin, "Admin's gRPC address", config::ValidateHostPort);
  flags.String("token-file", &o.token_file,
               "file holding an audit.reader bearer token (0600); read again on each reconnect");
  flags.Require("token-file");
  flags.String("cacert", &o.cacert, "CA certificate (PEM) when Admin serves TLS");
  flags.String("position-file", &o.position_file,
               "where the resume token of the last row printed is kept; a run goes on from it");
  flags.Bool("from-beginning", &o.from_beginning,
             "with no position: start at log index 0 (default: at the head)");
  flags.String("resume-token", &o.resume_token,
               "with no position: go on from this resume token (a frame's, or an error's)",
               [](const std::string& v) -> absl::Status {
                 if (v.empty() || client::LooksLikeToken(v)) return absl::OkStatus();
                 return absl::InvalidArgumentError("not a resume token");
               });
  flags.String("owner", &o.owner, "only this owner's rows (auth or app)",
               [](const std::string& v) -> absl::Status {
                 if (v.empty() || v == "auth" || v == "app") return absl::OkStatus();
                 return absl::InvalidArgumentError("must be auth or app");
               });
  flags.String("actor", &o.actor, "only rows of this actor");
  flags.String("action", &o.action, "only rows of this action");
  flags.String("entity-type", &o.entity_type, "only rows of this entity type");
  flags.String("entity-id", &o.entity_id, "only rows of this entity (with --entity-type)");
  flags.Bool("progress", &o.progress, "also print progress frames ({\"progress\": ...})");
  flags.Int("max-rows", &o.max_rows, "exit after printing this many rows (0: never)", 0, INT64_MAX);
  flags.Duration("idle-timeout", &o.idle_timeout,
                 "reconnect when nothing (not even a progress frame) came for this long",
                 absl::Seconds(1), absl::Hours(1));
  flags.Bool("verify", &o.verify,
             "print a row only once it is proved in a witnessed checkpoint of the log (needs "
             "--log-keys-file); exit 1 at the first break");
  flags.String("log-keys-file", &o.log_keys_file, "the log's verifier keys, one a line (--verify)");
  flags.String("witness-keys-file", &o.witness_keys_file,
               "the witnesses' cosignature verifier keys (--verify: the witness policy)");
  flags.Int("witness-quorum", &o.witness_quorum,
            "how many of those keys must cosign a checkpoint (0: every one)", 0, 1000);
  flags.String("owner-keys-file", &o.owner_keys_file,
               "the owners' public keys (key directory format): --verify also checks each row's "
               "owner seal");
  config::ParseOrExit(flags, argc, argv);
  auto policy = tail::Policy(o);
  if (!policy.ok()) {
    std::fprintf(stderr, "ulticode-tail: %s\n", std::string(policy.status().message()).c_str());
    return 2;
  }

  // SIGINT/SIGTERM end the stream; the position file already holds the last
  // row printed.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (auto token = crypto::ReadSecretFile(o.token_file); !token.ok()) {
    std::fprintf(stderr, "ulticode-tail: %s\n", std::string(token.status().message()).c_str());
    return 2;
  }
  auto start = tail::Start(o);
  if (!start.ok()) {
    std::fprintf(stderr, "ulticode-tail: %s\n", std::string(start.status().message()).c_str());
    return tail::kError;
  }
  int64_t rows = 0;
  // Lives as long as the process: the signal thread may still hold it.
  client::Follower* follower =
      tail::FollowerOf(o, *std::move(policy), *std::move(start), &rows).release();
  std::thread([follower, signals]() mutable {
    int sig = 0;
    sigwait(&signals, &sig);
    follower->Stop();
  }).detach();
  const absl::Status s = follower->Run();
  if (s.ok()) return tail::kOk;
  if (absl::IsDataLoss(s)) {
    tail::Say(absl::StrCat("BREAK: ", s.message(), "; nothing after it is printed"));
    return tail::kBroken;
  }
  tail::Say(std::string(s.message()));
  return tail::kError;
}
