#include "admin/watch/watch_hub.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin/personal/personal_store.h"
#include "admin/query/audit_rows.h"
#include "admin/query/list_token.h"
#include "admin/transparency/log_reader.h"
#include "common/backoff/backoff.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/server/error_details.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "common/tlog/leaf.h"
#include "common/worker/loop.h"

namespace ulticode::admin::watch {

std::string ResumeToken(uint64_t next) {
  return query::EncodeListToken(query::ListKind::kWatch, next, 0);
}

absl::StatusOr<uint64_t> DecodeResumeToken(absl::string_view token) {
  return query::DecodeListToken("resume_token", token, query::ListKind::kWatch, 0);
}

namespace {

// A frame of one row; its resume token goes on right after it.
std::shared_ptr<const v1::WatchAuditLogsResponse> RowFrame(query::AuditRow row, uint64_t index) {
  auto frame = std::make_shared<v1::WatchAuditLogsResponse>();
  v1::WatchedAuditLog* watched = frame->mutable_audit_log();
  *watched->mutable_audit_log() = std::move(row.log);
  watched->set_leaf(std::move(row.leaf));
  watched->set_resume_token(ResumeToken(index + 1));
  return frame;
}

constexpr char kComponent[] = "admin.watch";

constexpr pg::Statement kSize{"watch.size",
                              "SELECT coalesce(max(log_index) + 1, 0) FROM log_leaves"};

// The newest erasure of personal values (admin/personal): cached frames
// hold the values as they were read, so a new erasure empties the cache.
constexpr pg::Statement kLastErasure{"watch.last_erasure",
                                     "SELECT coalesce(max(id), 0) FROM personal_erasures"};

// Leaves [$1, $2) with their audit rows, the first $3 that match the
// watch's filters (appended from $4 on). A leaf without its audit row
// matches every filter, and a row that is not what its leaf proves fails
// AuditRowFromResult: the watch then ends with DATA_LOSS, never skips it.
constexpr char kRowsSql[] =
    "SELECT " ULTI_AUDIT_LOG_COLUMNS
    ", a.event_id IS NULL FROM log_leaves l LEFT JOIN audit_logs a USING (event_id)"
    " WHERE l.log_index >= $1 AND l.log_index < $2";
constexpr int kMissingColumn = query::kAuditLogColumns;
using query::kLogIndexColumn;

constexpr char kOrderSql[] = " ORDER BY l.log_index LIMIT $3";

using Frame = std::shared_ptr<const v1::WatchAuditLogsResponse>;

// What a caller can tell of a checkpoint: its size and how many cosigned it.
std::pair<uint64_t, int> CheckpointKey(const std::shared_ptr<const v1::SignedCheckpoint>& c) {
  if (!c) return {0, 0};
  return {c->tree_size(), c->cosignatures_size()};
}

// The rows `sql` (kRowsSql, conditions, kOrderSql) returns for leaves
// [from, to), at most `limit`; `next` is where the next read starts.
struct Fetched {
  std::vector<Frame> frames;
  uint64_t next = 0;
};

absl::StatusOr<Fetched> ReadRows(pg::Connection& conn, const std::string& sql,
                                 const pg::Params& filter_params, uint64_t from, uint64_t to,
                                 int limit) {
  pg::Params params = {pg::Int(static_cast<int64_t>(from)), pg::Int(static_cast<int64_t>(to)),
                       pg::Int(limit)};
  params.insert(params.end(), filter_params.begin(), filter_params.end());
  ASSIGN_OR_RETURN(pg::Result r, conn.Execute(pg::Statement{"watch.rows", sql.c_str()}, params));
  Fetched out;
  out.next = to;
  std::vector<query::AuditRow> rows;
  std::vector<uint64_t> indexes;
  for (int i = 0; i < r.rows(); ++i) {
    const uint64_t index = static_cast<uint64_t>(r.GetInt64(i, kLogIndexColumn));
    if (r.GetBool(i, kMissingColumn)) {
      return absl::DataLossError(
          absl::StrCat("log leaf ", index, " (event ", r.GetString(i, 0), ") has no audit row"));
    }
    ASSIGN_OR_RETURN(rows.emplace_back(), query::AuditRowFromResult(r, i));
    indexes.push_back(index);
    if (i + 1 == limit) out.next = index + 1;
  }
  RETURN_IF_ERROR(personal::AttachPersonalValues(conn, rows));
  for (size_t i = 0; i < rows.size(); ++i) {
    out.frames.push_back(RowFrame(std::move(rows[i]), indexes[i]));
  }
  return out;
}

std::string Filters(const v1::WatchAuditLogsRequest& req) {
  return std::string(text::TruncateUtf8(req.ShortDebugString(), 512));
}

// The status a watch ends with: `status`, where to resume (ErrorInfo
// metadata "resumeToken": the leaf after the frames written) and, when
// trying again can succeed, a RetryInfo.
// A watch at the head that ended before it started has no position yet
// (`next` nullopt): its caller starts again as it did.
absl::Status Resumable(absl::Status status, const std::string& reason,
                       std::optional<uint64_t> next) {
  const absl::StatusCode code = status.code();
  std::map<std::string, std::string> metadata;
  if (next) metadata["resumeToken"] = ResumeToken(*next);
  status =
      server::WithErrorInfo(std::move(status), absl::AsciiStrToUpper("WATCH_" + reason), metadata);
  if (code == absl::StatusCode::kResourceExhausted || code == absl::StatusCode::kUnavailable) {
    status = server::WithRetryDelay(std::move(status), absl::Seconds(1));
  }
  return status;
}

// The stream of a watch refused at its start: only its status.
class Refusal final : public grpc::ServerWriteReactor<v1::WatchAuditLogsResponse> {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

// One WatchAuditLogs stream. Its state is guarded by mu_; gRPC is never
// called with mu_ held (a reaction may run on the calling thread): Pump()
// decides under the lock and acts after it.
class Watch final : public grpc::ServerWriteReactor<v1::WatchAuditLogsResponse> {
 public:
  enum class Start { kAt, kHead };

