#include "common/pg/connection.h"

#include <poll.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/errors.h"

namespace ulticode::pg {
namespace {

// Waits until the socket is readable (or writable); false on timeout.
bool WaitSocket(int fd, bool for_write, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
    const int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let libpq report the socket error
  }
}

// PostgreSQL's WARNING when a commit's wait for the synchronous standby ends
// early (query cancel, terminated backend): committed on this server only.
bool IsCancelledStandbyWait(const PGresult* notice) {
  const char* primary = PQresultErrorField(notice, PG_DIAG_MESSAGE_PRIMARY);
  if (primary == nullptr) return false;
  const absl::string_view m(primary);
  return absl::StartsWith(m, "canceling wait for synchronous replication") ||
         absl::StartsWith(m, "canceling the wait for synchronous replication");
}

std::string Trimmed(const char* msg) {
  return std::string(absl::StripTrailingAsciiWhitespace(msg == nullptr ? "" : msg));
}

}  // namespace

void Connection::OnNotice(void* self, const PGresult* notice) {
  if (IsCancelledStandbyWait(notice))
    static_cast<Connection*>(self)->standby_wait_cancelled_ = true;
  log::Debug("pg", "server notice", {{"notice", Trimmed(PQresultErrorMessage(notice))}});
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Connect(const ConnectOptions& options) {
  const std::string timeout =
      absl::StrCat(std::max<int64_t>(1, absl::ToInt64Seconds(options.connect_timeout)));
  std::string session = "-c TimeZone=UTC";
  if (options.asynchronous_commit) absl::StrAppend(&session, " -c synchronous_commit=off");
  if (options.idle_in_transaction_timeout > absl::ZeroDuration()) {
    absl::StrAppend(
        &session, " -c idle_in_transaction_session_timeout=",
        std::max<int64_t>(1, absl::ToInt64Milliseconds(options.idle_in_transaction_timeout)));
  }
  if (options.lock_timeout > absl::ZeroDuration()) {
    absl::StrAppend(&session, " -c lock_timeout=",
                    std::max<int64_t>(1, absl::ToInt64Milliseconds(options.lock_timeout)));
  }
  // Later keys override what the expanded conninfo set.
  std::vector<const char*> keys = {
      "dbname",          "application_name",    "connect_timeout",  "options",         "keepalives",
      "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"};
  std::vector<const char*> values = {options.conninfo.c_str(),
                                     options.application_name.c_str(),
                                     timeout.c_str(),
                                     session.c_str(),
                                     "1",
                                     "10",
                                     "3",
                                     "3",
                                     "15000"};
  if (!options.user.empty()) {
    keys.push_back("user");
    values.push_back(options.user.c_str());
  }
  if (!options.password.empty()) {
    keys.push_back("password");
    values.push_back(options.password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq could not allocate a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("connect to PostgreSQL failed: ", msg));
  }
  std::unique_ptr<Connection> connection(new Connection(conn, options));
  PQsetNoticeReceiver(conn, &Connection::OnNotice, connection.get());
  return connection;
}

Connection::Connection(PGconn* conn, ConnectOptions options)
    : conn_(conn), options_(std::move(options)) {}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }

int Connection::backend_pid() const { return PQbackendPID(conn_); }

