// A synchronous Redis client over one hiredis connection, with typed helpers
// for the stream commands the services use (XADD, XREADGROUP, XACK,
// XAUTOCLAIM, XGROUP CREATE, XINFO, XPENDING).
//
// Ownership: a Client owns one redisContext (freed with redisFree). Every
// reply is copied into an owned Reply and the redisReply freed at once; no
// hiredis type appears in this header.
//
// Thread-safety: none. A Client is one thread's connection at a time (a
// worker owns one, or a pool hands it out). It is move-only.
//
// Connection: lazy. The first call dials (connect_timeout), sets the socket
// timeout (command_timeout) and sends AUTH when a password is set. Any
// connection or I/O error drops the context, so the next call redials; a
// hiredis context with an error is never reused. SIGPIPE is blocked in the
// calling thread while the client writes, so a dead peer gives an error, not
// a dead process.
//
// Errors:
//   Unavailable         connect refused/failed, connection lost, server closed
//                       it; or a transient server error (LOADING, READONLY, ...).
//   DeadlineExceeded    no reply within command_timeout (the connection is
//                       dropped; for a write the outcome is unknown).
//   InvalidArgument     bad options or arguments (nothing was sent).
//   Unauthenticated     AUTH refused (WRONGPASS) or a command without AUTH (NOAUTH).
//   FailedPrecondition  NOGROUP (see IsNoGroup), WRONGTYPE, ...
//   AlreadyExists       BUSYGROUP.
//   NotFound            "ERR no such key" (XINFO on a missing stream).
//   Internal            any other error reply (syntax, arity: a bug on our side)
//                       or a reply of an unexpected shape.
// Error replies keep the Redis message verbatim at the start of the Status
// message; see ErrorReplyToStatus in reply.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/redis/reply.h"

struct redisContext;
struct redisReply;

namespace ulticode::redis {

class BoundedReplies;

// Bounds on replies, for a connection that reads what others wrote (see
// bounded_replies.h). 0: no limit.
struct ReplyLimits {
  // An array (e.g. a stream entry's field list) whose direct string
  // elements pass this many bytes, or that has more elements than
  // max_array_elements, arrives as an error reply kOmittedPrefix + why.
  size_t max_array_bytes = 0;
  size_t max_array_elements = 0;
  // One string element larger than this fails the command before it is
  // buffered whole (ResourceExhausted); the connection is dropped.
  size_t max_element_bytes = 0;
  bool enabled() const {
    return max_array_bytes != 0 || max_array_elements != 0 || max_element_bytes != 0;
  }
};

// The error text an omitted array is replaced by (then the reason).
inline constexpr absl::string_view kOmittedPrefix = "ulticode: omitted: ";

struct Options {
  std::string host = "127.0.0.1";
  int port = 6379;
  // AUTH user password when both are set; AUTH password when only the
  // password is set; no AUTH when the password is empty.
  std::string user;
  std::string password;
  absl::Duration connect_timeout = absl::Seconds(2);
  // Socket read/write timeout for every command. Blocking XREADGROUP waits
  // up to its block time plus this.
  absl::Duration command_timeout = absl::Seconds(2);
  ReplyLimits reply_limits;
  // CLIENT NO-EVICT on after connecting: Redis's maxmemory-clients never
  // closes this connection to free client memory (Admin's: a peer flooding
  // connections must not get Admin's reads cut). A Redis that refuses it
  // (the ACL lacks +client|no-evict) is logged once, and the connection used.
  bool no_evict = false;
};

// Parses "host:port" ("[::1]:6379" for IPv6) into options->host and
// options->port, leaving the other fields alone. InvalidArgument naming the
// problem otherwise; `options` is then unchanged.
absl::Status ParseAddress(absl::string_view address, Options* options);

using StreamFields = std::vector<std::pair<std::string, std::string>>;

// The value of field `name` of a stream entry; nullopt when it is absent or
// appears more than once (which of two values was meant is unknown).
std::optional<std::string> FieldOf(const StreamFields& fields, absl::string_view name);

struct StreamEntry {
  std::string id;
  StreamFields fields;
  // The entry was deleted (XDEL) while still pending: Redis returns its id
  // with nil fields when reading the PEL (XREADGROUP with an id other than ">").
  bool deleted = false;
  // Not empty: the entry's fields were over Options::reply_limits and were
  // not read (`fields` is empty); why.
  std::string omitted;

  bool operator==(const StreamEntry&) const = default;
};

// The entries read from one stream.
struct StreamRead {
  std::string stream;
  std::vector<StreamEntry> entries;
};

struct AutoClaimResult {
  // Cursor for the next XAUTOCLAIM; "0-0" once the whole PEL was scanned.
  std::string next_start;
  std::vector<StreamEntry> entries;
  // Pending ids whose entries no longer exist; Redis 7 removes them from the
  // PEL. Empty on Redis 6.2.
  std::vector<std::string> deleted_ids;
};

struct StreamInfo {
  int64_t length = 0;
  int64_t groups = 0;
  std::string last_generated_id;
  // Absent when the stream is empty.
  std::optional<std::string> first_entry_id;
  std::optional<std::string> last_entry_id;
  // Redis 7 only.
  std::optional<int64_t> entries_added;
  std::optional<std::string> max_deleted_entry_id;
};

struct GroupInfo {
  std::string name;
  int64_t consumers = 0;
  int64_t pending = 0;
  std::string last_delivered_id;
  // Redis 7 only; nil when Redis cannot tell (e.g. after deletions).
  std::optional<int64_t> entries_read;
  std::optional<int64_t> lag;
};

struct PendingSummary {
  int64_t count = 0;
  // Absent when nothing is pending.
  std::optional<std::string> smallest_id;
  std::optional<std::string> largest_id;
  // Consumer name -> number of entries it holds.
  std::vector<std::pair<std::string, int64_t>> consumers;
};

class Client {
 public:
  explicit Client(Options options);
  ~Client();

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Options& options() const { return options_; }
  // Whether a connection is currently open (it may still be dead on the
  // server side; the next call finds out).
  bool connected() const { return ctx_ != nullptr; }

