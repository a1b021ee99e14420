#include "common/jwt/jwt.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/crypto/openssl_ptr.h"
#include "common/log/log.h"
#include "common/text/text.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace ulticode::jwt {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(absl::StrCat("invalid token: ", why));
}

absl::StatusOr<Struct> ParseJson(absl::string_view json) {
  Struct out;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &out);
  if (!status.ok()) return absl::InvalidArgumentError("not a JSON object");
  return out;
}

// The string member `name`, or "" when absent or not a string.
std::string Str(const Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it != s.fields().end() && it->second.kind_case() == Value::kStringValue
             ? it->second.string_value()
             : "";
}

bool Has(const Struct& s, const std::string& name) { return s.fields().contains(name); }

absl::StatusOr<std::string> B64(const Struct& jwk, const std::string& name) {
  std::string out;
  if (!absl::WebSafeBase64Unescape(Str(jwk, name), &out) || out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not base64url"));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<EVP_PKEY>> FromParams(const char* type, OSSL_PARAM_BLD* bld) {
  crypto::OsslParamPtr params(OSSL_PARAM_BLD_to_param(bld));
  crypto::EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* key = nullptr;
  if (params == nullptr || ctx == nullptr || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid ", type, " public key"));
  }
  return std::shared_ptr<EVP_PKEY>(crypto::EvpPkeyPtr(key));
}

absl::StatusOr<Key> KeyFromJwk(const Struct& jwk) {
  Key k;
  k.kid = Str(jwk, "kid");
  if (k.kid.empty()) return absl::InvalidArgumentError("\"kid\" is missing");
  const std::string kty = Str(jwk, "kty"), crv = Str(jwk, "crv"), alg = Str(jwk, "alg");
  if (kty == "OKP" && crv == "Ed25519") {
    k.alg = "EdDSA";
    ASSIGN_OR_RETURN(const std::string x, B64(jwk, "x"));
    ASSIGN_OR_RETURN(crypto::VerifyKey vk, crypto::VerifyKey::FromRaw(x));
    k.key = crypto::EvpPkeyPtr(EVP_PKEY_new_raw_public_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(x.data()), x.size()));
  } else if (kty == "EC" && crv == "P-256") {
    k.alg = "ES256";
    ASSIGN_OR_RETURN(const std::string x, B64(jwk, "x"));
    ASSIGN_OR_RETURN(const std::string y, B64(jwk, "y"));
    if (x.size() != 32 || y.size() != 32) {
      return absl::InvalidArgumentError("P-256 coordinates must be 32 bytes");
    }
    const std::string point = absl::StrCat("\x04", x, y);
    crypto::OsslParamBldPtr bld(OSSL_PARAM_BLD_new());
    OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
    OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                     point.size());
    ASSIGN_OR_RETURN(k.key, FromParams("EC", bld.get()));
  } else if (kty == "RSA") {
    k.alg = "RS256";
    ASSIGN_OR_RETURN(const std::string n, B64(jwk, "n"));
    ASSIGN_OR_RETURN(const std::string e, B64(jwk, "e"));
    uint64_t exponent = 0;
    for (char c : e) exponent = (exponent << 8) | static_cast<unsigned char>(c);
    if (e.empty() || e.size() > 8 || exponent < 3 || exponent % 2 == 0) {
      return absl::InvalidArgumentError(
          "RSA exponent must be odd, at least 3 and at most 64 bits (e = 1 verifies anything)");
    }
    crypto::BignumPtr bn_n(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()), n.size(), nullptr));
    crypto::BignumPtr bn_e(
        BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()), e.size(), nullptr));
    crypto::OsslParamBldPtr bld(OSSL_PARAM_BLD_new());
    OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get());
    OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get());
    ASSIGN_OR_RETURN(k.key, FromParams("RSA", bld.get()));
    if (EVP_PKEY_get_bits(k.key.get()) < 2048) {
      return absl::InvalidArgumentError("RSA keys must have 2048 bits or more");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "kty \"", absl::CHexEscape(kty.substr(0, 16)), "\" crv \"",
        absl::CHexEscape(crv.substr(0, 16)), "\" is not supported (OKP/Ed25519, EC/P-256, RSA)"));
  }
  if (k.key == nullptr) return absl::InvalidArgumentError("not a valid public key");
  if (!alg.empty() && alg != k.alg) {
    return absl::InvalidArgumentError(absl::StrCat("\"alg\" ", absl::CHexEscape(alg.substr(0, 16)),
                                                   " does not fit a ", kty, " key (", k.alg, ")"));
  }
  return k;
}