absl::Status Connection::LastError(absl::string_view name, const PGresult* res, bool is_commit) {
  const bool lost = PQstatus(conn_) != CONNECTION_OK;
  std::string message = Trimmed(res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
  if (message.empty()) message = Trimmed(PQerrorMessage(conn_));
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (lost) {
    MarkBroken();
    if (is_commit) return CommitOutcomeUnknownError(absl::StrCat(name, ": ", message));
    return absl::UnavailableError(absl::StrCat(name, ": connection lost: ", message));
  }
  absl::Status s =
      StatusFromSqlState(state == nullptr ? "" : state, absl::StrCat(name, ": ", message));
  if (s.code() == absl::StatusCode::kUnavailable) MarkBroken();
  return s;
}

absl::StatusOr<Result> Connection::Run(absl::string_view name, const char* sql,
                                       const Params& params, absl::Duration timeout, bool is_commit,
                                       Protocol protocol, const std::string& prepared) {
  if (broken()) {
    MarkBroken();
    if (is_commit) return CommitOutcomeUnknownError("connection already broken");
    return absl::UnavailableError(absl::StrCat(name, ": connection is broken"));
  }
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size()), formats(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].value ? params[i].value->data() : nullptr;
    lengths[i] = params[i].value ? static_cast<int>(params[i].value->size()) : 0;
    formats[i] = params[i].binary ? 1 : 0;
  }
  const int n = static_cast<int>(params.size());
  int sent = 0;
  switch (protocol) {
    case Protocol::kSimple:
      sent = PQsendQuery(conn_, sql);
      break;
    case Protocol::kPrepare:
      sent = PQsendPrepare(conn_, prepared.c_str(), sql, n, nullptr);
      break;
    case Protocol::kPrepared:
      sent = PQsendQueryPrepared(conn_, prepared.c_str(), n, values.data(), lengths.data(),
                                 formats.data(), /*resultFormat=*/0);
      break;
    case Protocol::kExtended:
      sent = PQsendQueryParams(conn_, sql, n, nullptr, values.data(), lengths.data(),
                               formats.data(), /*resultFormat=*/0);
      break;
  }
  if (!sent) return LastError(name, nullptr, is_commit);

  const absl::Time deadline = absl::Now() + timeout + options_.client_grace;
  RETURN_IF_ERROR(FlushOut(name, deadline, is_commit));

  // Every result is owned by a Result from PQgetResult on, so each return
  // below frees what was read so far.
  Result error;  // the first error; it decides the status
  Result last;   // the last non-error result; it is the answer
  while (true) {
    RETURN_IF_ERROR(AwaitResult(name, timeout, deadline, is_commit));
    Result r(PQgetResult(conn_));
    if (!r) break;
    const ExecStatusType st = r.status();
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
      if (!error && st != PGRES_NONFATAL_ERROR) error = std::move(r);
    } else {
      last = std::move(r);
    }
  }
  if (error) return LastError(name, error.get(), is_commit);
  if (!last && PQstatus(conn_) != CONNECTION_OK) return LastError(name, nullptr, is_commit);
  return last;
}

absl::Status Connection::FlushOut(absl::string_view name, absl::Time deadline, bool is_commit) {
  const int fd = PQsocket(conn_);
  int flush;
  while ((flush = PQflush(conn_)) == 1) {
    if (!WaitSocket(fd, /*for_write=*/true, deadline)) break;
  }
  return flush == -1 ? LastError(name, nullptr, is_commit) : absl::OkStatus();
}

absl::Status Connection::AwaitResult(absl::string_view name, absl::Duration timeout,
                                     absl::Time deadline, bool is_commit) {
  const int fd = PQsocket(conn_);
  while (PQisBusy(conn_)) {
    if (!WaitSocket(fd, /*for_write=*/false, deadline)) {
      // The server did not answer in time: frozen, partitioned or dead. The
      // protocol state is unknown, so this connection is finished.
      MarkBroken();
      if (is_commit) return CommitOutcomeUnknownError(absl::StrCat(name, ": no reply in time"));
      return absl::DeadlineExceededError(
          absl::StrCat(name, ": no reply within ", absl::FormatDuration(timeout)));
    }
    if (!PQconsumeInput(conn_)) return LastError(name, nullptr, is_commit);
  }
  return absl::OkStatus();
}

absl::Status Connection::FlushQueued() {
  if (queued_.empty()) return absl::OkStatus();
  static constexpr Statement kNothing{"flush", "SELECT"};
  return RunQueued({kNothing.name, kNothing.sql, {}, kNothing.timeout, true}, false).status();
}

