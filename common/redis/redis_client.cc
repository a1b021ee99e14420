#include "common/redis/redis_client.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/redis/bounded_replies.h"

namespace ulticode::redis {
namespace {

constexpr absl::string_view kComponent = "redis";

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// Blocks SIGPIPE in this thread while hiredis writes to a socket whose peer
// may be gone (hiredis uses write(), not send(MSG_NOSIGNAL)), and swallows a
// SIGPIPE raised meanwhile. The approach libpq takes; it leaves the process's
// signal dispositions alone.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &old_mask_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~ScopedSigpipeBlock() {
    const int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&sigpipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    errno = saved_errno;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t sigpipe_;
  sigset_t old_mask_;
  bool was_pending_ = false;
};

// argv/argvlen arrays for hiredis, pointing into `args` (which must outlive it).
class Argv {
 public:
  explicit Argv(const std::vector<std::string>& args) {
    ptrs_.reserve(args.size());
    lens_.reserve(args.size());
    for (const std::string& a : args) {
      ptrs_.push_back(a.data());
      lens_.push_back(a.size());
    }
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  const char** argv() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
};

Reply Convert(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING:
      return Reply::Text(Reply::Kind::kString, std::string(r.str, r.len));
    case REDIS_REPLY_STATUS:
      return Reply::Text(Reply::Kind::kStatus, std::string(r.str, r.len));
    case REDIS_REPLY_ERROR:
      return Reply::Text(Reply::Kind::kError, std::string(r.str, r.len));
    case REDIS_REPLY_INTEGER:
      return Reply::Integer(r.integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(r.elements);
      for (size_t i = 0; i < r.elements; ++i) elements.push_back(Convert(*r.element[i]));
      return Reply::Array(std::move(elements));
    }
    default:
      return Reply();
  }
}

// The command name for error messages; never the arguments, which may hold
// secrets or payloads.
std::string CommandName(const std::string& first_arg) {
  return absl::AsciiStrToUpper(first_arg.substr(0, 32));
}

// A top-level reply as the caller sees it: error replies become a Status.
absl::StatusOr<Reply> ToResult(const redisReply& raw, const std::string& first_arg) {
  if (raw.type == REDIS_REPLY_ERROR) {
    return ErrorReplyToStatus(absl::string_view(raw.str, raw.len), CommandName(first_arg));
  }
  return Convert(raw);
}

absl::Status ShapeError(absl::string_view command, const Reply& reply) {
  return absl::InternalError(
      absl::StrCat("redis ", command, ": unexpected reply ", reply.DebugString()));
}

absl::StatusOr<std::optional<std::string>> OptionalString(absl::string_view command,
                                                          const Reply& r) {
  if (r.is_nil()) return std::nullopt;
  if (r.kind() != Reply::Kind::kString && r.kind() != Reply::Kind::kStatus) {
    return ShapeError(command, r);
  }
  return r.str();
}

absl::StatusOr<std::optional<int64_t>> OptionalInteger(absl::string_view command, const Reply& r) {
  if (r.is_nil()) return std::nullopt;
  if (r.kind() != Reply::Kind::kInteger) return ShapeError(command, r);
  return r.integer();
}

absl::StatusOr<int64_t> Integer(absl::string_view command, const Reply& r) {
  if (r.kind() != Reply::Kind::kInteger) return ShapeError(command, r);
  return r.integer();
}

absl::StatusOr<std::string> String(absl::string_view command, const Reply& r) {
  if (r.kind() != Reply::Kind::kString && r.kind() != Reply::Kind::kStatus) {
    return ShapeError(command, r);
  }
  return r.str();
}

// Calls `fn` for each key/value of a flat [key, value, key, value, ...] array
// (the shape of XINFO replies).
absl::Status ForEachPair(absl::string_view command, const Reply& r,
                         const std::function<absl::Status(absl::string_view, const Reply&)>& fn) {
  if (!r.is_array() || r.elements().size() % 2 != 0) return ShapeError(command, r);
  for (size_t i = 0; i < r.elements().size(); i += 2) {
    ASSIGN_OR_RETURN(const std::string key, String(command, r.elements()[i]));
    RETURN_IF_ERROR(fn(key, r.elements()[i + 1]));
  }
  return absl::OkStatus();
}

// [id, [field, value, ...]] or [id, nil] for a deleted entry.
absl::StatusOr<StreamEntry> ParseEntry(absl::string_view command, const Reply& r) {
  if (!r.is_array() || r.elements().size() != 2) return ShapeError(command, r);
  StreamEntry entry;
  ASSIGN_OR_RETURN(entry.id, String(command, r.elements()[0]));
  const Reply& fields = r.elements()[1];
  if (fields.is_nil()) {
    entry.deleted = true;
    return entry;
  }
  if (fields.kind() == Reply::Kind::kError && absl::StartsWith(fields.str(), kOmittedPrefix)) {
    entry.omitted = fields.str().substr(kOmittedPrefix.size());
    return entry;
  }
  if (!fields.is_array() || fields.elements().size() % 2 != 0) return ShapeError(command, r);
  entry.fields.reserve(fields.elements().size() / 2);
  for (size_t i = 0; i < fields.elements().size(); i += 2) {
    ASSIGN_OR_RETURN(std::string name, String(command, fields.elements()[i]));
    ASSIGN_OR_RETURN(std::string value, String(command, fields.elements()[i + 1]));
    entry.fields.emplace_back(std::move(name), std::move(value));
  }
  return entry;
}

absl::StatusOr<std::vector<StreamEntry>> ParseEntries(absl::string_view command, const Reply& r) {
  if (r.is_nil()) return std::vector<StreamEntry>();
  if (!r.is_array()) return ShapeError(command, r);
  std::vector<StreamEntry> entries;
  entries.reserve(r.elements().size());
  for (const Reply& e : r.elements()) {
    ASSIGN_OR_RETURN(StreamEntry entry, ParseEntry(command, e));
    entries.push_back(std::move(entry));
  }
  return entries;
}

// The id of XINFO STREAM's first-entry / last-entry value (nil when empty).
absl::StatusOr<std::optional<std::string>> EntryId(absl::string_view command, const Reply& r) {
  if (r.is_nil()) return std::nullopt;
  if (!r.is_array() || r.elements().empty()) return ShapeError(command, r);
  return String(command, r.elements()[0]);
}

std::vector<std::string> XAckArgs(absl::string_view stream, absl::string_view group,
                                  const std::vector<std::string>& ids) {
  std::vector<std::string> args = {"XACK", std::string(stream), std::string(group)};
  args.insert(args.end(), ids.begin(), ids.end());
  return args;
}

}  // namespace

