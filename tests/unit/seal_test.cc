// Bundle seals (common/seal/seal.h): every message of a bundle has a seal
// that verifies alone with the public key, and nothing else verifies: not
// another message, another key, another position, a changed byte of the
// seal, or a seal a cache hit would wave through. Generated from a seed
// (ULTICODE_SEAL_SEED; each failure prints it), so a run can be repeated.
#include "common/seal/seal.h"

#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/crypto.h"
#include "common/tlog/merkle.h"
#include "gtest/gtest.h"

namespace ulticode {
namespace {

crypto::SigningKey NewKey() {
  auto key = crypto::SigningKey::Generate();
  EXPECT_TRUE(key.ok()) << key.status();
  return *std::move(key);
}

uint64_t Seed() {
  const char* s = std::getenv("ULTICODE_SEAL_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : std::random_device{}();
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

std::vector<absl::string_view> Views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

TEST(SealTest, HmacSha256MatchesRfc4231) {
  // RFC 4231 test case 2.
  EXPECT_EQ(absl::BytesToHexString(crypto::HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(crypto::ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(crypto::ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(crypto::ConstantTimeEquals("abc", "abcd"));
}

TEST(SealTest, DerivedSecretsDependOnKeyAndLabelAndAreNotTheKey) {
  const crypto::SigningKey a = NewKey(), b = NewKey();
  auto a1 = a.DeriveSecret("one"), a1again = a.DeriveSecret("one"), a2 = a.DeriveSecret("two"),
       b1 = b.DeriveSecret("one");
  ASSERT_TRUE(a1.ok() && a1again.ok() && a2.ok() && b1.ok());
  EXPECT_EQ(a1->size(), 32u);
  EXPECT_EQ(*a1, *a1again);
  EXPECT_NE(*a1, *a2);
  EXPECT_NE(*a1, *b1);
  auto pem = a.PrivatePem();
  ASSERT_TRUE(pem.ok());
  EXPECT_EQ(pem->find(absl::Base64Escape(*a1)), std::string::npos);
}

// The paths built for a whole bundle at once are RFC 9162's PATH for each
// leaf, and lead to MTH.
TEST(SealTest, AllInclusionProofsAreEachLeafsPath) {
  std::mt19937_64 rng(7);
  for (size_t n = 1; n <= 70; ++n) {
    std::vector<tlog::Hash> leaves;
    for (size_t i = 0; i < n; ++i) leaves.push_back(tlog::LeafHash(RandomBytes(rng, 8)));
    auto all = tlog::AllInclusionProofs(leaves);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->root, tlog::RootOf(leaves)) << n;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(all->paths[i], *tlog::InclusionProof(i, leaves)) << n << " " << i;
      EXPECT_EQ(tlog::InclusionProofLength(i, n), all->paths[i].size()) << n << " " << i;
      EXPECT_EQ(*tlog::RootFromInclusion(i, n, leaves[i], all->paths[i]), all->root);
    }
  }
  EXPECT_FALSE(tlog::AllInclusionProofs({}).ok());
}

// The generated check: bundles of random sizes and contents; each seal
// verifies its own message and, after any one change, fails: another
// message of the bundle, a changed message, another key, any one byte of
// the seal changed, the seal cut or extended. A cache hit on the bundle's
// signature never excuses a wrong path.
TEST(SealTest, GeneratedBundlesSealEachMessageAndNothingElse) {
  const uint64_t seed = Seed();
  SCOPED_TRACE(absl::StrCat("ULTICODE_SEAL_SEED=", seed));
  std::mt19937_64 rng(seed);
  const crypto::SigningKey key = NewKey(), other = NewKey();
  seal::Verifier verifier;
  for (int round = 0; round < 40; ++round) {
    const size_t n = round < 4 ? round + 1 : 1 + rng() % 300;
    std::vector<std::string> messages;
    for (size_t i = 0; i < n; ++i) messages.push_back(RandomBytes(rng, rng() % 200));
    auto seals = seal::SealBundle(key, Views(messages));
    ASSERT_TRUE(seals.ok()) << seals.status();
    ASSERT_EQ(seals->size(), n);
    for (size_t i = 0; i < n; ++i) {
      const std::string& s = (*seals)[i];
      ASSERT_TRUE(verifier.Verify(key.public_key(), messages[i], s).ok()) << round << " " << i;
      auto decoded = seal::Decode(s);
      ASSERT_TRUE(decoded.ok());
      EXPECT_EQ(seal::Encode(*decoded), s);
      EXPECT_EQ(decoded->index, i);
      EXPECT_EQ(decoded->size, n);
    }
    const size_t i = rng() % n;
    const std::string& s = (*seals)[i];
    // Another message of the same bundle (whose signature is now known to
    // the cache), unless it has the same bytes.
    const size_t j = rng() % n;
    if (messages[j] != messages[i]) {
      EXPECT_FALSE(verifier.Verify(key.public_key(), messages[j], s).ok()) << round;
    }
    std::string changed = messages[i] + "x";
    EXPECT_FALSE(verifier.Verify(key.public_key(), changed, s).ok()) << round;
    EXPECT_FALSE(verifier.Verify(other.public_key(), messages[i], s).ok()) << round;
    for (int k = 0; k < 12; ++k) {
      std::string bad = s;
      const size_t at = rng() % bad.size();
      bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
      EXPECT_FALSE(verifier.Verify(key.public_key(), messages[i], bad).ok())
          << round << " byte " << at;
    }
    EXPECT_FALSE(verifier.Verify(key.public_key(), messages[i], s.substr(0, s.size() - 1)).ok());
    EXPECT_FALSE(verifier.Verify(key.public_key(), messages[i], s + std::string(1, '\0')).ok());
    // A fresh verifier (nothing remembered) agrees.
    seal::Verifier fresh;
    EXPECT_TRUE(fresh.Verify(key.public_key(), messages[i], s).ok());
  }
}

// A Verifier that saw the bundle sealed knows its signature (the owner's
// witness sharing its dispatcher's), and still refuses what the signature
// does not cover: another message, an altered path, another key.
TEST(SealTest, ASealersVerifierKnowsItsBundlesAndNothingElse) {
  const crypto::SigningKey key = NewKey(), other = NewKey();
  const std::vector<absl::string_view> messages = {"a", "b", "c", "d", "e"};
  seal::Verifier shared;
  const std::vector<std::string> seals = seal::SealBundle(key, messages, &shared).value();
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_TRUE(shared.Verify(key.public_key(), messages[i], seals[i]).ok()) << i;
  }
  EXPECT_EQ(shared.verifications(), 0u) << "the sealer's own bundle is known";
  seal::Verifier fresh;
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_TRUE(fresh.Verify(key.public_key(), messages[i], seals[i]).ok()) << i;
  }
  EXPECT_EQ(fresh.verifications(), 1u) << "one verification for the bundle";
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_FALSE(shared.Verify(key.public_key(), "x", seals[i]).ok()) << i;
    EXPECT_FALSE(shared.Verify(other.public_key(), messages[i], seals[i]).ok()) << i;
    std::string altered = seals[i];
    altered[9] = static_cast<char>(altered[9] ^ 1);  // the first path hash
    EXPECT_FALSE(shared.Verify(key.public_key(), messages[i], altered).ok()) << i;
  }
}

TEST(SealTest, DecodingNamesWhatIsWrong) {
  const crypto::SigningKey key = NewKey();
  const std::vector<std::string> messages = {"a", "b", "c"};
  auto seals = seal::SealBundle(key, Views(messages));
  ASSERT_TRUE(seals.ok());
  std::string s = (*seals)[2];
  std::string version = s;
  version[0] = 0x02;
  EXPECT_NE(seal::Decode(version).status().message().find("version"), std::string::npos);
  std::string index = s;
  index[4] = 3;  // index 3 of 3
  EXPECT_NE(seal::Decode(index).status().message().find("index 3"), std::string::npos);
  std::string size = s;
  size[8] = 0;  // size 0
  EXPECT_NE(seal::Decode(size).status().message().find("size 0"), std::string::npos);
  EXPECT_EQ(seal::Decode("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(seal::SealBundle(key, {}).ok());
}

}  // namespace
}  // namespace ulticode