  // A watch from leaf `at` (Start::kAt) or from the log's size when it
  // starts (Start::kHead).
  Watch(WatchHub& hub, grpc::CallbackServerContext* ctx, std::string principal,
        std::string filters_text, query::AuditFilters filters, Start start, uint64_t at)
      : hub_(hub),
        ctx_(ctx),
        principal_(std::move(principal)),
        filters_text_(std::move(filters_text)),
        start_(start),
        at_(at),
        filters_(std::move(filters)) {
    std::vector<std::string> where = query::FilterConditions(filters_, [this](pg::Param p) {
      params_.push_back(std::move(p));
      return absl::StrCat("$", params_.size() + 3);
    });
    sql_ = kRowsSql;
    if (!where.empty()) {
      absl::StrAppend(&sql_, " AND (a.event_id IS NULL OR (", absl::StrJoin(where, " AND "), "))");
    }
    absl::StrAppend(&sql_, kOrderSql);
    last_frame_ = absl::Now();
    // A position given is the resume point until the watch has moved on.
    if (start_ == Start::kAt) next_ = written_next_ = at_;
  }

  void Attach(std::shared_ptr<Watch> self) { self_ = std::move(self); }
  const std::string& principal() const { return principal_; }

  // Reads the next rows (a fetcher thread; one fetch at a time per watch).
  // False when the watch should be fetched again at once (nothing matched
  // in a step, and the log has more).
  bool Fetch(pg::Connection& conn, uint64_t tail_size);
  // The tail's visit: more rows, a progress frame, or the end of a stalled
  // caller.
  void Tick(const WatchHub::Tail& tail, absl::Time now);
  // Ends the watch with `status` (Resumable adds where to resume).
  void End(absl::Status status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  bool ProvingFrameDue(const WatchHub::Tail& tail, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Frame ProgressFrame(uint64_t size, const std::shared_ptr<const v1::SignedCheckpoint>& checkpoint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends fetched frames; `next` is the leaf after the last considered.
  void Queue(std::vector<Frame> frames, uint64_t next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the next write or the Finish that is due, if any.
  void Pump();
  void WantRowsIfBehind(uint64_t tail_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A read that failed: a passing trouble (the database away) is tried
  // again after a back-off; anything else ends the watch, naming where to
  // resume.
  void Failed(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ctx_->TryCancel() unless the call is done (ctx_ is gone after OnDone).
  void CancelOnce();

  WatchHub& hub_;
  grpc::CallbackServerContext* const ctx_;
  const std::string principal_;
  const std::string filters_text_;
  const Start start_;
  const uint64_t at_;
  const query::AuditFilters filters_;
  std::string sql_;
  pg::Params params_;            // the filters' values, $4 on
  std::shared_ptr<Watch> self_;  // released in OnDone

  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;       // next_ is known
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;          // the next leaf to consider
  uint64_t written_next_ ABSL_GUARDED_BY(mu_) = 0;  // next_ as of the frames handed to gRPC
  bool fetching_ ABSL_GUARDED_BY(mu_) = true;       // Open() queues the first fetch
  std::deque<Frame> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> queue_next_ ABSL_GUARDED_BY(mu_);  // written_next_ after each queued frame
  // The frame being written: set under mu_ while writing_ is false, then
  // read by gRPC until OnWriteDone.
  Frame current_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool issuing_ ABSL_GUARDED_BY(mu_) = false;  // a write chosen, StartWrite not yet called
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);
  absl::Time last_frame_ ABSL_GUARDED_BY(mu_);
  absl::Time last_row_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // the newest row written
  bool rows_since_progress_ ABSL_GUARDED_BY(mu_) = false;
  // The newest progress frame's checkpoint: its size and cosignatures.
  std::pair<uint64_t, int> sent_checkpoint_ ABSL_GUARDED_BY(mu_){0, 0};
  std::optional<absl::Status> ending_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::string end_reason_ ABSL_GUARDED_BY(mu_) = "cancelled";
  int64_t rows_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;  // reads failed in a row
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  absl::Mutex cancel_mu_;
  bool done_ ABSL_GUARDED_BY(cancel_mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(cancel_mu_) = false;
};

Frame Watch::ProgressFrame(uint64_t size,
                           const std::shared_ptr<const v1::SignedCheckpoint>& checkpoint) {
  auto frame = std::make_shared<v1::WatchAuditLogsResponse>();
  v1::WatchProgress* p = frame->mutable_progress();
  p->set_log_size(size);
  p->set_resume_token(ResumeToken(next_));
  if (checkpoint) {
    *p->mutable_checkpoint() = *checkpoint;
    sent_checkpoint_ = CheckpointKey(checkpoint);
  }
  rows_since_progress_ = false;
  return frame;
}

void Watch::Queue(std::vector<Frame> frames, uint64_t next) {
  for (Frame& frame : frames) {
    const uint64_t index = frame->audit_log().audit_log().log_index();
    queue_.push_back(std::move(frame));
    queue_next_.push_back(index + 1);
  }
  if (!queue_next_.empty() && !frames.empty()) queue_next_.back() = next;
  if (frames.empty()) written_next_ = std::max(written_next_, next);
  next_ = next;
}

bool Watch::Fetch(pg::Connection& conn, uint64_t tail_size) {
  uint64_t from;
  bool started;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return true;
    from = next_;
    started = started_;
  }
  if (!started) {
    // Where the watch starts is settled against the log as it is now.
    auto size = conn.Execute(kSize);
    if (!size.ok()) {
      absl::MutexLock lock(&mu_);
      Failed(size.status());
      fetching_ = false;
      return true;
    }
    const uint64_t now = static_cast<uint64_t>(size->GetInt64(0, 0));
    absl::MutexLock lock(&mu_);
    if (start_ == Start::kAt && at_ > now) {
      ending_ = absl::OutOfRangeError(
          absl::StrCat("resume_token: resumes at leaf ", at_, "; the log has ", now, " leaves"));
      end_reason_ = "out_of_range";
    } else {
      next_ = start_ == Start::kAt ? at_ : now;
      written_next_ = next_;
      started_ = true;
      from = next_;
      tail_size = std::max(tail_size, now);
      // The first frame says where the watch stands, rows or not: a caller
      // at the head has a resume token from the start.
      queue_.push_back(ProgressFrame(now, hub_.tail().checkpoint));
      queue_next_.push_back(next_);
    }
  }
  bool ended;
  {
    absl::MutexLock lock(&mu_);
    ended = ending_.has_value();
    if (ended) fetching_ = false;
  }
  if (ended) {
    Pump();
    return true;
  }
  if (from >= tail_size) {
    absl::MutexLock lock(&mu_);
    fetching_ = false;
    return true;
  }
  const uint64_t to = std::min(tail_size, from + static_cast<uint64_t>(kFetchLeaves));
  absl::StatusOr<Fetched> fetched = ReadRows(conn, sql_, params_, from, to, kFetchRows);
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    if (!fetched.ok() && fetched.status().code() == absl::StatusCode::kDataLoss) {
      ending_ = fetched.status();
      end_reason_ = "data_loss";
      log::Error(kComponent, "a log leaf cannot be served as the log proves it: the watch is ended",
                 {{"principal", principal_}, {"error", fetched.status().ToString()}});
    } else if (!fetched.ok()) {
      Failed(fetched.status());
    } else {
      failures_ = 0;
      const bool none = fetched->frames.empty();
      Queue(std::move(fetched->frames), fetched->next);
      again = none && next_ < tail_size && !finished_ && !ending_;
    }
    fetching_ = again;
  }
  Pump();
  return !again;
}

void Watch::Tick(const WatchHub::Tail& tail, absl::Time now) {
  const absl::Duration stall = hub_.options_.stall_timeout;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ && writing_ && end_reason_ == "stalled" && now - write_started_ > 2 * stall) {
      // Its status waits behind a write the caller never reads: the
      // stream is cancelled, so its place is free for a new watch.
      CancelOnce();
      return;
    }
    if (finished_ || ending_) return;
    if (writing_) {
      if (now - write_started_ > stall) {
        ending_ = absl::ResourceExhaustedError(absl::StrCat(
            "WatchAuditLogs: the caller read nothing for ", absl::FormatDuration(stall),
            "; resume with the resume_token of the error's ErrorInfo"));
        end_reason_ = "stalled";
      }
    } else if (queue_.empty() && !fetching_) {
      if (!started_ || next_ < tail.size) {
        if (now >= retry_at_) WantRowsIfBehind(tail.size);
      } else if (started_ && (now - last_frame_ >= hub_.options_.progress_interval ||
                              ProvingFrameDue(tail, now))) {
        queue_.push_back(ProgressFrame(tail.size, tail.checkpoint));
        queue_next_.push_back(next_);
      }
    }
  }
  Pump();
}

// Caught up, a progress frame goes at once, not at the next interval, when
// the caller may now prove the rows it was sent: the last checkpoint sent
// covers rows sent after it, or the log's checkpoint moved on (grew, or
// gained cosignatures) while rows were sent lately.
bool Watch::ProvingFrameDue(const WatchHub::Tail& tail, absl::Time now) const {
  if (rows_since_progress_ && sent_checkpoint_.first >= next_) return true;
  return now - last_row_ < hub_.options_.progress_interval &&
         CheckpointKey(tail.checkpoint) != sent_checkpoint_;
}

void Watch::WantRowsIfBehind(uint64_t tail_size) {
  if (finished_ || ending_ || fetching_ || writing_ || !queue_.empty()) return;
  if (started_ && next_ >= tail_size) return;
  if (started_) {
    // Caught up: the newest rows are in the hub's memory, shared.
    std::vector<Frame> frames;
    uint64_t next = 0;
    if (hub_.FromCache(next_, filters_, &frames, &next)) {
      Queue(std::move(frames), next);
      if (!queue_.empty() || next_ >= tail_size) return;
    }
  }
  fetching_ = true;
  hub_.WantRows(self_);
}

void Watch::End(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || ending_) return;
    ending_ = std::move(status);
    end_reason_ = "shutdown";
  }
  Pump();
}

void Watch::Pump() {
  enum { kNone, kWrite, kFinish } action = kNone;
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    // A write chosen by another thread is not issued yet: that thread
    // pumps again once it is (a Finish first would strand it).
    if (finished_ || issuing_) return;
    if (ending_) {
      finished_ = true;
      status = ending_->code() == absl::StatusCode::kCancelled
                   ? server::ToGrpcStatus(*ending_, "WatchAuditLogs")
                   : server::ToGrpcStatus(Resumable(*ending_, end_reason_,
                                                    started_ || start_ == Start::kAt
                                                        ? std::optional<uint64_t>(written_next_)
                                                        : std::nullopt),
                                          "WatchAuditLogs");
      action = kFinish;
    } else if (!writing_ && !queue_.empty()) {
      current_ = std::move(queue_.front());
      queue_.pop_front();
      written_next_ = std::max(written_next_, queue_next_.front());
      queue_next_.pop_front();
      writing_ = true;
      write_started_ = last_frame_ = absl::Now();
      if (current_->has_audit_log()) {
        ++rows_sent_;
        last_row_ = last_frame_;
        rows_since_progress_ = true;
      }
      issuing_ = true;
      action = kWrite;
    }
  }
  if (action == kWrite) {
    (current_->has_audit_log() ? hub_.rows_ : hub_.progress_).Increment();
    StartWrite(current_.get());
    {
      absl::MutexLock lock(&mu_);
      issuing_ = false;
    }
    Pump();  // an end that came meanwhile, or the next frame
  } else if (action == kFinish) {
    Finish(status);
  }
}

void Watch::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok && !ending_) {
      ending_ = absl::CancelledError("the stream broke");
      end_reason_ = "broken";
    }
    if (queue_.empty() && !ending_) WantRowsIfBehind(hub_.tail().size);
  }
  Pump();
}

