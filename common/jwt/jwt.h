// Verified callers: JSON Web Tokens (RFC 7519, JWS compact form) checked
// against a JSON Web Key Set (RFC 7517) on OpenSSL 3 directly.
//
// Why OpenSSL and not a JWT library: the three algorithms needed (EdDSA with
// Ed25519, ES256, RS256) are a few EVP calls each; OpenSSL is already the
// project's crypto; Debian 12's libjwt lacks EdDSA, and librhonabwy would
// bring GnuTLS and jansson beside OpenSSL. JSON is parsed by protobuf's JSON
// parser into google.protobuf.Struct.
//
// Refused: alg "none", HMAC algorithms (an HS256 token "signed" with a public
// key as the secret: algorithm confusion), any algorithm other than the one
// the key is for, keys without a kid, RSA keys under 2048 bits. Errors name
// the problem and never echo the token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/config/watched_file.h"
#include "common/crypto/crypto.h"

namespace ulticode::jwt {

// One verification key of a JWKS.
struct Key {
  std::string kid;
  std::string alg;  // "EdDSA", "ES256" or "RS256": the only one it verifies
  std::shared_ptr<EVP_PKEY> key;
};

class Jwks {
 public:
  // {"keys":[{"kty":"OKP","crv":"Ed25519","kid":..,"x":..}, {"kty":"EC",
  // "crv":"P-256",..,"x":..,"y":..}, {"kty":"RSA",..,"n":..,"e":..}]}.
  // INVALID_ARGUMENT naming the key (by index and kid) for anything else.
  static absl::StatusOr<Jwks> Parse(absl::string_view json);
  static absl::StatusOr<Jwks> FromFile(const std::string& path);

  const Key* Find(absl::string_view kid) const;
  size_t size() const { return keys_.size(); }
  std::string Describe() const;  // "kid:alg,..." for logs

 private:
  absl::flat_hash_map<std::string, Key> keys_;
};

// The JWKS file, re-read when it changes (a key added or removed takes
// effect without a restart; a file that stops parsing keeps the last good set).
using JwksFile = config::WatchedFile<Jwks>;

struct VerifyOptions {
  std::string issuer;    // "iss" must equal it
  std::string audience;  // "aud" (a string or an array) must contain it
  // Allowed clock difference for "exp" and "nbf".
  absl::Duration skew = absl::Seconds(60);
};

struct Claims {
  std::string subject;             // "sub": the principal and audit actor
  std::vector<std::string> roles;  // "roles": an array of strings, may be empty
  absl::Time expires_at;
};

// Verifies `token` at `now`: form, algorithm, key, signature, then claims.
// UNAUTHENTICATED naming the problem.
absl::StatusOr<Claims> Verify(absl::string_view token, const Jwks& keys,
                              const VerifyOptions& options, absl::Time now);

}  // namespace ulticode::jwt
