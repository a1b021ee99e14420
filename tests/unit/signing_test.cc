// SigningKey::Sign: a signature is 64 bytes that verify, and a key that
// cannot sign gives an error naming what failed, never an empty signature.
//
// The only failure the public API can provoke is a moved-from key; the
// OpenSSL failures (EVP_MD_CTX_new, EVP_DigestSignInit, EVP_DigestSign) do not
// happen with a valid Ed25519 key and share the same return path.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ulticode {
namespace {

using ::testing::HasSubstr;

crypto::SigningKey NewKey() {
  auto key = crypto::SigningKey::Generate();
  EXPECT_TRUE(key.ok()) << key.status();
  return *std::move(key);
}

// Every Ed25519 encoding of a point of small order (with either sign bit):
// such a "public key" verifies forged signatures, so no key file may hold one.
TEST(SigningTest, SmallOrderPublicKeysAreRefused) {
  // Without the check the identity key verifies (R = identity, s = 0) for any
  // message: a skeleton key in a key file.
  std::vector<std::string> small;
  small.push_back(std::string(32, '\0'));                           // 0, order 4
  small.push_back(std::string("\x01", 1) + std::string(31, '\0'));  // identity
  small.push_back(absl::HexStringToBytes(
      "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"));  // order 8
  small.push_back(absl::HexStringToBytes(
      "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"));  // order 8
  for (const char* last : {"ec", "ed", "ee"}) {  // p-1, p, p+1: order 2, 4, 1
    small.push_back(absl::HexStringToBytes(absl::StrCat(last, std::string(60, 'f'), "7f")));
  }
  const size_t n = small.size();
  for (size_t i = 0; i < n; ++i) {
    std::string signed_bit = small[i];
    signed_bit[31] = static_cast<char>(signed_bit[31] | 0x80);
    small.push_back(signed_bit);
  }
  for (const std::string& raw : small) {
    auto key = crypto::VerifyKey::FromRaw(raw);
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument)
        << absl::BytesToHexString(raw);
    EXPECT_NE(key.status().message().find("small order"), std::string::npos) << key.status();
  }
  // A real key still loads.
  EXPECT_TRUE(crypto::VerifyKey::FromRaw(NewKey().public_key().raw()).ok());
}

TEST(SigningTest, SignatureIs64BytesThatVerify) {
  const crypto::SigningKey key = NewKey();
  auto sig = key.Sign("message");
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_EQ(sig->size(), crypto::kEd25519SignatureBytes);
  EXPECT_TRUE(key.public_key().Verify("message", *sig));
  EXPECT_FALSE(key.public_key().Verify("other message", *sig));
}

TEST(SigningTest, AKeyThatCannotSignIsAnErrorNamingIt) {
  crypto::SigningKey key = NewKey();
  const crypto::SigningKey taken = std::move(key);
  auto sig = key.Sign("message");  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(sig.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sig.status().message(), HasSubstr("signing key is empty"));
  EXPECT_TRUE(taken.Sign("message").ok());
}

}  // namespace
}  // namespace ulticode