// JWS ES256 signatures are r || s (32 bytes each); OpenSSL wants DER.
absl::StatusOr<std::string> EcdsaRawToDer(absl::string_view raw) {
  if (raw.size() != 64) return absl::InvalidArgumentError("ES256 signature is not 64 bytes");
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  crypto::EcdsaSigPtr sig(ECDSA_SIG_new());
  crypto::BignumPtr r(BN_bin2bn(bytes, 32, nullptr));
  crypto::BignumPtr s(BN_bin2bn(bytes + 32, 32, nullptr));
  if (sig == nullptr || r == nullptr || s == nullptr ||
      ECDSA_SIG_set0(sig.get(), r.get(), s.get()) != 1) {
    return absl::InternalError("out of memory");
  }
  // ECDSA_SIG_set0 succeeded: sig owns r and s now.
  (void)r.release();
  (void)s.release();
  unsigned char* der = nullptr;
  const int len = i2d_ECDSA_SIG(sig.get(), &der);
  const crypto::OpensslBytesPtr owned_der(der);
  if (len <= 0) return absl::InvalidArgumentError("bad ES256 signature");
  return std::string(reinterpret_cast<const char*>(der), static_cast<size_t>(len));
}

bool VerifySignature(const Key& key, absl::string_view signing_input, absl::string_view sig) {
  std::string der;
  if (key.alg == "ES256") {
    auto converted = EcdsaRawToDer(sig);
    if (!converted.ok()) return false;
    der = *std::move(converted);
    sig = der;
  } else if (key.alg == "EdDSA" && sig.size() != 64) {
    return false;
  }
  crypto::EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  const EVP_MD* md = key.alg == "EdDSA" ? nullptr : EVP_sha256();
  if (ctx == nullptr || EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key.key.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                          reinterpret_cast<const unsigned char*>(signing_input.data()),
                          signing_input.size()) == 1;
}

absl::StatusOr<absl::Time> TimeClaim(const Struct& claims, const std::string& name, bool required) {
  auto it = claims.fields().find(name);
  if (it == claims.fields().end()) {
    if (required) return Unauthenticated(absl::StrCat("\"", name, "\" claim is missing"));
    return absl::InfinitePast();
  }
  if (it->second.kind_case() != Value::kNumberValue || !(it->second.number_value() > 0) ||
      it->second.number_value() > 253402300799.0) {
    return Unauthenticated(absl::StrCat("\"", name, "\" claim is not a NumericDate"));
  }
  return absl::FromUnixSeconds(static_cast<int64_t>(it->second.number_value()));
}

bool AudienceMatches(const Struct& claims, const std::string& audience) {
  auto it = claims.fields().find("aud");
  if (it == claims.fields().end()) return false;
  if (it->second.kind_case() == Value::kStringValue) return it->second.string_value() == audience;
  if (it->second.kind_case() != Value::kListValue) return false;
  for (const Value& v : it->second.list_value().values()) {
    if (v.kind_case() == Value::kStringValue && v.string_value() == audience) return true;
  }
  return false;
}

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

absl::StatusOr<Claims> CheckClaims(const Struct& claims, const VerifyOptions& options,
                                   absl::Time now) {
  ASSIGN_OR_RETURN(const absl::Time exp, TimeClaim(claims, "exp", true));
  ASSIGN_OR_RETURN(const absl::Time nbf, TimeClaim(claims, "nbf", false));
  if (now - options.skew >= exp) {
    return Unauthenticated(absl::StrCat("expired at ", Utc(exp)));
  }
  if (now + options.skew < nbf) {
    return Unauthenticated(absl::StrCat("not valid before ", Utc(nbf)));
  }
  if (Str(claims, "iss") != options.issuer) {
    return Unauthenticated(absl::StrCat("wrong issuer (want \"", options.issuer, "\")"));
  }
  if (!AudienceMatches(claims, options.audience)) {
    return Unauthenticated(absl::StrCat("wrong audience (want \"", options.audience, "\")"));
  }
  Claims out;
  out.subject = Str(claims, "sub");
  if (absl::Status s =
          text::Check("sub", out.subject, {.min_chars = 1, .max_chars = 128, .identifier = true});
      !s.ok()) {
    return Unauthenticated(absl::StrCat("\"sub\" claim: ", s.message()));
  }
  if (auto it = claims.fields().find("roles"); it != claims.fields().end()) {
    if (it->second.kind_case() != Value::kListValue) {
      return Unauthenticated("\"roles\" claim is not an array of strings");
    }
    for (const Value& v : it->second.list_value().values()) {
      if (v.kind_case() != Value::kStringValue) {
        return Unauthenticated("\"roles\" claim is not an array of strings");
      }
      out.roles.push_back(v.string_value());
    }
  }
  out.expires_at = exp;
  return out;
}

}  // namespace

