#include "common/server/principal.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/text/text.h"

namespace ulticode::server {

absl::StatusOr<std::string> Metadata(const grpc::ServerContextBase& context,
                                     const std::string& key) {
  const auto& md = context.client_metadata();
  auto [first, last] = md.equal_range(key);
  if (first == last) return std::string();
  if (std::next(first) != last) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata \"", key, "\" was sent ", std::distance(first, last), " times; send it once"));
  }
  return std::string(first->second.data(), first->second.size());
}

absl::StatusOr<Principal> Authorizer::Admit(const grpc::ServerContextBase& context,
                                            absl::string_view method) const {
  ASSIGN_OR_RETURN(Principal principal, resolver_.Resolve(context));
  auto rule = table_.find(method);
  if (rule == table_.end()) {
    return absl::PermissionDeniedError(absl::StrCat("no access rule for ", method));
  }
  if (std::find(principal.roles.begin(), principal.roles.end(), rule->second) ==
      principal.roles.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " requires the role \"", rule->second, "\""));
  }
  return principal;
}

std::string PeerToIp(const std::string& peer) {
  absl::string_view p = peer;
  if (absl::ConsumePrefix(&p, "ipv4:")) {
    auto colon = p.rfind(':');
    return std::string(colon == absl::string_view::npos ? p : p.substr(0, colon));
  }
  if (absl::ConsumePrefix(&p, "ipv6:")) {
    if (absl::ConsumePrefix(&p, "[")) {
      auto close = p.find(']');
      return std::string(close == absl::string_view::npos ? p : p.substr(0, close));
    }
    return std::string(p);
  }
  if (absl::StartsWith(p, "unix:")) return "unix";
  return std::string(p);
}

absl::StatusOr<CallInfo> GetCallInfo(const grpc::ServerContextBase& context) {
  CallInfo info;
  info.client_ip = PeerToIp(context.peer());
  ASSIGN_OR_RETURN(std::string agent, Metadata(context, "user-agent"));
  agent = std::string(text::TruncateUtf8(agent, kMaxUserAgentBytes));
  RETURN_IF_ERROR(text::Check("metadata user-agent", agent, {.max_chars = kMaxUserAgentBytes}));
  info.user_agent = std::move(agent);
  // traceparent: version-traceid-parentid-flags
  ASSIGN_OR_RETURN(const std::string tp, Metadata(context, "traceparent"));
  std::vector<absl::string_view> parts = absl::StrSplit(tp, '-');
  if (parts.size() == 4 && parts[1].size() == 32) {
    bool hex = true;
    for (char c : parts[1]) hex = hex && absl::ascii_isxdigit(c);
    if (hex) info.trace_id = absl::AsciiStrToLower(parts[1]);
  }
  return info;
}

}  // namespace ulticode::server
