#include "tests/support/tokens.h"

#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crypto/openssl_ptr.h"

namespace ulticode::testing {
namespace {

using crypto::BignumPtr;
using crypto::EcdsaSigPtr;
using crypto::EvpMdCtxPtr;
using PkeyPtr = crypto::EvpPkeyPtr;

PkeyPtr Generate(const char* type, const char* param) {
  EVP_PKEY* key = param == nullptr ? EVP_PKEY_Q_keygen(nullptr, nullptr, type)
                  : std::string(type) == "RSA"
                      ? EVP_PKEY_Q_keygen(nullptr, nullptr, type, static_cast<size_t>(2048))
                      : EVP_PKEY_Q_keygen(nullptr, nullptr, type, param);
  if (key == nullptr) std::abort();
  return PkeyPtr(key);
}

std::string B64(absl::string_view bytes) { return absl::WebSafeBase64Escape(bytes); }

std::string BnParam(EVP_PKEY* key, const char* name) {
  BIGNUM* raw = nullptr;
  EVP_PKEY_get_bn_param(key, name, &raw);
  const BignumPtr bn(raw);
  std::string out(static_cast<size_t>(BN_num_bytes(bn.get())), '\0');
  BN_bn2bin(bn.get(), reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::string Sign(EVP_PKEY* key, const EVP_MD* md, absl::string_view input) {
  const EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  size_t len = 0;
  EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key);
  EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                 reinterpret_cast<const unsigned char*>(input.data()), input.size());
  sig.resize(len);
  return sig;
}

// DER ECDSA signature -> JWS r || s.
std::string EcdsaDerToRaw(const std::string& der) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  const EcdsaSigPtr sig(d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
  std::string out(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), reinterpret_cast<unsigned char*>(out.data()) + 32, 32);
  return out;
}

std::string Quoted(const std::string& s) { return absl::StrCat("\"", absl::CEscape(s), "\""); }

}  // namespace

struct TestTokens::Keys {
  PkeyPtr ed = Generate("ED25519", nullptr);
  PkeyPtr ec = Generate("EC", "P-256");
  PkeyPtr rsa = Generate("RSA", "2048");
};

const std::vector<std::string>& AllRoles() {
  static const auto* roles =
      new std::vector<std::string>{"auth.admin",   "auth.reader",    "app.editor",     "app.reader",
                                   "audit.reader", "audit.operator", "privacy.officer"};
  return *roles;
}

TestTokens::TestTokens() : keys_(std::make_unique<Keys>()) {
  std::string templ =
      absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", "/ulticode-jwks.XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) std::abort();
  dir_ = templ;
  jwks_file_ = dir_ + "/jwks.json";
  WriteJwks();
  auto jwks = jwt::JwksFile::Open(jwks_file_, absl::ZeroDuration());
  if (!jwks.ok()) std::abort();
  jwks_ = *std::move(jwks);
}

TestTokens::~TestTokens() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string TestTokens::Kid(const std::string& alg) const { return absl::StrCat("test-", alg); }

void TestTokens::WriteJwks(const std::vector<std::string>& kids) const {
  auto wanted = [&](const std::string& kid) {
    return kids.empty() || std::find(kids.begin(), kids.end(), kid) != kids.end();
  };
  std::vector<std::string> keys;
  std::string raw(32, '\0');
  size_t len = raw.size();
  EVP_PKEY_get_raw_public_key(keys_->ed.get(), reinterpret_cast<unsigned char*>(raw.data()), &len);
  if (wanted(Kid("EdDSA"))) {
    keys.push_back(absl::StrCat(R"({"kty":"OKP","crv":"Ed25519","alg":"EdDSA","kid":")",
                                Kid("EdDSA"), R"(","x":")", B64(raw), "\"}"));
  }
  if (wanted(Kid("ES256"))) {
    std::string point(65, '\0');
    size_t plen = 0;
    EVP_PKEY_get_octet_string_param(keys_->ec.get(), OSSL_PKEY_PARAM_PUB_KEY,
                                    reinterpret_cast<unsigned char*>(point.data()), point.size(),
                                    &plen);
    keys.push_back(absl::StrCat(R"({"kty":"EC","crv":"P-256","kid":")", Kid("ES256"), R"(","x":")",
                                B64(point.substr(1, 32)), R"(","y":")", B64(point.substr(33, 32)),
                                "\"}"));
  }
  if (wanted(Kid("RS256"))) {
    keys.push_back(absl::StrCat(R"({"kty":"RSA","alg":"RS256","kid":")", Kid("RS256"), R"(","n":")",
                                B64(BnParam(keys_->rsa.get(), OSSL_PKEY_PARAM_RSA_N)), R"(","e":")",
                                B64(BnParam(keys_->rsa.get(), OSSL_PKEY_PARAM_RSA_E)), "\"}"));
  }
  const std::string tmp = jwks_file_ + ".tmp";
  std::ofstream(tmp) << "{\"keys\":[" << absl::StrJoin(keys, ",") << "]}\n";
  std::rename(tmp.c_str(), jwks_file_.c_str());
}

std::string TestTokens::Mint(const TokenSpec& spec) const {
  const absl::Time now = absl::Now();
  const std::string header =
      absl::StrCat("{\"alg\":", Quoted(spec.header_alg.empty() ? spec.alg : spec.header_alg),
                   spec.typ.empty() ? "" : absl::StrCat(",\"typ\":", Quoted(spec.typ)),
                   ",\"kid\":", Quoted(spec.kid.empty() ? Kid(spec.alg) : spec.kid), "}");
  std::vector<std::string> roles;
  for (const auto& r : spec.roles) roles.push_back(Quoted(r));
  std::string payload =
      absl::StrCat("{\"sub\":", Quoted(spec.subject), ",\"iss\":", Quoted(spec.issuer),
                   ",\"aud\":", Quoted(spec.audience), ",\"iat\":", absl::ToUnixSeconds(now),
                   ",\"exp\":", absl::ToUnixSeconds(now + spec.expires_in), ",\"roles\":[",
                   absl::StrJoin(roles, ","), "]");
  if (spec.not_before != absl::ZeroDuration()) {
    absl::StrAppend(&payload, ",\"nbf\":", absl::ToUnixSeconds(now + spec.not_before));
  }
  payload += "}";
  const std::string input = absl::StrCat(B64(header), ".", B64(payload));
  std::string sig;
  if (spec.alg == "ES256") {
    sig = EcdsaDerToRaw(Sign(keys_->ec.get(), EVP_sha256(), input));
  } else if (spec.alg == "RS256") {
    sig = Sign(keys_->rsa.get(), EVP_sha256(), input);
  } else {
    sig = Sign(keys_->ed.get(), nullptr, input);
  }
  return absl::StrCat(input, ".", B64(sig));
}

std::string TestTokens::Mint(const std::string& subject) const {
  TokenSpec spec;
  spec.subject = subject;
  return Mint(spec);
}

std::string TestTokens::Bearer(const std::string& subject) const {
  return absl::StrCat("Bearer ", Mint(subject));
}

const TestTokens& SharedTestTokens() {
  static const auto* tokens = new TestTokens;
  return *tokens;
}

}  // namespace ulticode::testing
