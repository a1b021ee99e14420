// One PostgreSQL connection (libpq), owned RAII (PQfinish on destruction).
//
// A connection is one thread's world: not thread-safe, use it from one thread
// at a time (the Pool hands it out exclusively). Every query runs with the
// statement's timeout both on the server (statement_timeout) and on the
// client socket (timeout + grace), so a frozen server cannot hang a caller.
// A connection that lost its socket, timed out mid-query or broke protocol
// is marked broken and must be dropped (the Pool does that and redials).
//
// Errors follow common/pg/errors.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/pg/params.h"
#include "common/pg/result.h"
#include "libpq-fe.h"

namespace ulticode::pg {

class Transaction;

struct ConnectOptions {
  // libpq conninfo ("host=... dbname=...") or URI ("postgresql://...").
  std::string conninfo;
  // Override the conninfo's user; the password comes from a file
  // (--pg-password-file), never from the conninfo or a command line.
  std::string user;
  std::string password;
  std::string application_name = "ulticode";
  // synchronous_commit=off for the whole session: a commit returns before
  // its WAL is flushed, so a PostgreSQL crash can lose the last few. Only for
  // connections whose every write the protocol repairs when lost
  // (docs/guarantees.md, "Asynchronous commits"); never for a business
  // transaction or the inbox insert an XACK follows.
  bool asynchronous_commit = false;
  // idle_in_transaction_session_timeout (0: the server's): PostgreSQL ends a
  // session that holds a transaction open, idle, this long, releasing its
  // locks (a dispatcher that froze while holding rows).
  absl::Duration idle_in_transaction_timeout = absl::ZeroDuration();
  // lock_timeout (0: the server's): a statement that waits this long for a
  // row lock or for another session's uncommitted unique entry fails
  // (ABORTED, retryable) instead of waiting as long as that session lives.
  absl::Duration lock_timeout = absl::ZeroDuration();
  absl::Duration connect_timeout = absl::Seconds(5);
  // Extra time the client waits beyond a statement's timeout before it gives
  // up on the socket and marks the connection broken.
  absl::Duration client_grace = absl::Seconds(2);
};

struct Notification {
  std::string channel;
  std::string payload;
  int backend_pid = 0;
};

enum class Isolation { kReadCommitted, kRepeatableRead, kSerializable };

class Connection {
 public:
  static absl::StatusOr<std::unique_ptr<Connection>> Connect(const ConnectOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement (extended protocol, parameters bound separately).
  // Each distinct SQL text is prepared once per connection (named
  // server-side statement), so PostgreSQL parses and plans it once, not on
  // every call.
  absl::StatusOr<Result> Execute(const Statement& statement, const Params& params = {});

  // Runs a multi-statement script without parameters (simple protocol). Only
  // for trusted SQL such as migrations.
  absl::Status ExecuteScript(absl::string_view name, absl::string_view sql, absl::Duration timeout);

  // Starts a transaction that rolls back unless committed. Its BEGIN goes
  // out with the transaction's first statement (no round trip of its own).
  absl::StatusOr<Transaction> Begin(Isolation isolation = Isolation::kReadCommitted);

  // LISTEN on `channel` ([a-z0-9_]+).
  absl::Status Listen(absl::string_view channel);
  // Waits up to `timeout` for notifications; returns those that arrived
  // (possibly none). UNAVAILABLE when the connection broke.
  absl::StatusOr<std::vector<Notification>> WaitForNotifications(absl::Duration timeout);

  bool broken() const;
  int backend_pid() const;
  PGconn* raw() { return conn_; }

 private:
  friend class Transaction;
  explicit Connection(PGconn* conn, ConnectOptions options);

  // A statement whose result nobody reads, queued until one that is awaited
  // (Transaction::Defer, and every BEGIN): both then go out together in
  // libpq pipeline mode, one round trip.
  struct Queued {
    const char* name;
    const char* sql;
    Params params;
    absl::Duration timeout;
    bool prepare;  // a named server-side statement (false: BEGIN)
  };
  // Sends the queued statements and `last` in one pipeline and returns
  // `last`'s result, or the first error, named after its statement (later
  // ones are not run).
  absl::StatusOr<Result> RunQueued(Queued last, bool is_commit);
  // Sends every item of `batch` (preparing new statements first), then a
  // sync; false when libpq refused.
  bool SendPipeline(const std::vector<Queued>& batch, std::vector<std::string>* prepares);
  // Writes out what libpq holds, waiting for the socket up to `deadline`.
  absl::Status FlushOut(absl::string_view name, absl::Time deadline, bool is_commit);
  // Waits until a result can be read whole; past `deadline` the connection
  // is broken (a COMMIT's outcome is then unknown).
  absl::Status AwaitResult(absl::string_view name, absl::Duration timeout, absl::Time deadline,
                           bool is_commit);
  // The queued statements alone, before anything that is not a statement
  // (a script, LISTEN, a wait for notifications).
  absl::Status FlushQueued();

  enum class Protocol { kExtended, kSimple, kPrepared, kPrepare };
  // kSimple (multi-statement, no parameters) only for trusted scripts.
  // kPrepare creates server-side statement `prepared`; kPrepared runs it.
  absl::StatusOr<Result> Run(absl::string_view name, const char* sql, const Params& params,
                             absl::Duration timeout, bool is_commit,
                             Protocol protocol = Protocol::kExtended,
                             const std::string& prepared = "");
  // The server-side name of `sql` on this connection, preparing it first.
  absl::StatusOr<std::string> Prepared(const Statement& statement, int params);
  absl::Status EnsureTimeout(absl::Duration timeout);
  absl::Status LastError(absl::string_view name, const PGresult* res, bool is_commit);
  void MarkBroken() { broken_ = true; }
  // libpq notice receiver: logs the notice, and notes a cancelled wait for
  // the synchronous standby (Transaction::Commit reports it).
  static void OnNotice(void* self, const PGresult* notice);

  PGconn* conn_;
  ConnectOptions options_;
  bool broken_ = false;
  bool in_transaction_ = false;
  // SQL text -> server-side statement name ("s1", "s2", ...).
  absl::flat_hash_map<std::string, std::string> prepared_;
  // statement_timeout currently set on the session; -1 when unknown.
  int64_t current_timeout_ms_ = -1;
  bool standby_wait_cancelled_ = false;
  std::vector<Queued> queued_;
};

// RAII transaction: rolls back in its destructor unless Commit() succeeded.
// Move-only; borrows its Connection, which must outlive it.
class Transaction {
 public:
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  absl::StatusOr<Result> Execute(const Statement& statement, const Params& params = {});
  // Queues a statement whose result is not needed (an INSERT, a lock): it is
  // sent with the next Execute or with COMMIT, in one round trip, in order.
  // Its error is reported there, named after it; the transaction has then
  // failed. Statements keep their order: a later Execute sees its effects.
  void Defer(const Statement& statement, Params params = {});
  // COMMIT, with whatever is deferred: a deferred statement that fails is
  // reported as its own error, and nothing commits. A transaction that had
  // already failed reports ABORTED. A connection lost during COMMIT, and a
  // COMMIT whose wait for a synchronous standby was cancelled (committed on
  // the primary only), report commit outcome unknown (see errors.h). Nothing
  // here cancels a COMMIT: its wait for the standby is bounded only by the
  // client's own deadline, after which the connection is dropped, never
  // cancelled.
  absl::Status Commit();
  absl::Status Rollback();
  Connection& connection() { return *conn_; }

 private:
  friend class Connection;
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;
  bool done_ = false;
};

}  // namespace ulticode::pg