void Watch::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    if (!ending_) ending_ = absl::CancelledError("cancelled");
  }
  Pump();
}

void Watch::Failed(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
      retry_at_ = absl::Now() + backoff::Delay(backoff::Policy{}, ++failures_);
      log::Warn(kComponent, "cannot read rows for a watch; trying again",
                {{"principal", principal_}, {"error", status.ToString()}});
      return;
    default:
      break;
  }
  // What the client may see of it (a database's text never), resumable.
  const grpc::Status g = server::ToGrpcStatus(status, "WatchAuditLogs");
  ending_ = absl::Status(static_cast<absl::StatusCode>(g.error_code()), g.error_message());
  end_reason_ = "error";
}

void Watch::CancelOnce() {
  absl::MutexLock lock(&cancel_mu_);
  if (done_ || cancelled_) return;
  cancelled_ = true;
  ctx_->TryCancel();  // reactions are not inlined: none runs on this thread
}

void Watch::OnDone() {
  {
    absl::MutexLock lock(&cancel_mu_);  // no TryCancel after this returns
    done_ = true;
  }
  std::string reason;
  int64_t rows = 0;
  {
    absl::MutexLock lock(&mu_);
    reason = end_reason_;
    rows = rows_sent_;
  }
  log::Info("audit_read", "WatchAuditLogs ended",
            {{"principal", principal_},
             {"filters", filters_text_},
             {"reason", reason},
             {"rows", absl::StrCat(rows)}});
  hub_.ended_.Add({{"reason", reason}}).Increment();
  hub_.Closed(this);
  self_.reset();  // may delete this
}