std::optional<std::string> FieldOf(const StreamFields& fields, absl::string_view name) {
  std::optional<std::string> found;
  for (const auto& [key, value] : fields) {
    if (key != name) continue;
    if (found.has_value()) return std::nullopt;
    found = value;
  }
  return found;
}

absl::Status ParseAddress(absl::string_view address, Options* options) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address \"", address, "\": ", why, " (want host:port)"));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return invalid("missing ':port'");
  absl::string_view host = address.substr(0, colon);
  const absl::string_view port_text = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    return invalid("an IPv6 host must be in brackets, e.g. [::1]:6379");
  }
  if (host.empty()) return invalid("empty host");
  int port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return invalid("port must be a number in 1..65535");
  }
  options->host = std::string(host);
  options->port = port;
  return absl::OkStatus();
}

void Client::ContextDeleter::operator()(redisContext* ctx) const { redisFree(ctx); }

void Client::BoundedDeleter::operator()(BoundedReplies* bounded) const { delete bounded; }

Client::Client(Options options) : options_(std::move(options)) {
  if (options_.reply_limits.enabled()) bounded_.reset(new BoundedReplies(options_.reply_limits));
}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

std::string Client::Endpoint() const { return absl::StrCat(options_.host, ":", options_.port); }

absl::Status Client::EnsureConnected() {
  if (ctx_ != nullptr) return absl::OkStatus();
  if (options_.connect_timeout <= absl::ZeroDuration() ||
      options_.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "redis: connect_timeout and command_timeout must be positive");
  }
  if (options_.host.empty()) return absl::InvalidArgumentError("redis: empty host");

  std::unique_ptr<redisContext, ContextDeleter> ctx(redisConnectWithTimeout(
      options_.host.c_str(), options_.port, absl::ToTimeval(options_.connect_timeout)));
  if (ctx == nullptr) return absl::ResourceExhaustedError("redis: cannot allocate a context");
  const auto unavailable = [&](absl::string_view step) {
    return absl::UnavailableError(
        absl::StrCat("redis ", Endpoint(), ": ", step, ": ", ctx->errstr));
  };
  if (ctx->err != 0) return unavailable("connect");
  if (redisSetTimeout(ctx.get(), absl::ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return unavailable("set timeout");
  }
  if (redisEnableKeepAlive(ctx.get()) != REDIS_OK) return unavailable("enable keepalive");

  if (!options_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!options_.user.empty()) auth.push_back(options_.user);
    auth.push_back(options_.password);
    Argv argv(auth);
    ReplyPtr reply(static_cast<redisReply*>(
        redisCommandArgv(ctx.get(), argv.argc(), argv.argv(), argv.lens())));
    if (reply == nullptr) return unavailable("AUTH");
    if (reply->type == REDIS_REPLY_ERROR) {
      return ErrorReplyToStatus(absl::string_view(reply->str, reply->len),
                                absl::StrCat("AUTH on connect to ", Endpoint()));
    }
  }
  if (options_.no_evict) {
    ReplyPtr reply(static_cast<redisReply*>(redisCommand(ctx.get(), "CLIENT NO-EVICT on")));
    if (reply == nullptr) return unavailable("CLIENT NO-EVICT");
    if (reply->type == REDIS_REPLY_ERROR) {
      static std::once_flag warned;
      const std::string error(reply->str, reply->len);
      std::call_once(warned, [&] {
        log::Warn(kComponent,
                  "CLIENT NO-EVICT refused: this connection may be closed when "
                  "client memory passes maxmemory-clients",
                  {{"endpoint", Endpoint()}, {"error", error}});
      });
    }
  }
  if (bounded_ != nullptr) bounded_->Install(ctx->reader);
  ctx_ = std::move(ctx);
  log::Debug(kComponent, "connected", {{"endpoint", Endpoint()}});
  return absl::OkStatus();
}

