#include "tools/client/follower.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/query/audit_rows.h"
#include "common/backoff/backoff.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/server/error_details.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "grpcpp/grpcpp.h"
#include "tools/client/admin_channel.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode::client {
namespace {

namespace v1 = admin::v1;

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

// The rows of a stream held until a witnessed checkpoint covers them, each
// then proved in it. Owned by the stream's thread.

class RowVerifier {
 public:
  RowVerifier(Verification v, std::shared_ptr<grpc::Channel> channel,
              std::function<bool()> stopping)
      : stopping_(std::move(stopping)),
        policy_(std::move(v.policy)),
        owners_(std::move(v.owners)),
        log_(v1::AuditLogService::NewStub(channel)) {}

  // Where a verified position left off: its checkpoint, checked again
  // against the policy, is the one every later checkpoint must extend.
  absl::Status Resume(const v1::SignedCheckpoint& signed_checkpoint) {
    auto checkpoint = verify::OpenWitnessed(signed_checkpoint, policy_);
    if (!checkpoint.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the position's checkpoint ", signed_checkpoint.tree_size(),
                       " does not meet the policy: ", checkpoint.status().message()));
    }
    accepted_ = *checkpoint;
    accepted_signed_ = signed_checkpoint;
    return absl::OkStatus();
  }

  // The checkpoint that proved every row handed over (none before the first).
  const std::optional<v1::SignedCheckpoint>& accepted() const { return accepted_signed_; }

  // A row as it arrived: checked against its own leaf, then held.
  absl::Status Add(const v1::WatchedAuditLog& row) {
    RETURN_IF_ERROR(
        verify::CheckRowIsLeaf(row.audit_log(), row.leaf(), owners_ ? &*owners_ : nullptr));
    held_.push_back(row);
    return absl::OkStatus();
  }
  // A checkpoint as a progress frame carried it: once it meets the policy
  // and extends the last one accepted, the held rows inside it are proved
  // and handed to `hand` in order (false from `hand` stops). DATA_LOSS
  // names a break; a checkpoint the witnesses have not cosigned yet is no
  // break (the rows wait).
  absl::Status Checkpoint(const v1::SignedCheckpoint& signed_checkpoint, const std::string& token,
                          const std::function<bool(const v1::WatchedAuditLog&)>& hand) {
    auto checkpoint = verify::OpenWitnessed(signed_checkpoint, policy_);
    if (!checkpoint.ok()) {
      if (absl::IsUnavailable(checkpoint.status())) return absl::OkStatus();  // not yet cosigned
      return absl::DataLossError(absl::StrCat("checkpoint ", signed_checkpoint.tree_size(), ": ",
                                              checkpoint.status().message()));
    }
    RETURN_IF_ERROR(Extends(*checkpoint, token));
    if (!accepted_ || checkpoint->size > accepted_->size) {
      accepted_ = *checkpoint;
      accepted_signed_ = signed_checkpoint;
    }
    int refusals = 0;
    while (!held_.empty() && held_.front().audit_log().log_index() < accepted_->size) {
      absl::StatusOr<size_t> proved = ProveRun(token);
      if (absl::IsResourceExhausted(proved.status())) {
        // Admin's per-principal read limit, shared with this principal's
        // other followers: again after a pause, not a new stream.
        if (stopping_()) return absl::CancelledError("stopping");
        absl::SleepFor(backoff::Delay({absl::Milliseconds(20), absl::Seconds(1)}, ++refusals));
        continue;
      }
      refusals = 0;
      if (!proved.ok()) return proved.status();
      for (size_t i = 0; i < *proved; ++i) {
        if (!hand(held_.front())) return absl::OkStatus();  // the follower is done or failed
        held_.pop_front();
      }
    }
    return absl::OkStatus();
  }
  // While rows are held, at most once a second: the newest checkpoint the
  // witnesses cosigned, asked of the log (a busy stream sends no progress
  // frame, and a progress frame's checkpoint is often not cosigned yet).
  // `now`: at once (a stream that ended on a break: the rows held before
  // it are proved and handed over first).
  absl::Status Poll(const std::string& token,
                    const std::function<bool(const v1::WatchedAuditLog&)>& hand, bool now = false) {
    if (held_.empty() || (!now && absl::Now() - polled_ < absl::Seconds(1))) {
      return absl::OkStatus();
    }
    polled_ = absl::Now();
    v1::GetCheckpointRequest req;
    req.mutable_newest_witnessed();
    v1::SignedCheckpoint checkpoint;
    auto ctx = Context(token);
    const grpc::Status s = log_->GetCheckpoint(ctx.get(), req, &checkpoint);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
    if (!s.ok()) return FromGrpc(s);
    return Checkpoint(checkpoint, token, hand);
  }
  // A new stream starts after the last row handed over: what was held comes again.
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

  // Proves the first held rows against the accepted checkpoint; how many.
  // A run of consecutive rows (an unfiltered follow) is proved at once by
  // the proofs of its two ends (tlog::RootFromRange); otherwise, or when
  // the run does not lead to the root, row by row, a few proofs in flight,
  // so that a break names its row: DATA_LOSS once the rows before it are
  // proved (the caller hands those over first on the next call).
  absl::StatusOr<size_t> ProveRun(const std::string& token) {
    size_t run = 1;
    while (run < held_.size() && run < kMaxRun &&
           held_[run].audit_log().log_index() < accepted_->size &&
           held_[run].audit_log().log_index() == held_[run - 1].audit_log().log_index() + 1) {
      ++run;
    }
    if (run >= 3) {
      auto ends = Proofs({0, run - 1}, token);
      for (auto& end : ends) RETURN_IF_ERROR(end.status());
      std::vector<tlog::Hash> leaves;
      for (size_t i = 0; i < run; ++i) leaves.push_back(tlog::LeafHash(held_[i].leaf()));
      auto root = tlog::RootFromRange(held_[0].audit_log().log_index(), accepted_->size, leaves,
                                      *ends[0], *ends[1]);
      if (root.ok() && *root == accepted_->root) return run;
    }
    std::vector<size_t> rows;
    for (size_t i = 0; i < held_.size() && rows.size() < kProofsInFlight &&
                       held_[i].audit_log().log_index() < accepted_->size;
         ++i) {
      rows.push_back(i);
    }
    auto proofs = Proofs(rows, token);
    for (size_t i = 0; i < rows.size(); ++i) {
      const v1::AuditLog& log = held_[i].audit_log();
      if (!proofs[i].ok()) {
        if (i > 0) return i;
        return proofs[i].status();
      }
      if (!tlog::VerifyInclusion(log.log_index(), accepted_->size, tlog::LeafHash(held_[i].leaf()),
                                 *proofs[i], accepted_->root)
               .ok()) {
        if (i > 0) return i;
        return absl::DataLossError(absl::StrCat("audit log ", log.event_id(), " (log index ",
                                                log.log_index(), ") is not in checkpoint ",
                                                accepted_->size));
      }
    }
    return rows.size();
  }

  // The inclusion proofs of held rows `rows` in the accepted checkpoint,
  // asked for all at once (one round trip, not one each).
  std::vector<absl::StatusOr<std::vector<tlog::Hash>>> Proofs(const std::vector<size_t>& rows,
                                                              const std::string& token) {
    struct Call {
      v1::GetInclusionProofRequest req;
      v1::InclusionProof proof;
      std::unique_ptr<grpc::ClientContext> ctx;
      grpc::Status status;
    };
    std::vector<Call> calls(rows.size());
    std::mutex mu;
    std::condition_variable done;
    size_t pending = rows.size();
    for (size_t i = 0; i < rows.size(); ++i) {
      Call& c = calls[i];
      c.req.set_leaf_index(held_[rows[i]].audit_log().log_index());
      c.req.set_tree_size(accepted_->size);
      c.ctx = Context(token);
      log_->async()->GetInclusionProof(c.ctx.get(), &c.req, &c.proof, [&, i](grpc::Status s) {
        std::lock_guard<std::mutex> lock(mu);
        calls[i].status = std::move(s);
        if (--pending == 0) done.notify_all();
      });
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      done.wait(lock, [&] { return pending == 0; });
    }
    std::vector<absl::StatusOr<std::vector<tlog::Hash>>> out;
    for (Call& c : calls) {
      if (!c.status.ok()) {
        out.push_back(FromGrpc(c.status));
        continue;
      }
      std::vector<tlog::Hash> hashes;
      for (const std::string& h : c.proof.hashes()) {
        auto hash = tlog::FromBytes(h);
        if (!hash.ok()) break;
        hashes.push_back(*hash);
      }
      if (hashes.size() != static_cast<size_t>(c.proof.hashes_size())) {
        out.push_back(absl::DataLossError("an inclusion proof hash is malformed"));
      } else {
        out.push_back(std::move(hashes));
      }
    }
    return out;
  }

  // Proofs asked for at once row by row: Admin's default
  // --max-reads-per-principal (a proof it refuses for that limit is asked
  // for again). A run proved at once holds at most kMaxRun rows.
  static constexpr size_t kProofsInFlight = 4;
  static constexpr size_t kMaxRun = 4096;

  const std::function<bool()> stopping_;
  const verify::CheckpointPolicy policy_;
  const std::optional<crypto::KeyDirectory> owners_;
  std::unique_ptr<v1::AuditLogService::Stub> log_;
  std::deque<v1::WatchedAuditLog> held_;
  std::optional<tlog::Checkpoint> accepted_;
  std::optional<v1::SignedCheckpoint> accepted_signed_;  // accepted_, as the log signed it
  absl::Time polled_ = absl::InfinitePast();
};

}  // namespace

