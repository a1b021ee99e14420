// Bearer tokens for tests: an Ed25519, a P-256 (ES256) and an RSA-2048
// (RS256) key, their JWKS in a file (what --jwks-file reads), and a minter
// of tokens with any claims, header or signature trouble a test needs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/jwt/jwt.h"

namespace ulticode::testing {

inline constexpr char kTestIssuer[] = "ulticode-test";
inline constexpr char kTestAudience[] = "ulticode";

// Every role of every service.
const std::vector<std::string>& AllRoles();

struct TokenSpec {
  std::string subject = "alice";
  std::vector<std::string> roles = AllRoles();
  std::string alg = "EdDSA";  // EdDSA, ES256 or RS256: signs with that key
  std::string kid;            // default: the kid of `alg`'s key
  std::string header_alg;     // default: alg (e.g. "none", "HS256" to lie)
  std::string typ = "JWT";    // the header's "typ"; empty: none
  std::string issuer = kTestIssuer;
  std::string audience = kTestAudience;
  absl::Duration expires_in = absl::Hours(1);        // from now
  absl::Duration not_before = absl::ZeroDuration();  // nbf = now + this (0: no nbf)
};

class TestTokens {
 public:
  TestTokens();
  ~TestTokens();

  std::string Mint(const TokenSpec& spec) const;
  std::string Mint(const std::string& subject) const;
  // "Bearer <Mint(subject)>".
  std::string Bearer(const std::string& subject) const;

  const std::string& jwks_file() const { return jwks_file_; }
  const jwt::JwksFile& jwks() const { return *jwks_; }
  // Rewrites the JWKS file with only the keys whose kids are listed
  // (an empty list: all three), for rotation tests.
  void WriteJwks(const std::vector<std::string>& kids = {}) const;
  std::string Kid(const std::string& alg) const;

 private:
  struct Keys;
  std::unique_ptr<Keys> keys_;
  std::string dir_;
  std::string jwks_file_;
  std::unique_ptr<jwt::JwksFile> jwks_;
};

// One TestTokens per test process.
const TestTokens& SharedTestTokens();

}  // namespace ulticode::testing