absl::StatusOr<redisReply*> Client::Roundtrip(const std::vector<std::string>& args,
                                              absl::string_view what) {
  Argv argv(args);
  if (redisAppendCommandArgv(ctx_.get(), argv.argc(), argv.argv(), argv.lens()) != REDIS_OK) {
    return DropOnError(what, errno);
  }
  return ReadReply(what);
}

// hiredis' redisGetReply for a blocking context, with a look at the read
// buffer between reads.
absl::StatusOr<redisReply*> Client::ReadReply(absl::string_view what) {
  void* reply = nullptr;
  errno = 0;
  if (redisGetReplyFromReader(ctx_.get(), &reply) != REDIS_OK) return DropOnError(what, errno);
  if (reply == nullptr) {
    int done = 0;
    do {
      if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) return DropOnError(what, errno);
    } while (done == 0);
    while (reply == nullptr) {
      if (redisBufferRead(ctx_.get()) != REDIS_OK) return DropOnError(what, errno);
      if (bounded_ != nullptr && bounded_->ElementTooLarge(ctx_->reader)) {
        ctx_.reset();
        const absl::Status status = absl::ResourceExhaustedError(
            absl::StrCat("redis ", Endpoint(), ": ", what, ": a reply element is over ",
                         options_.reply_limits.max_element_bytes,
                         " bytes; set proto-max-bulk-len on the Redis server (docs/operating.md)"));
        log::Warn(kComponent, "dropped connection after an error",
                  {{"endpoint", Endpoint()}, {"error", status.ToString()}});
        return status;
      }
      if (redisGetReplyFromReader(ctx_.get(), &reply) != REDIS_OK) {
        return DropOnError(what, errno);
      }
    }
  }
  return static_cast<redisReply*>(reply);
}

absl::Status Client::DropOnError(absl::string_view what, int saved_errno) {
  absl::Status status;
  if (ctx_ == nullptr || ctx_->err == 0) {
    status = absl::InternalError(
        absl::StrCat("redis ", Endpoint(), ": ", what, ": hiredis failed without an error"));
  } else if (ctx_->err == REDIS_ERR_IO &&
             (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT)) {
    status = absl::DeadlineExceededError(
        absl::StrCat("redis ", Endpoint(), ": ", what, ": timed out (", ctx_->errstr, ")"));
  } else {
    status =
        absl::UnavailableError(absl::StrCat("redis ", Endpoint(), ": ", what, ": ", ctx_->errstr));
  }
  ctx_.reset();
  log::Warn(kComponent, "dropped connection after an error",
            {{"endpoint", Endpoint()}, {"error", status.ToString()}});
  return status;
}