class Follower::Impl {
 public:
  Impl(FollowOptions o, FollowHandlers h) : o_(std::move(o)), h_(std::move(h)) {
    if (o_.start) {
      position_ = o_.start->token;
      next_index_ = o_.start->next_index;
    } else if (o_.from_beginning) {
      next_index_ = 0;
    }
  }

  absl::Status Run() {
    auto channel = Channel(o_.admin, o_.cacert);
    if (!channel.ok()) return channel.status();
    auto stub = v1::AdminService::NewStub(*channel);
    if (o_.verification) {
      verifier_.emplace(*o_.verification, *channel, [this] { return stopping_.load(); });
      if (absl::Status s = StartVerified(); !s.ok()) return s;
    }
    std::thread watchdog([this] { Watchdog(); });
    int failures = 0;
    absl::Status result;
    while (!stopping_) {
      const grpc::Status s = Stream(*stub);
      if (stopping_ || done_) break;
      if (!handler_error_.ok()) {
        result = handler_error_;
        break;
      }
      if (s.error_code() == grpc::StatusCode::DATA_LOSS && verifier_) {
        result = absl::DataLossError(s.error_message());
        break;
      }
      // An INTERNAL that comes back at the same place five times in a row
      // is a row Admin cannot send, not a passing trouble.
      const bool stuck =
          s.error_code() == grpc::StatusCode::INTERNAL && rows_in_stream_ == 0 && failures >= 4;
      if (!Retryable(s.error_code()) || stuck) {
        result = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                              absl::StrCat("stopped: ", s.error_message()));
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
    return result;
  }

  void Stop() {
    stopping_ = true;
    Cancel();
  }

 private:
  void Say(const std::string& line) {
    if (h_.say) h_.say(line);
  }

  // A verifying follower filters the leaves itself (filters_) and starts
  // where its verified position says.
  absl::Status StartVerified() {
    auto filters = admin::query::FiltersOf(o_.filter);
    if (!filters.ok()) return filters.status();
    filters_ = *std::move(filters);
    if (!o_.start) return absl::OkStatus();
    if (!o_.start->verified()) {
      return absl::InvalidArgumentError(
          "the position holds a resume token only, no verified place in the log (log index "
          "and checkpoint): a verifying follower does not start where Admin alone says");
    }
    if (o_.start->checkpoint) return verifier_->Resume(*o_.start->checkpoint);
    return absl::OkStatus();
  }

  v1::WatchAuditLogsRequest Request() const {
    v1::WatchAuditLogsRequest req;
    if (!verifier_) *req.mutable_filter() = o_.filter;
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
      if (stopping_) return grpc::Status::CANCELLED;  // a stop before the stream existed
      ctx_ = ctx;
      last_heard_ = absl::Now();
    }
    rows_in_stream_ = 0;
    if (verifier_) verifier_->Reset();
    auto reader = stub.WatchAuditLogs(ctx.get(), Request());
    v1::WatchAuditLogsResponse frame;
    grpc::Status ended = grpc::Status::OK;
    while (reader->Read(&frame)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_heard_ = absl::Now();
      }
      const grpc::Status s = verifier_ ? Verified(frame, *token) : Unverified(frame);
      if (!s.ok() || done_ || !handler_error_.ok()) {
        ended = s;
        break;
      }
    }
    if (!ended.ok() || done_ || !handler_error_.ok()) {
      ctx->TryCancel();
      (void)reader->Finish();
      std::lock_guard<std::mutex> lock(mu_);
      ctx_.reset();
      return ended;
    }
    grpc::Status s = reader->Finish();
    if (s.error_code() == grpc::StatusCode::DATA_LOSS && verifier_ && verifier_->holding()) {
      // Admin ended the stream on a row it cannot serve as the log proves
      // it: the rows before that one still go out once proved.
      const auto hand = [this](const v1::WatchedAuditLog& row) { return Hand(row); };
      if (grpc::Status p = Proved(verifier_->Poll(*token, hand, /*now=*/true)); !p.ok()) {
        s = p;
      }
    }
    // An end says where to resume (ErrorInfo metadata "resumeToken"):
    // every row before it was handed over above. When verifying, rows still
    // held were not: resume before them.
    const server::ErrorDetails details = server::ErrorDetails::Of(s);
    if (details.error_info && !(verifier_ && verifier_->holding())) {
      const auto& metadata = details.error_info->metadata();
      if (auto t = metadata.find("resumeToken"); t != metadata.end()) Advance(t->second);
    }
    std::lock_guard<std::mutex> lock(mu_);
    ctx_.reset();
    return s;
  }

  // A row handed over: the handler's answer decides what comes next.
  bool Hand(const v1::WatchedAuditLog& row) {
    if (verifier_) {
      // Proved leaves must also come one by one in log order, from where
      // the position (or the first frame at the head) said: a leaf
      // repeated, moved back or skipped is a break, whatever each row's
      // own proof says.
      const uint64_t index = row.audit_log().log_index();
      if (next_index_ && index != *next_index_) {
        handler_error_ = absl::DataLossError(
            absl::StrCat("audit log ", row.audit_log().event_id(), " (log index ", index,
                         ") came where log index ", *next_index_,
                         " must: the log must come leaf by leaf from the follower's position"));
        return false;
      }
      next_index_ = index + 1;
      if (!admin::query::Matches(filters_, row.audit_log())) {
        Advance(row.resume_token(), /*tell=*/false);  // said with the next row or progress frame
        return true;
      }
    }
    absl::StatusOr<bool> more = h_.row(row, PositionAt(row.resume_token()));
    if (!more.ok()) {
      handler_error_ = more.status();
      return false;
    }
    Advance(row.resume_token());
    if (!*more) done_ = true;
    return *more;
  }

  grpc::Status Unverified(const v1::WatchAuditLogsResponse& frame) {
    if (frame.has_audit_log()) {
      ++rows_in_stream_;
      (void)Hand(frame.audit_log());
      return grpc::Status::OK;
    }
    if (h_.progress) h_.progress(frame.progress());
    // Leaves the filters did not match are behind us too.
    Advance(frame.progress().resume_token());
    return grpc::Status::OK;
  }

  // A row is held until proved; a progress frame's checkpoint proves the
  // held rows inside it, which are handed over then. The position moves
  // past a progress frame's index only while nothing is held.
  grpc::Status Verified(const v1::WatchAuditLogsResponse& frame, const std::string& token) {
    const auto hand = [this](const v1::WatchedAuditLog& row) { return Hand(row); };
    if (frame.has_audit_log()) {
      if (absl::Status s = verifier_->Add(frame.audit_log()); !s.ok()) {
        return grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(s.message()));
      }
      ++rows_in_stream_;
      return Proved(verifier_->Poll(token, hand));
    }
    const v1::WatchProgress& p = frame.progress();
    if (h_.progress) h_.progress(p);
    // At the head the first frame says where the log stands: the leaf that
    // must come first.
    if (!next_index_) next_index_ = p.log_size();
    if (p.has_checkpoint()) {
      if (grpc::Status s = Proved(verifier_->Checkpoint(p.checkpoint(), token, hand)); !s.ok()) {
        return s;
      }
    }
    if (grpc::Status s = Proved(verifier_->Poll(token, hand)); !s.ok()) return s;
    if (!verifier_->holding() && !done_ && handler_error_.ok()) Advance(p.resume_token());
    return grpc::Status::OK;
  }

  // What proving held rows came to, as the stream's end status.
  grpc::Status Proved(const absl::Status& s) {
    if (s.ok() || done_) return grpc::Status::OK;
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  }

  // Frames come in log order, so each token is at or after the one before.
  // A verifying follower's position is also the next index it expects and
  // the checkpoint that proved the leaves before it.
  void Advance(const std::string& token, bool tell = true) {
    if (token.empty()) return;
    position_ = token;
    if (tell && h_.passed) h_.passed(PositionAt(token));
  }

  Position PositionAt(const std::string& token) const {
    Position p{token, std::nullopt, std::nullopt};
    if (verifier_) {
      p.next_index = next_index_;
      p.checkpoint = verifier_->accepted();
    }
    return p;
  }

  void Cancel() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_) ctx_->TryCancel();
  }

  // Nothing heard (no row, no progress frame) for idle_timeout: the
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

  const FollowOptions o_;
  const FollowHandlers h_;
  std::optional<RowVerifier> verifier_;
  std::optional<std::string> position_;  // the resume token to start with
  // Verifying: the log index the next leaf must have (unknown only at the
  // head, before the first frame), and the filter applied to the leaves.
  std::optional<uint64_t> next_index_;
  admin::query::AuditFilters filters_;
  int64_t rows_in_stream_ = 0;
  absl::Status handler_error_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::shared_ptr<grpc::ClientContext> ctx_;
  absl::Time last_heard_;
};

