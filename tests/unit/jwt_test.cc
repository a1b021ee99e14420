// jwt::Verify on real keys of each algorithm, without a server: the JWKS
// keys built from parameters (EC, RSA) and raw bytes (Ed25519) verify the
// tokens their private keys signed, and a changed signature is refused
// (ES256 goes through the raw r||s to DER conversion both times).
#include "common/jwt/jwt.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/tokens.h"

namespace ulticode::jwt {
namespace {

using ::ulticode::testing::SharedTestTokens;
using ::ulticode::testing::TokenSpec;

VerifyOptions Options() {
  return VerifyOptions{.issuer = ::ulticode::testing::kTestIssuer,
                       .audience = ::ulticode::testing::kTestAudience};
}

// `token` with the first byte of its signature changed.
std::string WithBadSignature(const std::string& token) {
  const size_t dot = token.rfind('.');
  std::string sig;
  EXPECT_TRUE(absl::WebSafeBase64Unescape(token.substr(dot + 1), &sig));
  sig[0] = static_cast<char>(sig[0] ^ 0x01);
  std::string b64;
  absl::WebSafeBase64Escape(sig, &b64);
  return absl::StrCat(token.substr(0, dot + 1), b64);
}

TEST(JwtTest, EachAlgorithmVerifiesItsOwnSignatureOnly) {
  const auto keys = SharedTestTokens().jwks().Current();
  ASSERT_NE(keys, nullptr);
  ASSERT_EQ(keys->size(), 3u) << keys->Describe();
  for (const char* alg : {"EdDSA", "ES256", "RS256"}) {
    SCOPED_TRACE(alg);
    TokenSpec spec;
    spec.subject = "alice";
    spec.alg = alg;
    const std::string token = SharedTestTokens().Mint(spec);
    auto claims = Verify(token, *keys, Options(), absl::Now());
    ASSERT_TRUE(claims.ok()) << claims.status();
    EXPECT_EQ(claims->subject, "alice");

    auto bad = Verify(WithBadSignature(token), *keys, Options(), absl::Now());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(bad.status().message(), "invalid token: bad signature");
  }
}

TEST(JwtTest, JwksRefusesKeysOpenSslCannotBuild) {
  // A P-256 point that is not on the curve: EVP_PKEY_fromdata refuses it.
  const std::string zeros(32, '\0');
  std::string x;
  absl::WebSafeBase64Escape(zeros, &x);
  auto jwks = Jwks::Parse(absl::StrCat(R"({"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":")", x,
                                       R"(","y":")", x, R"("}]})"));
  EXPECT_EQ(jwks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(jwks.status().message().find("not a valid EC public key"), std::string::npos)
      << jwks.status();
}

// One token, one spelling: a part that is not canonical unpadded base64url
// (padding, whitespace, non-zero trailing bits) is refused, so nobody can
// present endless variants of a valid token (each a new entry of the
// verified-token cache). And a "typ" other than a JWT's is refused.
TEST(JwtTest, OnlyCanonicalBase64UrlAndAJwtTypAreAccepted) {
  const auto keys = SharedTestTokens().jwks().Current();
  const std::string token = SharedTestTokens().Mint(TokenSpec{});
  ASSERT_TRUE(Verify(token, *keys, Options(), absl::Now()).ok());
  const size_t dot = token.rfind('.');
  std::string sig = token.substr(dot + 1);  // 64 bytes: 86 characters, 2 trailing bits
  ASSERT_EQ(sig.size(), 86u);
  std::vector<std::string> variants = {
      token + "=", token + "==", token + " ",
      absl::StrCat(token.substr(0, dot + 1), sig.substr(0, 40), "\n", sig.substr(40))};
  // The last character carries 4 bits of signature and 2 unused ones.
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const size_t v = kAlphabet.find(sig.back());
  sig.back() = kAlphabet[v ^ 1];  // same 64 bytes, a trailing bit set
  variants.push_back(absl::StrCat(token.substr(0, dot + 1), sig));
  for (const std::string& t : variants) {
    auto got = Verify(t, *keys, Options(), absl::Now());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated) << t;
  }

  TokenSpec none;
  none.typ = "";
  EXPECT_TRUE(Verify(SharedTestTokens().Mint(none), *keys, Options(), absl::Now()).ok());
  TokenSpec at;
  at.typ = "at+jwt";
  EXPECT_TRUE(Verify(SharedTestTokens().Mint(at), *keys, Options(), absl::Now()).ok());
  TokenSpec dpop;
  dpop.typ = "dpop+jwt";
  auto refused = Verify(SharedTestTokens().Mint(dpop), *keys, Options(), absl::Now());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(refused.status().message().find("typ"), std::string::npos) << refused.status();
}

// A placeholder line in the JWKS must never let anyone mint tokens.
TEST(JwtTest, JwksRefusesWeakKeys) {
  std::string identity(32, '\0');
  identity[0] = 1;  // the Ed25519 identity point: (R = identity, s = 0) verifies anything
  std::string x;
  absl::WebSafeBase64Escape(identity, &x);
  auto ed = Jwks::Parse(
      absl::StrCat(R"({"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":")", x, R"("}]})"));
  EXPECT_EQ(ed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ed.status().message().find("small order"), std::string::npos) << ed.status();

  // RSA with e = 1: every "signature" s verifies as s itself.
  std::string n(256, '\xff'), n64;
  absl::WebSafeBase64Escape(n, &n64);
  // 1, 2 and 65536: not odd and at least 3.
  for (const std::string& e :
       {std::string("\x01", 1), std::string("\x02", 1), std::string("\x01\x00\x00", 3)}) {
    std::string exponent;
    absl::WebSafeBase64Escape(e, &exponent);
    auto rsa = Jwks::Parse(absl::StrCat(R"({"keys":[{"kty":"RSA","kid":"k","n":")", n64,
                                        R"(","e":")", exponent, R"("}]})"));
    EXPECT_EQ(rsa.status().code(), absl::StatusCode::kInvalidArgument) << exponent;
    EXPECT_NE(rsa.status().message().find("exponent"), std::string::npos) << rsa.status();
  }
}

}  // namespace
}  // namespace ulticode::jwt
