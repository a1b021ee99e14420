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

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/backoff/backoff.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/server/error_details.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "tools/client/admin_channel.h"
#include "tools/verify/served_row.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

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

using client::ReadFile;

// A resume token as Admin issues it: base64url, short.
bool LooksLikeToken(absl::string_view v) {
  if (v.empty() || v.size() > 256) return false;
  for (char c : v) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_') return false;
  }
  return true;
}

// The saved position: nullopt when there is no file yet. A file that
// cannot be read or holds no token is an error, never a silent start
// elsewhere.
absl::StatusOr<std::optional<std::string>> LoadPosition(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<std::string>();
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--position-file ", path, ": cannot be read"));
  }
  const absl::string_view v = absl::StripAsciiWhitespace(*text);
  if (!LooksLikeToken(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--position-file ", path, ": not a resume token: \"", v.substr(0, 64), "\""));
  }
  return std::optional<std::string>(std::string(v));
}

// Written whole or not at all, also across a power loss: a new file,
// synced, renamed over the old one, and the directory synced.
absl::Status SavePosition(const std::string& path, const std::string& token) {
  const std::string tmp = path + ".tmp";
  const std::string text = absl::StrCat(token, "\n");
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

// --verify: the rows of a stream held until a witnessed checkpoint covers
// them, each then proved in it. Owned by the stream's thread.
struct Verification {
  verify::CheckpointPolicy policy;
  std::optional<crypto::KeyDirectory> owners;  // --owner-keys-file
};

class RowVerifier {
 public:
  RowVerifier(Verification v, std::shared_ptr<grpc::Channel> channel)
      : policy_(std::move(v.policy)),
        owners_(std::move(v.owners)),
        log_(v1::AuditLogService::NewStub(channel)) {}

  // A row as it arrived: checked against its own leaf, then held.
  absl::Status Add(const v1::WatchedAuditLog& row) {
    RETURN_IF_ERROR(
        verify::CheckRowIsLeaf(row.audit_log(), row.leaf(), owners_ ? &*owners_ : nullptr));
    held_.push_back(row);
    return absl::OkStatus();
  }
  // A checkpoint as a progress frame carried it: once it meets the policy
  // and extends the last one accepted, the held rows inside it are proved
  // and handed to `print` in order (false from `print` stops). DATA_LOSS
  // names a break; a checkpoint the witnesses have not cosigned yet is no
  // break (the rows wait).
  absl::Status Checkpoint(const v1::SignedCheckpoint& signed_checkpoint, const std::string& token,
                          const std::function<bool(const v1::WatchedAuditLog&)>& print) {
    auto checkpoint = verify::OpenWitnessed(signed_checkpoint, policy_);
    if (!checkpoint.ok()) {
      if (absl::IsUnavailable(checkpoint.status())) return absl::OkStatus();  // not yet cosigned
      return absl::DataLossError(absl::StrCat("checkpoint ", signed_checkpoint.tree_size(), ": ",
                                              checkpoint.status().message()));
    }
    RETURN_IF_ERROR(Extends(*checkpoint, token));
    if (!accepted_ || checkpoint->size > accepted_->size) accepted_ = *checkpoint;
    while (!held_.empty() && held_.front().audit_log().log_index() < accepted_->size) {
      const v1::WatchedAuditLog& row = held_.front();
      RETURN_IF_ERROR(Prove(row, token));
      if (!print(row)) return absl::FailedPreconditionError("cannot write to stdout");
      held_.pop_front();
    }
    return absl::OkStatus();
  }
  // While rows are held, at most once a second: the newest checkpoint the
  // witnesses cosigned, asked of the log (a busy stream sends no progress
  // frame, and a progress frame's checkpoint is often not cosigned yet).
  absl::Status Poll(const std::string& token,
                    const std::function<bool(const v1::WatchedAuditLog&)>& print) {
    if (held_.empty() || absl::Now() - polled_ < absl::Seconds(1)) return absl::OkStatus();
    polled_ = absl::Now();
    v1::GetCheckpointRequest req;
    req.mutable_newest_witnessed();
    v1::SignedCheckpoint checkpoint;
    auto ctx = Context(token);
    const grpc::Status s = log_->GetCheckpoint(ctx.get(), req, &checkpoint);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
    if (!s.ok()) return FromGrpc(s);
    return Checkpoint(checkpoint, token, print);
  }
  // A new stream starts after the last row printed: what was held comes again.
  void Reset() { held_.clear(); }
  bool holding() const { return !held_.empty(); }

 private:
  // A failed call keeps its code: a refusal (no permission) is not retried.
  static absl::Status FromGrpc(const grpc::Status& s) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }

  // OK when `next` extends the accepted checkpoint. One older than it (a
  // replica a little behind) must be a prefix of it: Consistent() then
  // says so, and the caller keeps the accepted one.
  absl::Status Extends(const tlog::Checkpoint& next, const std::string& token) {
    if (!accepted_) return absl::OkStatus();
    const tlog::Checkpoint& last = *accepted_;
    if (next.origin != last.origin || (next.size == last.size && next.root != last.root)) {
      return absl::DataLossError(absl::StrCat(
          "checkpoint ", next.size, " does not extend checkpoint ", last.size, " (a fork)"));
    }
    if (next.size < last.size) return Consistent(next, last, token);
    return Consistent(last, next, token);
  }

  // DATA_LOSS unless the log's proof shows `first` is a prefix of `second`.
  absl::Status Consistent(const tlog::Checkpoint& first, const tlog::Checkpoint& second,
                          const std::string& token) {
    if (first.size == second.size || first.size == 0) return absl::OkStatus();
    const tlog::Checkpoint& last = first;
    const tlog::Checkpoint& next = second;
    v1::GetConsistencyProofRequest req;
    req.set_first_tree_size(last.size);
    req.set_second_tree_size(next.size);
    v1::ConsistencyProof proof;
    auto ctx = Context(token);
    const grpc::Status s = log_->GetConsistencyProof(ctx.get(), req, &proof);
    if (!s.ok()) return FromGrpc(s);
    std::vector<tlog::Hash> hashes;
    for (const std::string& h : proof.hashes()) {
      auto hash = tlog::FromBytes(h);
      if (!hash.ok()) return absl::DataLossError("a consistency proof hash is malformed");
      hashes.push_back(*hash);
    }
    if (!tlog::VerifyConsistency(last.size, next.size, last.root, next.root, hashes).ok()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint ", next.size, " does not extend checkpoint ", last.size));
    }
    return absl::OkStatus();
  }

  absl::Status Prove(const v1::WatchedAuditLog& row, const std::string& token) {
    v1::GetInclusionProofRequest req;
    const v1::AuditLog& log = row.audit_log();
    req.set_leaf_index(log.log_index());
    req.set_tree_size(accepted_->size);
    v1::InclusionProof proof;
    auto ctx = Context(token);
    const grpc::Status s = log_->GetInclusionProof(ctx.get(), req, &proof);
    if (!s.ok()) return FromGrpc(s);
    if (!verify::CheckInclusion(log.log_index(), row.leaf(), proof.hashes(), *accepted_).ok()) {
      return absl::DataLossError(absl::StrCat("audit log ", log.event_id(), " (log index ",
                                              log.log_index(), ") is not in checkpoint ",
                                              accepted_->size));
    }
    return absl::OkStatus();
  }

  const verify::CheckpointPolicy policy_;
  const std::optional<crypto::KeyDirectory> owners_;
  std::unique_ptr<v1::AuditLogService::Stub> log_;
  std::deque<v1::WatchedAuditLog> held_;
  std::optional<tlog::Checkpoint> accepted_;
  absl::Time polled_ = absl::InfinitePast();
};