void RegisterWatchFlags(config::Flags& flags, WatchOptions* options) {
  flags.Duration("watch-poll-interval", &options->poll_interval,
                 "How often WatchAuditLogs looks for newly sequenced log leaves",
                 absl::Milliseconds(10), absl::Seconds(10));
  flags.Duration("watch-progress-interval", &options->progress_interval,
                 "A watcher that was sent nothing for this long gets a progress frame (log size, "
                 "newest checkpoint, resume token)",
                 absl::Milliseconds(100), absl::Minutes(10));
  flags.Duration("watch-stall-timeout", &options->stall_timeout,
                 "A watcher that has not read a frame for this long is ended with "
                 "RESOURCE_EXHAUSTED and a resume token",
                 absl::Seconds(1), absl::Hours(1));
  flags.Int("watch-max-watchers", &options->max_watchers,
            "Open WatchAuditLogs streams on this replica, at most", 0, 100000);
  flags.Int("watch-max-per-principal", &options->max_per_principal,
            "Open WatchAuditLogs streams per principal on this replica, at most", 0, 100000);
  flags.Int("watch-cache-rows", &options->cache_rows,
            "The newest log rows kept in memory for the watchers that are caught up (each row "
            "read and built once for all of them); 0: every watcher reads PostgreSQL",
            0, 1000000);
  flags.Int("watch-fetch-threads", &options->fetch_threads,
            "Threads (each with its own PostgreSQL connection) reading rows for watchers", 1, 64);
}