  // Runs one command. Binary-safe: every argument is sent with its length.
  // An error reply becomes a Status; other replies come back as a Reply.
  absl::StatusOr<Reply> Command(const std::vector<std::string>& args);

  // Sends all commands, then reads all replies. An error reply fails only its
  // own command; a connection error fails the whole call (some commands may
  // have run). Not atomic: use MULTI/EXEC inside it for that.
  absl::StatusOr<std::vector<absl::StatusOr<Reply>>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

  // PING; OK when the server answered PONG.
  absl::Status Ping();

  // XADD stream * ... for each entry, pipelined; returns the new ids in
  // order. Fails with the first error reply; entries before it were added.
  // Every entry needs at least one field.
  absl::StatusOr<std::vector<std::string>> XAddBatch(absl::string_view stream,
                                                     const std::vector<StreamFields>& entries);

  // XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] STREAMS ... ids.
  // `start_id` applies to every stream: ">" for new entries, "0" to re-read
  // this consumer's pending entries. count <= 0 means no COUNT. block <= 0
  // means do not block; a positive block extends the socket timeout for this
  // call to block + command_timeout (waiting forever is not offered). No
  // entries before the block time ran out is an empty result, not an error.
  // Streams with no entries to return are left out.
  absl::StatusOr<std::vector<StreamRead>> XReadGroup(absl::string_view group,
                                                     absl::string_view consumer,
                                                     const std::vector<std::string>& streams,
                                                     int64_t count, absl::Duration block,
                                                     absl::string_view start_id = ">");

  // XREAD [COUNT count] [BLOCK ms] STREAMS stream start_id: entries after
  // `start_id` (no consumer group). Block and timeout as in XReadGroup.
  absl::StatusOr<std::vector<StreamEntry>> XRead(absl::string_view stream, int64_t count,
                                                 absl::Duration block, absl::string_view start_id);

  // XACK; returns how many were acknowledged (0 for an unknown group or ids).
  absl::StatusOr<int64_t> XAck(absl::string_view stream, absl::string_view group,
                               const std::vector<std::string>& ids);

  // XAUTOCLAIM stream group consumer min_idle start [COUNT count]: takes over
  // entries pending longer than `min_idle` for another consumer.
  absl::StatusOr<AutoClaimResult> XAutoClaim(absl::string_view stream, absl::string_view group,
                                             absl::string_view consumer, absl::Duration min_idle,
                                             absl::string_view start, int64_t count);

  // XGROUP CREATE stream group start_id [MKSTREAM]. Returns true when it was
  // created, false when it already existed (BUSYGROUP is not an error here).
  absl::StatusOr<bool> XGroupCreate(absl::string_view stream, absl::string_view group,
                                    absl::string_view start_id = "0", bool mkstream = true);

  // XLEN: the entries of a stream, 0 when it does not exist. Unlike XINFO
  // STREAM it answers with no entry (whoever writes the stream chose those).
  absl::StatusOr<int64_t> XLen(absl::string_view stream);
  // XINFO STREAM; NotFound when the stream does not exist.
  absl::StatusOr<StreamInfo> XInfoStream(absl::string_view stream);
  // XINFO GROUPS; NotFound when the stream does not exist.
  absl::StatusOr<std::vector<GroupInfo>> XInfoGroups(absl::string_view stream);
  // XPENDING stream group (the summary form). NOGROUP when the group or
  // stream does not exist.
  absl::StatusOr<PendingSummary> XPendingSummary(absl::string_view stream, absl::string_view group);

 private:
  struct ContextDeleter {
    void operator()(redisContext* ctx) const;
  };
  struct BoundedDeleter {
    void operator()(BoundedReplies* bounded) const;
  };

  absl::Status EnsureConnected();
  // Command() with the socket timeout set to `timeout` for this call only.
  absl::StatusOr<Reply> Execute(const std::vector<std::string>& args, absl::Duration timeout);
  // Runs an XREAD/XREADGROUP whose arguments end just before BLOCK/STREAMS.
  absl::StatusOr<std::vector<StreamRead>> ReadStreams(std::vector<std::string> args,
                                                      const std::vector<std::string>& streams,
                                                      int64_t count, absl::Duration block,
                                                      absl::string_view start_id);
  // Builds the Status for ctx_->err and drops the context. `saved_errno` is
  // errno right after the failing hiredis call.
  absl::Status DropOnError(absl::string_view what, int saved_errno);
  // The next reply, as redisGetReply, but failing (ResourceExhausted, the
  // connection dropped) once a string element being received passes
  // reply_limits.max_element_bytes.
  absl::StatusOr<redisReply*> ReadReply(absl::string_view what);
  // Sends `args` and reads the reply.
  absl::StatusOr<redisReply*> Roundtrip(const std::vector<std::string>& args,
                                        absl::string_view what);
  std::string Endpoint() const;

  Options options_;
  std::unique_ptr<BoundedReplies, BoundedDeleter> bounded_;  // with reply_limits
  std::unique_ptr<redisContext, ContextDeleter> ctx_;
};

}  // namespace ulticode::redis
