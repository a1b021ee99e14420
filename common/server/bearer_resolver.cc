#include "common/server/bearer_resolver.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"

namespace ulticode::server {

absl::StatusOr<Principal> BearerTokenResolver::Resolve(
    const grpc::ServerContextBase& context) const {
  absl::StatusOr<std::string> header = Metadata(context, kHeader);
  if (!header.ok()) return absl::UnauthenticatedError(header.status().message());
  if (header->empty()) {
    return absl::UnauthenticatedError("missing \"authorization: Bearer <token>\" metadata");
  }
  absl::string_view value = *header;
  if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError("authorization metadata is not \"Bearer <token>\"");
  }
  value.remove_prefix(7);
  ASSIGN_OR_RETURN(jwt::Claims claims, verified_.Verify(absl::StripAsciiWhitespace(value),
                                                        keys_.Current(), options_, absl::Now()));
  return Principal{std::move(claims.subject), std::move(claims.roles)};
}

}  // namespace ulticode::server