class Follower {
 public:
  Follower(Options o, std::optional<Verification> policy)
      : o_(std::move(o)), policy_(std::move(policy)) {}

  int Run() {
    auto start = Start();
    if (!start.ok()) {
      Say(std::string(start.status().message()));
      return kError;
    }
    position_ = *start;
    auto channel = client::Channel(o_.admin, o_.cacert);
    if (!channel.ok()) {
      Say(std::string(channel.status().message()));
      return kError;
    }
    auto stub = v1::AdminService::NewStub(*channel);
    if (policy_) verifier_.emplace(*policy_, *channel);
    std::thread watchdog([this] { Watchdog(); });
    int failures = 0;
    int code = kOk;
    while (!stopping_) {
      const grpc::Status s = Stream(*stub);
      if (stopping_ || done_) break;
      if (s.error_code() == grpc::StatusCode::DATA_LOSS && verifier_) {
        Say(absl::StrCat("BREAK: ", s.error_message(), "; nothing after it is printed"));
        code = kBroken;
        break;
      }
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
                       position_           ? std::string("where it stopped")
                       : o_.from_beginning ? std::string("from the start")
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
  absl::StatusOr<std::optional<std::string>> Start() {
    if (!o_.position_file.empty()) {
      auto saved = LoadPosition(o_.position_file);
      if (!saved.ok() || *saved) return saved;
    }
    if (!o_.resume_token.empty()) return std::optional<std::string>(o_.resume_token);
    return std::optional<std::string>();
  }

  v1::WatchAuditLogsRequest Request() const {
    v1::WatchAuditLogsRequest req;
    v1::AuditLogFilter* f = req.mutable_filter();
    if (o_.owner == "auth") f->set_owner(audit::v1::OWNER_AUTH);
    if (o_.owner == "app") f->set_owner(audit::v1::OWNER_APP);
    f->set_actor(o_.actor);
    f->set_action(o_.action);
    f->set_entity_type(o_.entity_type);
    f->set_entity_id(o_.entity_id);
    if (position_) {
      req.set_resume_token(*position_);
    } else if (o_.from_beginning) {
      req.mutable_beginning();
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
    if (verifier_) verifier_->Reset();
    auto reader = stub.WatchAuditLogs(ctx.get(), Request());
    v1::WatchAuditLogsResponse frame;
    while (reader->Read(&frame)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_heard_ = absl::Now();
      }
      if (verifier_) {
        if (const grpc::Status v = Verified(frame, *token); !v.ok() || done_) {
          ctx->TryCancel();
          (void)reader->Finish();
          std::lock_guard<std::mutex> lock(mu_);
          ctx_.reset();
          return v;
        }
        continue;
      }
      if (frame.has_audit_log()) {
        if (!Print(frame.audit_log().audit_log())) {
          ctx->TryCancel();
          (void)reader->Finish();
          std::lock_guard<std::mutex> lock(mu_);
          ctx_.reset();
          // Not retried: the row was not printed, and its index not saved.
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "cannot write to stdout");
        }
        ++rows_in_stream_;
        Advance(frame.audit_log().resume_token());
        if (o_.max_rows > 0 && ++rows_ >= o_.max_rows) {
          done_ = true;
          ctx->TryCancel();
          break;
        }
      } else {
        if (o_.progress) PrintProgress(frame.progress());
        // Leaves the filters did not match are behind us too.
        Advance(frame.progress().resume_token());
      }
    }
    grpc::Status s = reader->Finish();
    // An end says where to resume (ErrorInfo metadata "resumeToken"):
    // every row before it was read above. With --verify, rows still held
    // were not printed: resume before them.
    const server::ErrorDetails details = server::ErrorDetails::Of(s);
    if (details.error_info && !(verifier_ && verifier_->holding())) {
      const auto& metadata = details.error_info->metadata();
      if (auto t = metadata.find("resumeToken"); t != metadata.end()) Advance(t->second);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ctx_.reset();
    return s;
  }

  // --verify: a row is held until proved; a progress frame's checkpoint
  // proves the held rows inside it, which are printed then. The position
  // moves past a progress frame's index only while nothing is held.
  grpc::Status Verified(const v1::WatchAuditLogsResponse& frame, const std::string& token) {
    const auto print = [this](const v1::WatchedAuditLog& row) {
      if (!Print(row.audit_log())) return false;
      Advance(row.resume_token());
      if (o_.max_rows > 0 && ++rows_ >= o_.max_rows) done_ = true;
      return !done_;
    };
    if (frame.has_audit_log()) {
      if (absl::Status s = verifier_->Add(frame.audit_log()); !s.ok()) {
        return grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(s.message()));
      }
      ++rows_in_stream_;
      return Proved(verifier_->Poll(token, print));
    }
    const v1::WatchProgress& p = frame.progress();
    if (o_.progress) PrintProgress(p);
    if (p.has_checkpoint()) {
      if (grpc::Status s = Proved(verifier_->Checkpoint(p.checkpoint(), token, print)); !s.ok()) {
        return s;
      }
    }
    if (grpc::Status s = Proved(verifier_->Poll(token, print)); !s.ok()) return s;
    if (!verifier_->holding()) Advance(p.resume_token());
    return grpc::Status::OK;
  }

  // What proving held rows came to, as the stream's end status.
  grpc::Status Proved(const absl::Status& s) {
    if (s.ok() || done_) return grpc::Status::OK;
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
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

  // Frames come in log order, so each token is at or after the one before.
  void Advance(const std::string& token) {
    if (token.empty()) return;
    position_ = token;
    if (o_.position_file.empty()) return;
    if (absl::Status s = SavePosition(o_.position_file, token); !s.ok()) {
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
  const std::optional<Verification> policy_;
  std::optional<RowVerifier> verifier_;
  std::optional<std::string> position_;  // the resume token to start with
  int64_t rows_ = 0;
  int64_t rows_in_stream_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::shared_ptr<grpc::ClientContext> ctx_;
  absl::Time last_heard_;
};

}  // namespace

// What --verify checks, from the flags; nullopt without --verify.
absl::StatusOr<std::optional<Verification>> Policy(const Options& o) {
  if (!o.verify) {
    if (!o.log_keys_file.empty() || !o.witness_keys_file.empty() || !o.owner_keys_file.empty()) {
      return absl::InvalidArgumentError(
          "--log-keys-file, --witness-keys-file and --owner-keys-file need --verify");
    }
    return std::nullopt;
  }
  if (o.log_keys_file.empty()) return absl::InvalidArgumentError("--verify: needs --log-keys-file");
  Verification v;
  verify::CheckpointPolicy& policy = v.policy;
  ASSIGN_OR_RETURN(policy.log, tlog::VerifiersFromFile<tlog::NoteVerifier>(o.log_keys_file));
  if (!o.witness_keys_file.empty()) {
    ASSIGN_OR_RETURN(policy.witnesses,
                     tlog::VerifiersFromFile<tlog::CosignatureVerifier>(o.witness_keys_file));
  }
  if (static_cast<size_t>(o.witness_quorum) > policy.witnesses.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--witness-quorum=", o.witness_quorum,
                                                   ": more than the ", policy.witnesses.size(),
                                                   " keys of --witness-keys-file"));
  }
  policy.quorum = static_cast<size_t>(o.witness_quorum);
  if (!o.owner_keys_file.empty()) {
    ASSIGN_OR_RETURN(v.owners, crypto::KeyDirectory::FromFile(o.owner_keys_file));
  }
  return v;
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
                 if (v.empty() || tail::LooksLikeToken(v)) return absl::OkStatus();
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
  // Lives as long as the process: the signal thread may still hold it.
  auto* follower = new tail::Follower(o, *std::move(policy));
  std::thread([follower, signals]() mutable {
    int sig = 0;
    sigwait(&signals, &sig);
    follower->Stop();
  }).detach();
  return follower->Run();
}
