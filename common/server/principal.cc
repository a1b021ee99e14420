#include "common/server/principal.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ulticode::server {

std::string Metadata(const grpc::ServerContextBase& context, const std::string& key) {
  const auto& md = context.client_metadata();
  auto it = md.find(key);
  if (it == md.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

absl::StatusOr<Principal> HeaderPrincipalResolver::Resolve(
    const grpc::ServerContextBase& context) const {
  std::string id = Metadata(context, kHeader);
  if (id.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat("missing caller identity: send metadata \"", kHeader, "\""));
  }
  if (id.size() > 128) {
    return absl::UnauthenticatedError(absl::StrCat(kHeader, " is longer than 128 characters"));
  }
  for (char c : id) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '.' || c == ':' || c == '@' || c == '-')) {
      return absl::UnauthenticatedError(
          absl::StrCat(kHeader, " may only hold [A-Za-z0-9_.:@-]"));
    }
  }
  return Principal{std::move(id)};
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

CallInfo GetCallInfo(const grpc::ServerContextBase& context) {
  CallInfo info;
  info.client_ip = PeerToIp(context.peer());
  info.user_agent = Metadata(context, "user-agent");
  // traceparent: version-traceid-parentid-flags
  const std::string tp = Metadata(context, "traceparent");
  std::vector<absl::string_view> parts = absl::StrSplit(tp, '-');
  if (parts.size() == 4 && parts[1].size() == 32) {
    bool hex = true;
    for (char c : parts[1]) hex = hex && absl::ascii_isxdigit(c);
    if (hex) info.trace_id = absl::AsciiStrToLower(parts[1]);
  }
  return info;
}

}  // namespace ulticode::server
