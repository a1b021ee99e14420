#include "admin/query/list_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "admin/query/page_token.h"

namespace ulticode::admin::query {
namespace {

constexpr char kVersion = 1;
constexpr size_t kBytes = 1 + 1 + 8 + 8 + 8;

}  // namespace

std::string EncodeListToken(ListKind kind, uint64_t position, uint64_t fingerprint) {
  std::string raw;
  raw.push_back(kVersion);
  raw.push_back(static_cast<char>(kind));
  PutU64(&raw, position);
  PutU64(&raw, fingerprint);
  PutU64(&raw, Fnv1a64(raw));
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<uint64_t> DecodeListToken(absl::string_view field, absl::string_view token,
                                         ListKind kind, uint64_t fingerprint) {
  std::string raw;
  if (token.size() > 64 || !absl::WebSafeBase64Unescape(token, &raw) || raw.size() != kBytes ||
      raw[0] != kVersion ||
      GetU64(absl::string_view(raw).substr(18)) != Fnv1a64(absl::string_view(raw).substr(0, 18))) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": malformed"));
  }
  // One spelling per token: padding or stray low bits are not ours.
  if (absl::WebSafeBase64Escape(raw) != token) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": malformed"));
  }
  if (raw[1] != static_cast<char>(kind) ||
      GetU64(absl::string_view(raw).substr(10)) != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": issued for another request"));
  }
  return GetU64(absl::string_view(raw).substr(2));
}

}  // namespace ulticode::admin::query