absl::StatusOr<Reply> Client::Command(const std::vector<std::string>& args) {
  return Execute(args, options_.command_timeout);
}

absl::StatusOr<Reply> Client::Execute(const std::vector<std::string>& args,
                                      absl::Duration timeout) {
  if (args.empty()) return absl::InvalidArgumentError("redis: empty command");
  ScopedSigpipeBlock no_sigpipe;
  RETURN_IF_ERROR(EnsureConnected());
  const std::string name = CommandName(args[0]);
  const bool own_timeout = timeout != options_.command_timeout;
  if (own_timeout && redisSetTimeout(ctx_.get(), absl::ToTimeval(timeout)) != REDIS_OK) {
    return DropOnError(name, errno);
  }
  ASSIGN_OR_RETURN(redisReply * raw, Roundtrip(args, name));
  ReplyPtr reply(raw);
  if (own_timeout &&
      redisSetTimeout(ctx_.get(), absl::ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return DropOnError(name, errno);
  }
  return ToResult(*reply, args[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<Reply>>> Client::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  for (size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("redis: pipeline command ", i, " is empty"));
    }
  }
  std::vector<absl::StatusOr<Reply>> results;
  if (commands.empty()) return results;
  ScopedSigpipeBlock no_sigpipe;
  RETURN_IF_ERROR(EnsureConnected());
  for (const auto& command : commands) {
    Argv argv(command);
    if (redisAppendCommandArgv(ctx_.get(), argv.argc(), argv.argv(), argv.lens()) != REDIS_OK) {
      return DropOnError("pipeline append", errno);
    }
  }
  results.reserve(commands.size());
  for (const auto& command : commands) {
    ASSIGN_OR_RETURN(redisReply * raw,
                     ReadReply(absl::StrCat("pipeline ", CommandName(command[0]))));
    ReplyPtr reply(raw);
    results.push_back(ToResult(*reply, command[0]));
  }
  return results;
}

absl::Status Client::Ping() {
  ASSIGN_OR_RETURN(const Reply reply, Command({"PING"}));
  if (reply.kind() != Reply::Kind::kStatus || reply.str() != "PONG") {
    return ShapeError("PING", reply);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Client::XAddBatch(
    absl::string_view stream, const std::vector<StreamFields>& entries) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("redis XADD: entry ", i, " has no fields"));
    }
    std::vector<std::string> command = {"XADD", std::string(stream), "*"};
    command.reserve(3 + 2 * entries[i].size());
    for (const auto& [name, value] : entries[i]) {
      command.push_back(name);
      command.push_back(value);
    }
    commands.push_back(std::move(command));
  }
  ASSIGN_OR_RETURN(const auto replies, Pipeline(commands));
  std::vector<std::string> ids;
  ids.reserve(replies.size());
  for (const auto& reply : replies) {
    if (!reply.ok()) return reply.status();
    ASSIGN_OR_RETURN(std::string id, String("XADD", *reply));
    ids.push_back(std::move(id));
  }
  return ids;
}

absl::StatusOr<std::vector<StreamRead>> Client::XReadGroup(absl::string_view group,
                                                           absl::string_view consumer,
                                                           const std::vector<std::string>& streams,
                                                           int64_t count, absl::Duration block,
                                                           absl::string_view start_id) {
  return ReadStreams({"XREADGROUP", "GROUP", std::string(group), std::string(consumer)}, streams,
                     count, block, start_id);
}

absl::StatusOr<std::vector<StreamEntry>> Client::XRead(absl::string_view stream, int64_t count,
                                                       absl::Duration block,
                                                       absl::string_view start_id) {
  ASSIGN_OR_RETURN(std::vector<StreamRead> reads,
                   ReadStreams({"XREAD"}, {std::string(stream)}, count, block, start_id));
  if (reads.empty()) return std::vector<StreamEntry>{};
  return std::move(reads[0].entries);
}