bool Connection::SendPipeline(const std::vector<Queued>& batch,
                              std::vector<std::string>* prepares) {
  if (!PQenterPipelineMode(conn_)) return false;
  absl::flat_hash_map<std::string, std::string> fresh;  // SQL prepared in this pipeline
  for (const Queued& q : batch) {
    std::vector<const char*> values(q.params.size());
    std::vector<int> lengths(q.params.size()), formats(q.params.size());
    for (size_t i = 0; i < q.params.size(); ++i) {
      values[i] = q.params[i].value ? q.params[i].value->data() : nullptr;
      lengths[i] = q.params[i].value ? static_cast<int>(q.params[i].value->size()) : 0;
      formats[i] = q.params[i].binary ? 1 : 0;
    }
    const int n = static_cast<int>(q.params.size());
    std::string name;
    if (q.prepare) {
      if (auto it = prepared_.find(q.sql); it != prepared_.end()) {
        name = it->second;
        prepares->push_back("");
      } else if (auto f = fresh.find(q.sql); f != fresh.end()) {
        name = f->second;
        prepares->push_back("");
      } else {
        name = absl::StrCat("s", prepared_.size() + fresh.size() + 1);
        if (!PQsendPrepare(conn_, name.c_str(), q.sql, n, nullptr)) return false;
        fresh.emplace(q.sql, name);
        prepares->push_back(name);
      }
    }
    const int sent = q.prepare ? PQsendQueryPrepared(conn_, name.c_str(), n, values.data(),
                                                     lengths.data(), formats.data(), 0)
                               : PQsendQueryParams(conn_, q.sql, n, nullptr, values.data(),
                                                   lengths.data(), formats.data(), 0);
    if (!sent) return false;
  }
  return PQpipelineSync(conn_) == 1;
}

absl::StatusOr<Result> Connection::RunQueued(Queued last, bool is_commit) {
  std::vector<Queued> batch = std::move(queued_);
  queued_.clear();
  batch.push_back(std::move(last));
  const char* name = batch.back().name;
  if (broken()) {
    if (is_commit) return CommitOutcomeUnknownError("connection already broken");
    return absl::UnavailableError(absl::StrCat(name, ": connection is broken"));
  }
  // The server bounds each statement by the longest timeout among them
  // (BEGIN and COMMIT run under whatever the session has, as alone).
  absl::Duration timeout = absl::ZeroDuration(), longest = absl::ZeroDuration();
  for (const Queued& q : batch) {
    timeout += q.timeout;
    if (q.prepare) longest = std::max(longest, q.timeout);
  }
  if (longest > absl::ZeroDuration()) RETURN_IF_ERROR(EnsureTimeout(longest));
  // Per prepared item, the statement name its prepare creates ("" when it
  // needs none).
  std::vector<std::string> prepares;
  if (!SendPipeline(batch, &prepares)) {
    absl::Status lost = LastError(name, nullptr, is_commit);
    MarkBroken();
    return lost.ok() ? absl::UnavailableError(absl::StrCat(name, ": pipeline refused")) : lost;
  }
  const absl::Time deadline = absl::Now() + timeout + options_.client_grace;
  RETURN_IF_ERROR(FlushOut(name, deadline, is_commit));
  Result error, answer;
  const char* failed = name;
  // One query's results, up to the null that ends them (or the sync).
  auto next = [&](const char* of) -> absl::StatusOr<Result> {
    Result kept;
    for (;;) {
      RETURN_IF_ERROR(AwaitResult(name, timeout, deadline, is_commit));
      Result r(PQgetResult(conn_));
      if (!r) return kept;
      const ExecStatusType st = r.status();
      if (st == PGRES_PIPELINE_SYNC) return r;
      if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE) {
        if (!error) {
          error = std::move(r);
          failed = of;
        }
      } else if (st != PGRES_PIPELINE_ABORTED && st != PGRES_NONFATAL_ERROR) {
        kept = std::move(r);
      }
    }
  };
  std::vector<std::pair<const char*, std::string>> created;  // (SQL, name)
  size_t p = 0;
  for (const Queued& q : batch) {
    if (q.prepare && !prepares[p++].empty()) {
      RETURN_IF_ERROR(next(q.name).status());
      if (!error) created.emplace_back(q.sql, prepares[p - 1]);
    }
    ASSIGN_OR_RETURN(answer, next(q.name));
  }
  ASSIGN_OR_RETURN(Result sync, next(name));
  if (!sync || sync.status() != PGRES_PIPELINE_SYNC || !PQexitPipelineMode(conn_)) {
    MarkBroken();
    return LastError(name, nullptr, is_commit);
  }
  for (auto& [sql, n] : created) prepared_.emplace(sql, std::move(n));
  if (error) return LastError(failed, error.get(), is_commit);
  return answer;
}