absl::StatusOr<Jwks> Jwks::Parse(absl::string_view json) {
  auto doc = ParseJson(json);
  if (!doc.ok()) return absl::InvalidArgumentError("JWKS is not a JSON object");
  auto it = doc->fields().find("keys");
  if (it == doc->fields().end() || it->second.kind_case() != Value::kListValue) {
    return absl::InvalidArgumentError("JWKS has no \"keys\" array");
  }
  Jwks jwks;
  int index = 0;
  for (const Value& v : it->second.list_value().values()) {
    if (v.kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(absl::StrCat("JWKS key ", index, " is not an object"));
    }
    auto key = KeyFromJwk(v.struct_value());
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("JWKS key ", index, " (kid \"",
                                                     Str(v.struct_value(), "kid"),
                                                     "\"): ", key.status().message()));
    }
    const std::string kid = key->kid;
    if (!jwks.keys_.emplace(kid, *std::move(key)).second) {
      return absl::InvalidArgumentError(absl::StrCat("JWKS kid \"", kid, "\" appears twice"));
    }
    ++index;
  }
  return jwks;
}

absl::StatusOr<Jwks> Jwks::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("JWKS file ", path, " cannot be read"));
  std::stringstream buf;
  buf << in.rdbuf();
  auto jwks = Parse(buf.str());
  if (!jwks.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", jwks.status().message()));
  return jwks;
}

const Key* Jwks::Find(absl::string_view kid) const {
  auto it = keys_.find(kid);
  return it == keys_.end() ? nullptr : &it->second;
}

std::string Jwks::Describe() const {
  std::vector<std::string> parts;
  for (const auto& [kid, k] : keys_) parts.push_back(absl::StrCat(kid, ":", k.alg));
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ",");
}

namespace {

// Unpadded base64url in its one canonical spelling (no padding, whitespace
// or non-zero trailing bits): decoding and encoding again gives it back.
bool CanonicalBase64Url(absl::string_view in, std::string* out) {
  if (!absl::WebSafeBase64Unescape(in, out)) return false;
  std::string again;
  absl::WebSafeBase64Escape(*out, &again);
  return again == in;
}

// RFC 7519 section 5.1: "typ", when present, says what the JWS is; only a
// JWT (RFC 9068's at+jwt included) is a token here.
bool IsJwtTyp(absl::string_view typ) {
  const std::string t = absl::AsciiStrToLower(typ);
  return t == "jwt" || t == "at+jwt" || t == "application/jwt" || t == "application/at+jwt";
}

}  // namespace

absl::StatusOr<Claims> Verify(absl::string_view token, const Jwks& keys,
                              const VerifyOptions& options, absl::Time now) {
  if (token.size() > 8192) return Unauthenticated("longer than 8192 bytes");
  std::vector<absl::string_view> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3) return Unauthenticated("not a compact JWS (header.payload.signature)");
  std::string header_json, payload_json, signature;
  if (!CanonicalBase64Url(parts[0], &header_json) || !CanonicalBase64Url(parts[1], &payload_json) ||
      !CanonicalBase64Url(parts[2], &signature)) {
    return Unauthenticated("a part is not base64url in its one canonical, unpadded spelling");
  }
  auto header = ParseJson(header_json);
  if (!header.ok()) return Unauthenticated("header is not a JSON object");
  const std::string alg = Str(*header, "alg");
  if (alg != "EdDSA" && alg != "ES256" && alg != "RS256") {
    return Unauthenticated(absl::StrCat("algorithm \"", absl::CHexEscape(alg.substr(0, 16)),
                                        "\" is not accepted (EdDSA, ES256, RS256)"));
  }
  if (Has(*header, "crit")) return Unauthenticated("\"crit\" header parameters are not supported");
  if (Has(*header, "typ") && !IsJwtTyp(Str(*header, "typ"))) {
    return Unauthenticated(absl::StrCat(
        "\"typ\" \"", absl::CHexEscape(Str(*header, "typ").substr(0, 32)), "\" is not a JWT"));
  }
  const std::string kid = Str(*header, "kid");
  const Key* key = keys.Find(kid);
  if (key == nullptr) {
    return Unauthenticated(
        absl::StrCat("unknown key id \"", absl::CHexEscape(kid.substr(0, 64)), "\""));
  }
  if (key->alg != alg) {
    return Unauthenticated(absl::StrCat("key \"", kid, "\" is for ", key->alg, ", not ", alg));
  }
  const size_t signed_len = parts[0].size() + 1 + parts[1].size();
  if (!VerifySignature(*key, token.substr(0, signed_len), signature)) {
    return Unauthenticated("bad signature");
  }
  auto claims = ParseJson(payload_json);
  if (!claims.ok()) return Unauthenticated("payload is not a JSON object");
  return CheckClaims(*claims, options, now);
}

}  // namespace ulticode::jwt