absl::StatusOr<std::vector<StreamRead>> Client::ReadStreams(std::vector<std::string> args,
                                                            const std::vector<std::string>& streams,
                                                            int64_t count, absl::Duration block,
                                                            absl::string_view start_id) {
  const std::string command = args[0];
  if (streams.empty())
    return absl::InvalidArgumentError(absl::StrCat("redis ", command, ": no streams"));
  if (count > 0) {
    args.push_back("COUNT");
    args.push_back(absl::StrCat(count));
  }
  absl::Duration timeout = options_.command_timeout;
  if (block > absl::ZeroDuration()) {
    // BLOCK 0 would wait forever: round a sub-millisecond block up to 1 ms.
    args.push_back("BLOCK");
    args.push_back(absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(block))));
    timeout += block;
  }
  args.push_back("STREAMS");
  args.insert(args.end(), streams.begin(), streams.end());
  for (size_t i = 0; i < streams.size(); ++i) args.push_back(std::string(start_id));

  ASSIGN_OR_RETURN(const Reply reply, Execute(args, timeout));
  std::vector<StreamRead> result;
  if (reply.is_nil()) return result;
  if (!reply.is_array()) return ShapeError(command, reply);
  for (const Reply& per_stream : reply.elements()) {
    if (!per_stream.is_array() || per_stream.elements().size() != 2) {
      return ShapeError(command, reply);
    }
    StreamRead read;
    ASSIGN_OR_RETURN(read.stream, String(command, per_stream.elements()[0]));
    ASSIGN_OR_RETURN(read.entries, ParseEntries(command, per_stream.elements()[1]));
    if (!read.entries.empty()) result.push_back(std::move(read));
  }
  return result;
}

absl::StatusOr<int64_t> Client::XAck(absl::string_view stream, absl::string_view group,
                                     const std::vector<std::string>& ids) {
  if (ids.empty()) return 0;
  ASSIGN_OR_RETURN(const Reply reply, Command(XAckArgs(stream, group, ids)));
  return Integer("XACK", reply);
}

absl::StatusOr<AutoClaimResult> Client::XAutoClaim(absl::string_view stream,
                                                   absl::string_view group,
                                                   absl::string_view consumer,
                                                   absl::Duration min_idle, absl::string_view start,
                                                   int64_t count) {
  std::vector<std::string> args = {
      "XAUTOCLAIM",
      std::string(stream),
      std::string(group),
      std::string(consumer),
      absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(min_idle))),
      std::string(start)};
  if (count > 0) {
    args.push_back("COUNT");
    args.push_back(absl::StrCat(count));
  }
  ASSIGN_OR_RETURN(const Reply reply, Command(args));
  if (!reply.is_array() || reply.elements().size() < 2) return ShapeError("XAUTOCLAIM", reply);
  AutoClaimResult result;
  ASSIGN_OR_RETURN(result.next_start, String("XAUTOCLAIM", reply.elements()[0]));
  ASSIGN_OR_RETURN(result.entries, ParseEntries("XAUTOCLAIM", reply.elements()[1]));
  if (reply.elements().size() >= 3) {
    const Reply& deleted = reply.elements()[2];
    if (!deleted.is_array()) return ShapeError("XAUTOCLAIM", reply);
    for (const Reply& id : deleted.elements()) {
      ASSIGN_OR_RETURN(std::string text, String("XAUTOCLAIM", id));
      result.deleted_ids.push_back(std::move(text));
    }
  }
  return result;
}

absl::StatusOr<bool> Client::XGroupCreate(absl::string_view stream, absl::string_view group,
                                          absl::string_view start_id, bool mkstream) {
  std::vector<std::string> args = {"XGROUP", "CREATE", std::string(stream), std::string(group),
                                   std::string(start_id)};
  if (mkstream) args.push_back("MKSTREAM");
  absl::StatusOr<Reply> reply = Command(args);
  if (IsBusyGroup(reply.status())) return false;
  if (!reply.ok()) return reply.status();
  return true;
}