absl::StatusOr<Verification> VerificationFromFiles(const std::string& log_keys_file,
                                                   const std::string& witness_keys_file,
                                                   int64_t witness_quorum,
                                                   const std::string& owner_keys_file) {
  if (log_keys_file.empty()) return absl::InvalidArgumentError("--log-keys-file: required");
  Verification v;
  verify::CheckpointPolicy& policy = v.policy;
  ASSIGN_OR_RETURN(policy.log, tlog::VerifiersFromFile<tlog::NoteVerifier>(log_keys_file));
  if (!witness_keys_file.empty()) {
    ASSIGN_OR_RETURN(policy.witnesses,
                     tlog::VerifiersFromFile<tlog::CosignatureVerifier>(witness_keys_file));
  }
  if (witness_quorum < 0 || static_cast<size_t>(witness_quorum) > policy.witnesses.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--witness-quorum=", witness_quorum,
                                                   ": more than the ", policy.witnesses.size(),
                                                   " keys of --witness-keys-file"));
  }
  policy.quorum = static_cast<size_t>(witness_quorum);
  if (!owner_keys_file.empty()) {
    ASSIGN_OR_RETURN(v.owners, crypto::KeyDirectory::FromFile(owner_keys_file));
  }
  return v;
}

Follower::Follower(FollowOptions options, FollowHandlers handlers)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handlers))) {}
Follower::~Follower() = default;
absl::Status Follower::Run() { return impl_->Run(); }
void Follower::Stop() { impl_->Stop(); }

}  // namespace ulticode::client
