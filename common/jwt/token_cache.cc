#include "common/jwt/token_cache.h"

namespace ulticode::jwt {

absl::StatusOr<Claims> VerifiedTokens::Verify(absl::string_view token,
                                              const std::shared_ptr<const Jwks>& keys,
                                              const VerifyOptions& options, absl::Time now) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = entries_.find(token);
    if (it != entries_.end() && it->second.keys.lock() == keys &&
        now - options.skew < it->second.claims.expires_at) {
      return it->second.claims;
    }
  }
  absl::StatusOr<Claims> claims = jwt::Verify(token, *keys, options, now);
  if (!claims.ok() || token.size() > kMaxCachedTokenBytes) return claims;
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= capacity_) entries_.clear();
  entries_.insert_or_assign(std::string(token), Entry{keys, *claims});
  return claims;
}

}  // namespace ulticode::jwt