absl::Status Connection::EnsureTimeout(absl::Duration timeout) {
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));
  if (ms == current_timeout_ms_) return absl::OkStatus();
  static const char kSql[] = "SELECT set_config('statement_timeout', $1, false)";
  auto r = Run("set_statement_timeout", kSql, {Text(absl::StrCat(ms))}, absl::Seconds(5), false);
  if (!r.ok()) return r.status();
  current_timeout_ms_ = ms;
  return absl::OkStatus();
}

absl::StatusOr<Result> Connection::Execute(const Statement& statement, const Params& params) {
  if (!queued_.empty()) {
    return RunQueued({statement.name, statement.sql, params, statement.timeout, true}, false);
  }
  RETURN_IF_ERROR(EnsureTimeout(statement.timeout));
  ASSIGN_OR_RETURN(const std::string prepared,
                   Prepared(statement, static_cast<int>(params.size())));
  return Run(statement.name, statement.sql, params, statement.timeout, false, Protocol::kPrepared,
             prepared);
}

absl::StatusOr<std::string> Connection::Prepared(const Statement& statement, int params) {
  auto it = prepared_.find(statement.sql);
  if (it != prepared_.end()) return it->second;
  const std::string name = absl::StrCat("s", prepared_.size() + 1);
  RETURN_IF_ERROR(Run(statement.name, statement.sql, Params(static_cast<size_t>(params)),
                      statement.timeout, false, Protocol::kPrepare, name)
                      .status());
  prepared_.emplace(statement.sql, name);
  return name;
}

absl::Status Connection::ExecuteScript(absl::string_view name, absl::string_view sql,
                                       absl::Duration timeout) {
  RETURN_IF_ERROR(FlushQueued());
  RETURN_IF_ERROR(EnsureTimeout(timeout));
  const std::string text(sql);
  auto r = Run(name, text.c_str(), {}, timeout, false, Protocol::kSimple);
  return r.ok() ? absl::OkStatus() : r.status();
}

absl::StatusOr<Transaction> Connection::Begin(Isolation isolation) {
  if (in_transaction_) return absl::FailedPreconditionError("a transaction is already open");
  const char* sql = "BEGIN";
  if (isolation == Isolation::kRepeatableRead) sql = "BEGIN ISOLATION LEVEL REPEATABLE READ";
  if (isolation == Isolation::kSerializable) sql = "BEGIN ISOLATION LEVEL SERIALIZABLE";
  if (broken()) return absl::UnavailableError("begin: connection is broken");
  queued_.push_back({"begin", sql, {}, absl::Seconds(5), /*prepare=*/false});
  in_transaction_ = true;
  return Transaction(this);
}

absl::Status Connection::Listen(absl::string_view channel) {
  if (channel.empty()) return absl::InvalidArgumentError("LISTEN channel is empty");
  for (char c : channel) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_')) {
      return absl::InvalidArgumentError(
          absl::StrCat("LISTEN channel \"", channel, "\" must match [a-z0-9_]+"));
    }
  }
  RETURN_IF_ERROR(FlushQueued());
  // Channel names are identifiers and cannot be parameters; validated above.
  const std::string sql = absl::StrCat("LISTEN ", channel);
  auto r = Run("listen", sql.c_str(), {}, absl::Seconds(5), false);
  return r.ok() ? absl::OkStatus() : r.status();
}

