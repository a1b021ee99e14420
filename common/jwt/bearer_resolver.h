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

namespace ulticode::jwt {

class BearerTokenResolver final : public server::PrincipalResolver {
 public:
  static constexpr char kHeader[] = "authorization";

  BearerTokenResolver(const JwksFile& keys, VerifyOptions options)
      : keys_(keys), options_(std::move(options)) {}

  absl::StatusOr<server::Principal> Resolve(const grpc::ServerContextBase& context) const override;

 private:
  const JwksFile& keys_;
  const VerifyOptions options_;
  mutable VerifiedTokens verified_;
};

}  // namespace ulticode::jwt