WatchHub::WatchHub(WatchOptions options, prometheus::Registry& registry)
    : options_(std::move(options)),
      open_(prometheus::BuildGauge()
                .Name("ulticode_admin_watchers")
                .Help("Open WatchAuditLogs streams")
                .Register(registry)
                .Add({})),
      rows_(prometheus::BuildCounter()
                .Name("ulticode_admin_watch_rows_total")
                .Help("Audit rows sent to watchers")
                .Register(registry)
                .Add({})),
      progress_(prometheus::BuildCounter()
                    .Name("ulticode_admin_watch_progress_frames_total")
                    .Help("Progress frames sent to watchers")
                    .Register(registry)
                    .Add({})),
      ended_(prometheus::BuildCounter()
                 .Name("ulticode_admin_watches_ended_total")
                 .Help("WatchAuditLogs streams ended, by reason (cancelled, stalled, shutdown, "
                       "out_of_range, data_loss, error, broken)")
                 .Register(registry)) {
  // Shown from the start, so that an alert on data_loss has a series.
  ended_.Add({{"reason", "data_loss"}});
}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Start() {
  waker_.Reset();
  threads_.emplace_back([this] { RunTail(); });
  for (int i = 0; i < options_.fetch_threads; ++i) threads_.emplace_back([this] { RunFetcher(); });
}