absl::StatusOr<std::vector<Notification>> Connection::WaitForNotifications(absl::Duration timeout) {
  std::vector<Notification> out;
  auto drain = [&] {
    while (PGnotify* n = PQnotifies(conn_)) {
      out.push_back(Notification{n->relname, n->extra, n->be_pid});
      PQfreemem(n);
    }
  };
  if (broken()) return absl::UnavailableError("listen connection is broken");
  RETURN_IF_ERROR(FlushQueued());
  if (!PQconsumeInput(conn_)) return LastError("wait_notify", nullptr, false);
  drain();
  if (!out.empty()) return out;
  if (WaitSocket(PQsocket(conn_), false, absl::Now() + timeout)) {
    if (!PQconsumeInput(conn_)) return LastError("wait_notify", nullptr, false);
    drain();
  }
  return out;
}

Transaction::Transaction(Transaction&& other) noexcept : conn_(other.conn_), done_(other.done_) {
  other.done_ = true;
}

Transaction::~Transaction() {
  if (!done_) (void)Rollback();
}

absl::StatusOr<Result> Transaction::Execute(const Statement& statement, const Params& params) {
  if (done_) return absl::FailedPreconditionError("transaction already finished");
  return conn_->Execute(statement, params);
}

void Transaction::Defer(const Statement& statement, Params params) {
  if (done_) return;  // Commit() reports the finished transaction
  conn_->queued_.push_back(
      {statement.name, statement.sql, std::move(params), statement.timeout, /*prepare=*/true});
}

absl::Status Transaction::Commit() {
  if (done_) return absl::FailedPreconditionError("transaction already finished");
  done_ = true;
  conn_->in_transaction_ = false;
  conn_->standby_wait_cancelled_ = false;
  auto r = conn_->queued_.empty()
               ? conn_->Run("commit", "COMMIT", {}, absl::Seconds(10), /*is_commit=*/true)
               : conn_->RunQueued({"commit", "COMMIT", {}, absl::Seconds(10), /*prepare=*/false},
                                  /*is_commit=*/true);
  if (!r.ok()) {
    conn_->current_timeout_ms_ = -1;
    // A deferred statement failed before COMMIT ran: end the failed
    // transaction, so the connection is clean for its next user.
    if (!conn_->broken() && PQtransactionStatus(conn_->conn_) == PQTRANS_INERROR) {
      (void)conn_->Run("rollback", "ROLLBACK", {}, absl::Seconds(5), false);
    }
    return r.status();
  }
  if (conn_->standby_wait_cancelled_) {
    return CommitOutcomeUnknownError(
        "commit: committed on the primary, but its wait for the synchronous standby was "
        "cancelled; a failover may lose it");
  }
  // COMMIT of a transaction that already failed answers ROLLBACK.
  if (r->command_status() == "ROLLBACK") {
    conn_->current_timeout_ms_ = -1;
    return absl::AbortedError("commit: the transaction had failed and was rolled back");
  }
  return absl::OkStatus();
}

absl::Status Transaction::Rollback() {
  if (done_) return absl::OkStatus();
  done_ = true;
  conn_->in_transaction_ = false;
  conn_->current_timeout_ms_ = -1;
  // BEGIN still queued: nothing of this transaction went out.
  const bool sent = conn_->queued_.empty() || conn_->queued_.front().prepare;
  conn_->queued_.clear();
  if (!sent) return absl::OkStatus();
  if (conn_->broken()) return absl::OkStatus();  // the server rolls back on disconnect
  auto r = conn_->Run("rollback", "ROLLBACK", {}, absl::Seconds(5), false);
  return r.ok() ? absl::OkStatus() : r.status();
}

}  // namespace ulticode::pg
