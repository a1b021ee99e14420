// ulticode-tail: `tail -f` of the audit trail (docs/watching.md). Follows
// AdminService/WatchAuditLogs and prints each row as one JSON line on
// stdout, in log order. With --position-file it keeps its place there (the
// last log index it printed, or the last a progress frame vouched for) and
// starts after it next time, so a restart, a reconnect or an Admin failover
// prints exactly the rows not printed yet (a crash between printing a row
// and saving its index prints that row again: dedupe on log_index).
//
//   ulticode-tail --admin=HOST:PORT --token-file=F [--cacert=F]
//                 [--position-file=F] [--from-beginning | --after-index=N]
//                 [--owner=auth|app] [--actor=A] [--action=A]
//                 [--entity-type=T [--entity-id=I]] [--progress] [--max-rows=N]
//
// It reconnects (with back-off, reading the token file again) whenever the
// stream ends in a way a retry can fix: Admin restarting or shutting down,
// the stream's limits, a caller that fell behind, the network, or nothing
// heard for --idle-timeout. It exits 2 on what a retry cannot fix (a bad
// filter, a cursor beyond the log, no permission, a log that lost a row),
// naming it, and 0 after --max-rows rows or on SIGINT/SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/backoff/backoff.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::tail {
namespace {

namespace v1 = admin::v1;

constexpr int kOk = 0, kError = 2;
constexpr char kResumeAfterTrailer[] = "ulticode-resume-after";  // admin/watch/watch_hub.h

struct Options {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  std::string cacert;
  std::string position_file;
  bool from_beginning = false;
  int64_t after_index = -1;
  std::string owner, actor, action, entity_type, entity_id;
  bool progress = false;
  int64_t max_rows = 0;
  absl::Duration idle_timeout = absl::Seconds(30);
};

void Say(const std::string& line) { std::fprintf(stderr, "ulticode-tail: %s\n", line.c_str()); }

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The saved position: nullopt when there is no file yet. A file that
// cannot be read or holds no index is an error, never a silent start
// elsewhere.
absl::StatusOr<std::optional<uint64_t>> LoadPosition(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<uint64_t>();
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--position-file ", path, ": cannot be read"));
  }
  const absl::string_view v = absl::StripAsciiWhitespace(*text);
  uint64_t index = 0;
  if (!absl::SimpleAtoi(v, &index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--position-file ", path, ": not a log index: \"", v, "\""));
  }
  return std::optional<uint64_t>(index);
}

// Written whole or not at all, also across a power loss: a new file,
// synced, renamed over the old one, and the directory synced.
absl::Status SavePosition(const std::string& path, uint64_t index) {
  const std::string tmp = path + ".tmp";
  const std::string text = absl::StrCat(index, "\n");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(tmp, ": cannot write"));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot replace"));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const Options& o) {
  if (o.cacert.empty()) return grpc::CreateChannel(o.admin, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions ssl;
  auto pem = ReadFile(o.cacert);
  if (!pem.ok()) return pem.status();
  ssl.pem_root_certs = *std::move(pem);
  return grpc::CreateChannel(o.admin, grpc::SslCredentials(ssl));
}

// What a retry can fix.
bool Retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::OK:  // the server ended a stream it should not have: go on
      return true;
    default:
      return false;
  }
}

class Follower {
 public:
  explicit Follower(Options o) : o_(std::move(o)) {}