absl::StatusOr<StreamInfo> Client::XInfoStream(absl::string_view stream) {
  constexpr absl::string_view kCmd = "XINFO STREAM";
  ASSIGN_OR_RETURN(const Reply reply, Command({"XINFO", "STREAM", std::string(stream)}));
  StreamInfo info;
  bool saw_length = false;
  bool saw_last_id = false;
  RETURN_IF_ERROR(ForEachPair(kCmd, reply, [&](absl::string_view key, const Reply& value) {
    if (key == "length") {
      saw_length = true;
      ASSIGN_OR_RETURN(info.length, Integer(kCmd, value));
    } else if (key == "groups") {
      ASSIGN_OR_RETURN(info.groups, Integer(kCmd, value));
    } else if (key == "last-generated-id") {
      saw_last_id = true;
      ASSIGN_OR_RETURN(info.last_generated_id, String(kCmd, value));
    } else if (key == "max-deleted-entry-id") {
      ASSIGN_OR_RETURN(info.max_deleted_entry_id, OptionalString(kCmd, value));
    } else if (key == "entries-added") {
      ASSIGN_OR_RETURN(info.entries_added, OptionalInteger(kCmd, value));
    } else if (key == "first-entry") {
      ASSIGN_OR_RETURN(info.first_entry_id, EntryId(kCmd, value));
    } else if (key == "last-entry") {
      ASSIGN_OR_RETURN(info.last_entry_id, EntryId(kCmd, value));
    }
    return absl::OkStatus();
  }));
  if (!saw_length || !saw_last_id) return ShapeError(kCmd, reply);
  return info;
}

absl::StatusOr<int64_t> Client::XLen(absl::string_view stream) {
  ASSIGN_OR_RETURN(Reply reply, Command({"XLEN", std::string(stream)}));
  return reply.integer();
}

absl::StatusOr<std::vector<GroupInfo>> Client::XInfoGroups(absl::string_view stream) {
  constexpr absl::string_view kCmd = "XINFO GROUPS";
  ASSIGN_OR_RETURN(const Reply reply, Command({"XINFO", "GROUPS", std::string(stream)}));
  if (!reply.is_array()) return ShapeError(kCmd, reply);
  std::vector<GroupInfo> groups;
  groups.reserve(reply.elements().size());
  for (const Reply& g : reply.elements()) {
    GroupInfo info;
    RETURN_IF_ERROR(ForEachPair(kCmd, g, [&](absl::string_view key, const Reply& value) {
      if (key == "name") {
        ASSIGN_OR_RETURN(info.name, String(kCmd, value));
      } else if (key == "consumers") {
        ASSIGN_OR_RETURN(info.consumers, Integer(kCmd, value));
      } else if (key == "pending") {
        ASSIGN_OR_RETURN(info.pending, Integer(kCmd, value));
      } else if (key == "last-delivered-id") {
        ASSIGN_OR_RETURN(info.last_delivered_id, String(kCmd, value));
      } else if (key == "entries-read") {
        ASSIGN_OR_RETURN(info.entries_read, OptionalInteger(kCmd, value));
      } else if (key == "lag") {
        ASSIGN_OR_RETURN(info.lag, OptionalInteger(kCmd, value));
      }
      return absl::OkStatus();
    }));
    groups.push_back(std::move(info));
  }
  return groups;
}

absl::StatusOr<PendingSummary> Client::XPendingSummary(absl::string_view stream,
                                                       absl::string_view group) {
  constexpr absl::string_view kCmd = "XPENDING";
  ASSIGN_OR_RETURN(const Reply reply,
                   Command({"XPENDING", std::string(stream), std::string(group)}));
  if (!reply.is_array() || reply.elements().size() != 4) return ShapeError(kCmd, reply);
  const std::vector<Reply>& e = reply.elements();
  PendingSummary summary;
  ASSIGN_OR_RETURN(summary.count, Integer(kCmd, e[0]));
  ASSIGN_OR_RETURN(summary.smallest_id, OptionalString(kCmd, e[1]));
  ASSIGN_OR_RETURN(summary.largest_id, OptionalString(kCmd, e[2]));
  if (e[3].is_nil()) return summary;
  if (!e[3].is_array()) return ShapeError(kCmd, reply);
  for (const Reply& c : e[3].elements()) {
    if (!c.is_array() || c.elements().size() != 2) return ShapeError(kCmd, reply);
    ASSIGN_OR_RETURN(std::string name, String(kCmd, c.elements()[0]));
    ASSIGN_OR_RETURN(const std::string count_text, String(kCmd, c.elements()[1]));
    int64_t count = 0;
    if (!absl::SimpleAtoi(count_text, &count)) return ShapeError(kCmd, reply);
    summary.consumers.emplace_back(std::move(name), count);
  }
  return summary;
}

}  // namespace ulticode::redis