void WatchHub::EndAll() {
  std::vector<std::shared_ptr<Watch>> all;
  {
    absl::MutexLock lock(&mu_);
    ending_ = true;
    for (const auto& [raw, watch] : watches_) all.push_back(watch);
  }
  for (const auto& watch : all) {
    watch->End(absl::UnavailableError(
        "Admin is shutting down; resume with the resume_token of the error's ErrorInfo"));
  }
}

void WatchHub::Stop() {
  EndAll();
  waker_.Stop();
  {
    absl::MutexLock lock(&mu_);
    wanting_.clear();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

WatchHub::Tail WatchHub::tail() {
  absl::MutexLock lock(&mu_);
  return tail_;
}

void WatchHub::WantRows(const std::shared_ptr<Watch>& watch) {
  {
    absl::MutexLock lock(&mu_);
    wanting_.push_back(watch);
  }
  waker_.Wake();
}

void WatchHub::Closed(Watch* watch) {
  absl::MutexLock lock(&mu_);
  auto it = watches_.find(watch);
  if (it == watches_.end()) return;
  if (--per_principal_[watch->principal()] == 0) per_principal_.erase(watch->principal());
  watches_.erase(it);
  open_.Set(static_cast<double>(watches_.size()));
}

bool WatchHub::FromCache(uint64_t next, const query::AuditFilters& filters,
                         std::vector<std::shared_ptr<const v1::WatchAuditLogsResponse>>* frames,
                         uint64_t* after) {
  absl::MutexLock lock(&mu_);
  const uint64_t end = cache_first_ + cache_.size();
  if (cache_.empty() || next < cache_first_ || next >= end) return false;
  uint64_t i = next;
  for (; i < end && frames->size() < static_cast<size_t>(kFetchRows); ++i) {
    const auto& frame = cache_[i - cache_first_];
    if (query::Matches(filters, frame->audit_log().audit_log())) frames->push_back(frame);
  }
  *after = i;
  return true;
}

void WatchHub::FillCache(pg::Connection& conn, uint64_t size) {
  if (options_.cache_rows <= 0) return;
  // Read before the rows: an erasure that commits after this is seen at the
  // next call, and the rows read now are dropped then.
  absl::StatusOr<pg::Result> erasure = conn.Execute(kLastErasure);
  uint64_t end;
  {
    absl::MutexLock lock(&mu_);
    const int64_t last_erasure = erasure.ok() ? erasure->GetInt64(0, 0) : -1;
    if (last_erasure != cached_erasure_ || last_erasure < 0) {
      cache_.clear();  // refilled below, with the values as they are now
      cached_erasure_ = last_erasure;
    }
    if (watches_.empty()) {
      // Nobody to share rows with: build none (the pipeline's hot path
      // pays nothing for watches it does not have).
      cache_.clear();
      cache_first_ = size;
      return;
    }
    end = cache_first_ + cache_.size();
  }
  if (size <= end) return;
  const uint64_t keep = static_cast<uint64_t>(options_.cache_rows);
  const uint64_t from = std::max(end, size > keep ? size - keep : 0);
  absl::StatusOr<Fetched> rows = ReadRows(conn, absl::StrCat(kRowsSql, kOrderSql), {}, from, size,
                                          static_cast<int>(size - from));
  absl::MutexLock lock(&mu_);
  if (!rows.ok()) {
    // Watches read these rows from PostgreSQL (and meet the error there);
    // the cache starts again after them.
    log::Warn(kComponent, "cannot cache the newest rows", {{"error", rows.status().ToString()}});
    cache_.clear();
    cache_first_ = size;
    return;
  }
  if (from != end) cache_.clear();
  if (cache_.empty()) cache_first_ = from;
  for (Frame& f : rows->frames) cache_.push_back(std::move(f));
  while (cache_.size() > keep) {
    cache_.pop_front();
    ++cache_first_;
  }
}

void WatchHub::RunTail() {
  worker::Loop loop(waker_, options_.pg, backoff::Policy{}, kComponent);
  uint64_t checkpoint_size = 0;
  absl::Time checkpoint_read = absl::InfinitePast();
  while (!waker_.stopping()) {
    if (pg::Connection* conn = loop.Database()) {
      auto size = conn->Execute(kSize);
      if (!size.ok()) {
        loop.Failed("cannot read the log's size", size.status());
        continue;
      }
      Tail t;
      t.size = static_cast<uint64_t>(size->GetInt64(0, 0));
      {
        absl::MutexLock lock(&mu_);
        t.checkpoint = tail_.checkpoint;
      }
      // Again when the log grew, when the newest checkpoint is behind it (one
      // is due), and every second (cosignatures arrive after it).
      if (t.size != checkpoint_size || !t.checkpoint || t.checkpoint->tree_size() < t.size ||
          absl::Now() - checkpoint_read > absl::Seconds(1)) {
        auto latest = transparency::LatestCheckpoint(*conn);
        if (!latest.ok()) {
          loop.Failed("cannot read the newest checkpoint", latest.status());
          continue;
        }
        if (*latest) {
          t.checkpoint =
              std::make_shared<const v1::SignedCheckpoint>(transparency::ToProto(**latest));
        }
        checkpoint_size = t.size;
        checkpoint_read = absl::Now();
      }
      FillCache(*conn, t.size);
      loop.Succeeded();
      std::vector<std::shared_ptr<Watch>> all;
      {
        absl::MutexLock lock(&mu_);
        tail_ = t;
        for (const auto& [raw, watch] : watches_) all.push_back(watch);
      }
      const absl::Time now = absl::Now();
      for (const auto& watch : all) watch->Tick(t, now);
    }
    waker_.Sleep(options_.poll_interval);
  }
}

void WatchHub::RunFetcher() {
  worker::Loop loop(waker_, options_.pg, backoff::Policy{}, kComponent);
  while (!waker_.stopping()) {
    const uint64_t seen = waker_.Seq();
    std::shared_ptr<Watch> watch;
    uint64_t size = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!wanting_.empty()) {
        watch = std::move(wanting_.front());
        wanting_.pop_front();
      }
      size = tail_.size;
    }
    if (!watch) {
      waker_.WaitForWork(options_.poll_interval, seen);
      continue;
    }
    pg::Connection* conn = loop.Database();
    if (!conn) {
      WantRows(watch);
      continue;
    }
    if (!watch->Fetch(*conn, size)) WantRows(watch);  // the back of the line: fair
  }
}

grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* WatchHub::Refuse(const grpc::Status& status) {
  return new Refusal(status);
}

grpc::ServerWriteReactor<v1::WatchAuditLogsResponse>* WatchHub::Open(
    grpc::CallbackServerContext* ctx, const v1::WatchAuditLogsRequest& req,
    const server::Principal& principal) {
  absl::StatusOr<query::AuditFilters> filters = query::FiltersOf(req.filter());
  absl::StatusOr<uint64_t> at = uint64_t{0};
  if (req.has_resume_token()) at = DecodeResumeToken(req.resume_token());
  if (filters.ok() && !at.ok()) filters = at.status();
  if (!filters.ok()) return new Refusal(server::ToGrpcStatus(filters.status(), "WatchAuditLogs"));
  const Watch::Start start = req.start_case() == v1::WatchAuditLogsRequest::START_NOT_SET
                                 ? Watch::Start::kHead
                                 : Watch::Start::kAt;
  // A refused watch may start again as it asked, after a while.
  const auto refuse = [&](absl::Status status, const std::string& reason) {
    return Refuse(server::ToGrpcStatus(
        Resumable(std::move(status), reason,
                  start == Watch::Start::kAt ? std::optional<uint64_t>(*at) : std::nullopt),
        "WatchAuditLogs"));
  };
  auto watch = std::make_shared<Watch>(*this, ctx, principal.id, Filters(req), *std::move(filters),
                                       start, *at);
  {
    absl::MutexLock lock(&mu_);
    if (ending_) return refuse(absl::UnavailableError("Admin is shutting down"), "shutdown");
    if (static_cast<int>(watches_.size()) >= options_.max_watchers) {
      return refuse(absl::ResourceExhaustedError(
                        absl::StrCat("WatchAuditLogs: this replica has ", watches_.size(),
                                     " watchers, its limit (--watch-max-watchers); retry later")),
                    "limited");
    }
    const auto mine = per_principal_.find(principal.id);
    const int held = mine == per_principal_.end() ? 0 : mine->second;
    if (held >= options_.max_per_principal) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
                        "WatchAuditLogs: ", principal.id, " has ", held,
                        " watchers, the limit per principal (--watch-max-per-principal)")),
                    "limited");
    }
    ++per_principal_[principal.id];
    watches_[watch.get()] = watch;
    open_.Set(static_cast<double>(watches_.size()));
  }
  log::Info("audit_read", "WatchAuditLogs",
            {{"principal", principal.id}, {"filters", Filters(req)}});
  watch->Attach(watch);
  WantRows(watch);  // its first fetch settles where it starts
  return watch.get();
}

}  // namespace ulticode::admin::watch