  int Run() {
    auto start = Start();
    if (!start.ok()) {
      Say(std::string(start.status().message()));
      return kError;
    }
    position_ = *start;
    auto channel = Channel(o_);
    if (!channel.ok()) {
      Say(std::string(channel.status().message()));
      return kError;
    }
    auto stub = v1::AdminService::NewStub(*channel);
    std::thread watchdog([this] { Watchdog(); });
    int failures = 0;
    int code = kOk;
    while (!stopping_) {
      const grpc::Status s = Stream(*stub);
      if (stopping_ || done_) break;
      // An INTERNAL that comes back at the same place five times in a row
      // is a row Admin cannot send, not a passing trouble.
      const bool stuck =
          s.error_code() == grpc::StatusCode::INTERNAL && rows_in_stream_ == 0 && failures >= 4;
      if (!Retryable(s.error_code()) || stuck) {
        Say(absl::StrCat("stopped: ", s.error_message(), " (", static_cast<int>(s.error_code()),
                         ")"));
        code = kError;
        break;
      }
      const absl::Duration wait = backoff::Delay({absl::Milliseconds(200), absl::Seconds(10)},
                                                 rows_in_stream_ > 0 ? 1 : ++failures);
      if (rows_in_stream_ > 0) failures = 0;
      Say(absl::StrCat("stream ended (", s.error_message(), "); resuming ",
                       position_ ? absl::StrCat("after index ", *position_)
                       : (o_.from_beginning || from_start_) ? std::string("from the start")
                                                            : std::string("at the head"),
                       " in ", absl::FormatDuration(wait)));
      for (absl::Time end = absl::Now() + wait; absl::Now() < end && !stopping_;) {
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    stopping_ = true;
    watchdog.join();
    return code;
  }

  void Stop() {
    stopping_ = true;
    Cancel();
  }

 private:
  // Where the first stream starts: the position file, else the flags.
  absl::StatusOr<std::optional<uint64_t>> Start() {
    if (!o_.position_file.empty()) {
      auto saved = LoadPosition(o_.position_file);
      if (!saved.ok() || *saved) return saved;
    }
    if (o_.after_index >= 0) return std::optional<uint64_t>(o_.after_index);
    return std::optional<uint64_t>();
  }

  v1::WatchAuditLogsRequest Request() const {
    v1::WatchAuditLogsRequest req;
    if (o_.owner == "auth") req.set_owner(audit::v1::OWNER_AUTH);
    if (o_.owner == "app") req.set_owner(audit::v1::OWNER_APP);
    req.set_actor(o_.actor);
    req.set_action(o_.action);
    req.set_entity_type(o_.entity_type);
    req.set_entity_id(o_.entity_id);
    if (position_) {
      req.set_after_index(*position_);
    } else if (o_.from_beginning || from_start_) {
      req.set_from_beginning(true);
    }
    return req;
  }

  grpc::Status Stream(v1::AdminService::Stub& stub) {
    // Read again each time (a rotated token); a file caught mid-rotation
    // is tried again like any passing trouble.
    auto token = crypto::ReadSecretFile(o_.token_file);
    if (!token.ok()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(token.status().message()));
    }
    auto ctx = std::make_shared<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + *token);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return grpc::Status::CANCELLED;  // a signal before the stream existed
      ctx_ = ctx;
      last_heard_ = absl::Now();
    }
    rows_in_stream_ = 0;
    auto reader = stub.WatchAuditLogs(ctx.get(), Request());
    v1::WatchAuditLogsResponse frame;
    while (reader->Read(&frame)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_heard_ = absl::Now();
      }
      if (frame.has_log()) {
        if (!Print(frame.log().log())) {
          ctx->TryCancel();
          (void)reader->Finish();
          std::lock_guard<std::mutex> lock(mu_);
          ctx_.reset();
          // Not retried: the row was not printed, and its index not saved.
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "cannot write to stdout");
        }
        ++rows_in_stream_;
        Advance(frame.log().log().log_index());
        if (o_.max_rows > 0 && ++rows_ >= o_.max_rows) {
          done_ = true;
          ctx->TryCancel();
          break;
        }
      } else if (!frame.progress().has_resume_after_index()) {
        if (o_.progress) PrintProgress(frame.progress());
        // No leaf considered yet: an empty log, or a watch from index 0
        // that has not read one. Whatever comes is after "the start".
        if (!position_) from_start_ = true;
      } else {
        if (o_.progress) PrintProgress(frame.progress());
        // Leaves the filters did not match are behind us too.
        if (!position_ || frame.progress().resume_after_index() > *position_) {
          Advance(frame.progress().resume_after_index());
        }
      }
    }
    grpc::Status s = reader->Finish();
    // An end names the index to resume after: every row up to it was
    // read above (a watch at the head that had sent nothing has one too).
    const auto& trailers = ctx->GetServerTrailingMetadata();
    if (auto t = trailers.find(kResumeAfterTrailer); t != trailers.end()) {
      uint64_t index = 0;
      if (absl::SimpleAtoi(absl::string_view(t->second.data(), t->second.size()), &index) &&
          (!position_ || index > *position_)) {
        Advance(index);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    ctx_.reset();
    return s;
  }

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

  void Advance(uint64_t index) {
    position_ = index;
    if (o_.position_file.empty()) return;
    if (absl::Status s = SavePosition(o_.position_file, index); !s.ok()) {
      Say(std::string(s.message()));
    }
  }

  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_) ctx_->TryCancel();
  }

  // Nothing heard (no row, no progress frame) for --idle-timeout: the
  // connection is presumed dead and the stream is started again.
  void Watchdog() {
    while (!stopping_) {
      absl::SleepFor(absl::Milliseconds(200));
      std::lock_guard<std::mutex> lock(mu_);
      if (ctx_ && absl::Now() - last_heard_ > o_.idle_timeout) {
        Say(absl::StrCat("nothing heard for ", absl::FormatDuration(o_.idle_timeout),
                         "; reconnecting"));
        ctx_->TryCancel();
        last_heard_ = absl::Now();
      }
    }
  }

  const Options o_;
  std::optional<uint64_t> position_;
  bool from_start_ = false;  // no position, but the stream was at the log's start
  int64_t rows_ = 0;
  int64_t rows_in_stream_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::shared_ptr<grpc::ClientContext> ctx_;
  absl::Time last_heard_;
};

}  // namespace
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
               "where the last log index printed is kept; a run starts after it");
  flags.Bool("from-beginning", &o.from_beginning,
             "with no position: start at log index 0 (default: at the head)");
  flags.Int("after-index", &o.after_index, "with no position: start after this log index", -1,
            INT64_MAX);
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
  config::ParseOrExit(flags, argc, argv);

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
  // Lives as long as the process: the signal thread may still hold it.
  auto* follower = new tail::Follower(o);
  std::thread([follower, signals]() mutable {
    int sig = 0;
    sigwait(&signals, &sig);
    follower->Stop();
  }).detach();
  return follower->Run();
}
