#include "common/redis/reply.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ulticode::redis {
namespace {

constexpr size_t kDebugMaxBytes = 200;

// Printable rendering of binary bytes, cut at kDebugMaxBytes.
std::string Printable(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < kDebugMaxBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, static_cast<char>(c)));
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char kHex[] = "0123456789abcdef";
      absl::StrAppend(&out, "\\x", std::string(1, kHex[c >> 4]), std::string(1, kHex[c & 0xf]));
    }
  }
  if (bytes.size() > kDebugMaxBytes) absl::StrAppend(&out, "...(", bytes.size(), " bytes)");
  return out;
}

// The first word of an error reply: "NOGROUP", "ERR", ...
absl::string_view Prefix(absl::string_view message) {
  const size_t space = message.find(' ');
  return space == absl::string_view::npos ? message : message.substr(0, space);
}

}  // namespace

Reply Reply::Text(Kind kind, std::string text) {
  Reply r;
  r.kind_ = kind;
  r.str_ = std::move(text);
  return r;
}

Reply Reply::Integer(int64_t value) {
  Reply r;
  r.kind_ = Kind::kInteger;
  r.integer_ = value;
  return r;
}

Reply Reply::Array(std::vector<Reply> elements) {
  Reply r;
  r.kind_ = Kind::kArray;
  r.elements_ = std::move(elements);
  return r;
}

absl::StatusOr<std::string> Reply::AsString() const {
  if (kind_ == Kind::kString || kind_ == Kind::kStatus) return str_;
  return absl::InternalError(absl::StrCat("redis: expected a string reply, got ", DebugString()));
}

absl::StatusOr<int64_t> Reply::AsInteger() const {
  if (kind_ == Kind::kInteger) return integer_;
  return absl::InternalError(absl::StrCat("redis: expected an integer reply, got ", DebugString()));
}

std::string Reply::DebugString() const {
  switch (kind_) {
    case Kind::kNil:
      return "nil";
    case Kind::kString:
      return absl::StrCat("\"", Printable(str_), "\"");
    case Kind::kStatus:
      return absl::StrCat("status:", Printable(str_));
    case Kind::kError:
      return absl::StrCat("error:", Printable(str_));
    case Kind::kInteger:
      return absl::StrCat(integer_);
    case Kind::kArray:
      return absl::StrCat(
          "[",
          absl::StrJoin(elements_, ", ",
                        [](std::string* out, const Reply& r) { out->append(r.DebugString()); }),
          "]");
  }
  return "?";
}

absl::Status ErrorReplyToStatus(absl::string_view message, absl::string_view context) {
  const std::string text =
      context.empty() ? std::string(message) : absl::StrCat(message, " [", context, "]");
  const absl::string_view prefix = Prefix(message);
  if (prefix == "NOGROUP" || prefix == "WRONGTYPE" || prefix == "NOSCRIPT" || prefix == "BUSYKEY" ||
      prefix == "EXECABORT") {
    return absl::FailedPreconditionError(text);
  }
  if (prefix == "BUSYGROUP") return absl::AlreadyExistsError(text);
  if (prefix == "NOAUTH" || prefix == "WRONGPASS" ||
      absl::StartsWith(message, "ERR invalid password")) {
    return absl::UnauthenticatedError(text);
  }
  if (prefix == "NOPERM") return absl::PermissionDeniedError(text);
  if (prefix == "LOADING" || prefix == "BUSY" || prefix == "TRYAGAIN" || prefix == "MASTERDOWN" ||
      prefix == "READONLY" || prefix == "CLUSTERDOWN") {
    return absl::UnavailableError(text);
  }
  if (prefix == "OOM") return absl::ResourceExhaustedError(text);
  if (absl::StartsWith(message, "ERR no such key")) return absl::NotFoundError(text);
  return absl::InternalError(text);
}

bool IsNoGroup(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition &&
         absl::StartsWith(status.message(), "NOGROUP");
}

bool IsBusyGroup(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAlreadyExists &&
         absl::StartsWith(status.message(), "BUSYGROUP");
}

bool IsTransient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace ulticode::redis
