// The caller is who their token proves: `authorization: Bearer <JWT>`,
// verified against the JWKS file (jwt::Verify), gives the principal (sub)
// and its roles. A missing, repeated or malformed header, or a token that
// does not verify, is UNAUTHENTICATED with a message that names the problem
// and never echoes the token. Verified tokens are remembered (VerifiedTokens)
// until they expire or the key set changes. Thread-safe.
#pragma once

#include "common/jwt/jwt.h"
#include "common/jwt/token_cache.h"
#include "common/server/principal.h"

namespace ulticode::server {

class BearerTokenResolver final : public PrincipalResolver {
 public:
  static constexpr char kHeader[] = "authorization";

  BearerTokenResolver(const jwt::JwksFile& keys, jwt::VerifyOptions options)
      : keys_(keys), options_(std::move(options)) {}

  absl::StatusOr<Principal> Resolve(const grpc::ServerContextBase& context) const override;

 private:
  const jwt::JwksFile& keys_;
  const jwt::VerifyOptions options_;
  mutable jwt::VerifiedTokens verified_;
};

}  // namespace ulticode::server
