// Tokens already verified, so a caller's every RPC does not pay for a
// signature check: most clients send the same token until it expires.
//
// An entry is the exact token string and the claims it verified to under
// one key set. It is used only while that same key set is current (a JWKS
// reload, e.g. a key removed, re-verifies every token) and only until the
// token expires (the same `exp` rule, with skew, as jwt::Verify). Failures
// are never cached. Bounded: at most `capacity` entries of tokens up to
// kMaxCachedTokenBytes; when full, the cache starts over. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/jwt/jwt.h"

namespace ulticode::jwt {

inline constexpr size_t kMaxCachedTokenBytes = 4096;

class VerifiedTokens {
 public:
  explicit VerifiedTokens(size_t capacity = 1024) : capacity_(capacity) {}

  // jwt::Verify(token, *keys, options, now), from the cache when it may be.
  absl::StatusOr<Claims> Verify(absl::string_view token, const std::shared_ptr<const Jwks>& keys,
                                const VerifyOptions& options, absl::Time now);

 private:
  struct Entry {
    std::weak_ptr<const Jwks> keys;
    Claims claims;
  };
  const size_t capacity_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ulticode::jwt
