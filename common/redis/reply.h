// An owned, typed copy of one Redis reply, and the mapping of Redis error
// replies to absl::Status.
//
// A Reply owns all its data (strings, nested arrays); it never points into
// hiredis memory, so it can outlive the Client that produced it. It is a plain
// value type: copyable, movable, thread-compatible.
//
// Error replies at the top level never reach callers as a Reply: the Client
// turns them into an absl::Status (see ErrorReplyToStatus). Kind::kError only
// appears nested inside an array, e.g. the per-command results of EXEC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ulticode::redis {

class Reply {
 public:
  enum class Kind { kNil, kString, kStatus, kInteger, kArray, kError };

  // A nil reply.
  Reply() = default;

  // `kind` must be kString, kStatus or kError.
  static Reply Text(Kind kind, std::string text);
  static Reply Integer(int64_t value);
  static Reply Array(std::vector<Reply> elements);

  Kind kind() const { return kind_; }
  bool is_nil() const { return kind_ == Kind::kNil; }
  bool is_array() const { return kind_ == Kind::kArray; }

  // The bytes of a string, status or error reply (may contain NUL); empty
  // for other kinds.
  const std::string& str() const { return str_; }
  // The value of an integer reply; 0 for other kinds.
  int64_t integer() const { return integer_; }
  // The elements of an array reply; empty for other kinds.
  const std::vector<Reply>& elements() const { return elements_; }

  // The text of a string or status reply; Internal for any other kind.
  absl::StatusOr<std::string> AsString() const;
  // The value of an integer reply; Internal for any other kind.
  absl::StatusOr<int64_t> AsInteger() const;

  // Human-readable rendering for logs and test failures, truncated when long.
  std::string DebugString() const;

  bool operator==(const Reply&) const = default;

 private:
  Kind kind_ = Kind::kNil;
  int64_t integer_ = 0;
  std::string str_;
  std::vector<Reply> elements_;
};

// Maps a Redis error reply to a Status whose message is the Redis message
// verbatim (so it starts with the error prefix, e.g. "NOGROUP ..."), followed
// by `context` in brackets when given. Codes:
//   NOGROUP, WRONGTYPE, NOSCRIPT, BUSYKEY, EXECABORT  -> FailedPrecondition
//   BUSYGROUP                                         -> AlreadyExists
//   "ERR no such key"                                 -> NotFound
//   NOAUTH, WRONGPASS, "ERR invalid password"         -> Unauthenticated
//   NOPERM                                            -> PermissionDenied
//   LOADING, BUSY, TRYAGAIN, MASTERDOWN, READONLY,
//   CLUSTERDOWN                                       -> Unavailable (transient)
//   OOM                                               -> ResourceExhausted
//   anything else (ERR syntax, wrong arity, ...)      -> Internal (a bug on our side)
absl::Status ErrorReplyToStatus(absl::string_view message, absl::string_view context = {});

// True for the error a consumer-group command gets when the stream or the
// group does not exist (e.g. the stream was deleted): recreate the group.
bool IsNoGroup(const absl::Status& status);
// True for the error XGROUP CREATE gets when the group already exists.
bool IsBusyGroup(const absl::Status& status);
// True for Unavailable or DeadlineExceeded: worth retrying after a back-off.
// When it came from the connection, the Client has already dropped it and the
// next call redials; for a write the outcome is then unknown.
bool IsTransient(const absl::Status& status);

}  // namespace ulticode::redis
