// RFC 9162 hashing and proofs, and C2SP signed notes and checkpoints: known
// answers from RFC 6962's reference tests, every proof of every tree up to
// 40 leaves verifies, and every change to a proof, leaf, index, size or root
// is refused. (An independent implementation checks the same encodings:
// tests/interop, Go's golang.org/x/mod/sumdb.)
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/crypto/crypto.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "common/tlog/stored.h"
#include "common/tlog/witnessing.h"
#include "gtest/gtest.h"

namespace ulticode::tlog {
namespace {

std::string Hex(const Hash& h) { return absl::BytesToHexString(ToBytes(h)); }

std::vector<Hash> Leaves(int n) {
  std::vector<Hash> out;
  for (int i = 0; i < n; ++i) out.push_back(LeafHash("leaf " + std::to_string(i)));
  return out;
}

// The eight leaves of certificate-transparency's reference tests and the
// roots of their first 1..8.
TEST(MerkleTest, KnownAnswers) {
  const std::vector<std::string> data = {"",
                                         "00",
                                         "10",
                                         "2021",
                                         "3031",
                                         "40414243",
                                         "5051525354555657",
                                         "606162636465666768696a6b6c6d6e6f"};
  const char* roots[] = {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                         "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
                         "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
                         "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                         "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
                         "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
                         "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
                         "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};
  std::vector<Hash> leaves;
  for (size_t i = 0; i < data.size(); ++i) {
    leaves.push_back(LeafHash(absl::HexStringToBytes(data[i])));
    EXPECT_EQ(Hex(RootOf(leaves)), roots[i]) << "size " << i + 1;
  }
  EXPECT_EQ(Hex(EmptyRoot()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(MerkleTest, EveryInclusionProofVerifiesAndNoAlteredOneDoes) {
  for (int n = 1; n <= 40; ++n) {
    const std::vector<Hash> leaves = Leaves(n);
    const Hash root = RootOf(leaves);
    for (int i = 0; i < n; ++i) {
      auto proof = InclusionProof(i, leaves);
      ASSERT_TRUE(proof.ok());
      ASSERT_TRUE(VerifyInclusion(i, n, leaves[i], *proof, root).ok()) << n << " " << i;
      EXPECT_FALSE(VerifyInclusion(i, n, LeafHash("other"), *proof, root).ok());
      if (n > 1) EXPECT_FALSE(VerifyInclusion((i + 1) % n, n, leaves[i], *proof, root).ok());
      for (size_t p = 0; p < proof->size(); ++p) {
        auto bad = *proof;
        bad[p][0] ^= 1;
        EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], bad, root).ok());
      }
      if (!proof->empty()) {
        auto shorter = *proof;
        shorter.pop_back();
        EXPECT_FALSE(VerifyInclusion(i, n, leaves[i], shorter, root).ok());
      }
    }
    EXPECT_EQ(InclusionProof(n, leaves).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// A range of consecutive leaves and the proofs of its two ends lead to
// the root exactly when every leaf is the tree's: each leaf of the range
// changed, moved or claimed at another place is caught, and a proof hash
// changed is caught unless its subtree lies inside the range (computed
// from the leaves, never read). Seeded: ULTICODE_TLOG_SEED.
TEST(MerkleTest, ARangeAndItsEndsProofsLeadToTheRootOnlyWithTheTreesLeaves) {
  const char* env = std::getenv("ULTICODE_TLOG_SEED");
  const uint32_t seed = env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10))
                                       : std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("ULTICODE_TLOG_SEED=", seed));
  for (int round = 0; round < 400; ++round) {
    const uint64_t n = std::uniform_int_distribution<uint64_t>(1, round < 200 ? 40 : 1100)(rng);
    const std::vector<Hash> leaves = Leaves(static_cast<int>(n));
    const Hash root = RootOf(leaves);
    const uint64_t a = std::uniform_int_distribution<uint64_t>(0, n - 1)(rng);
    const uint64_t b = std::uniform_int_distribution<uint64_t>(a + 1, n)(rng);
    const std::vector<Hash> range(leaves.begin() + a, leaves.begin() + b);
    const std::vector<Hash> first = *InclusionProof(a, leaves),
                            last = *InclusionProof(b - 1, leaves);
    const std::string at = absl::StrCat("size ", n, " range ", a, "..", b);
    auto r = RootFromRange(a, n, range, first, last);
    ASSERT_TRUE(r.ok()) << at << ": " << r.status();
    ASSERT_EQ(*r, root) << at;
    // A leaf changed, or two swapped.
    std::vector<Hash> changed = range;
    const size_t i = std::uniform_int_distribution<size_t>(0, range.size() - 1)(rng);
    changed[i][std::uniform_int_distribution<int>(0, 31)(rng)] ^= 1;
    r = RootFromRange(a, n, changed, first, last);
    EXPECT_TRUE(!r.ok() || *r != root) << at << " leaf " << a + i;
    if (range.size() > 1) {
      std::swap(changed[i], changed[(i + 1) % range.size()]);
      changed[i] = range[(i + 1) % range.size()];
      changed[(i + 1) % range.size()] = range[i];
      r = RootFromRange(a, n, changed, first, last);
      EXPECT_TRUE(!r.ok() || *r != root) << at << " swapped at " << a + i;
    }
    // The same leaves claimed one place later (or earlier), with the proofs
    // of that place.
    if (b < n) {
      r = RootFromRange(a + 1, n, range, *InclusionProof(a + 1, leaves),
                        *InclusionProof(b, leaves));
      EXPECT_TRUE(!r.ok() || *r != root) << at << " shifted";
    }
    // A hash of either proof changed.
    for (int which = 0; which < 2; ++which) {
      std::vector<Hash> bad_first = first, bad_last = last;
      std::vector<Hash>& bad = which == 0 ? bad_first : bad_last;
      if (bad.empty()) continue;
      const size_t p = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
      bad[p][0] ^= 1;
      r = RootFromRange(a, n, range, bad_first, bad_last);
      if (r.ok() && *r == root) {
        // Only a sibling inside the range may go unread: the range's
        // leaves are then both sides of it.
        const uint64_t end = which == 0 ? a : b - 1;
        EXPECT_TRUE(InclusionProofLength(end, n) == bad.size()) << at;
        EXPECT_GT(range.size(), 1u) << at << ": a changed proof hash was ignored";
      }
    }
    // Proofs that do not fit the tree.
    if (!first.empty()) {
      std::vector<Hash> shorter = first;
      shorter.pop_back();
      EXPECT_FALSE(RootFromRange(a, n, range, shorter, last).ok()) << at;
    }
  }
  EXPECT_FALSE(RootFromRange(5, 5, Leaves(1), {}, {}).ok());
  EXPECT_FALSE(RootFromRange(0, 5, {}, {}, {}).ok());
}

TEST(MerkleTest, EveryConsistencyProofVerifiesAndNoAlteredOneDoes) {
  const std::vector<Hash> all = Leaves(40);
  for (int n = 1; n <= 40; ++n) {
    const auto second = absl::MakeSpan(all).subspan(0, n);
    const Hash second_root = RootOf(second);
    for (int m = 1; m <= n; ++m) {
      const Hash first_root = RootOf(absl::MakeSpan(all).subspan(0, m));
      auto proof = ConsistencyProof(m, second);
      ASSERT_TRUE(proof.ok());
      ASSERT_TRUE(VerifyConsistency(m, n, first_root, second_root, *proof).ok()) << m << " " << n;
      if (m == n) continue;
      EXPECT_FALSE(VerifyConsistency(m, n, LeafHash("x"), second_root, *proof).ok());
      EXPECT_FALSE(VerifyConsistency(m, n, first_root, LeafHash("x"), *proof).ok());
      for (size_t p = 0; p < proof->size(); ++p) {
        auto bad = *proof;
        bad[p][31] ^= 0x80;
        EXPECT_FALSE(VerifyConsistency(m, n, first_root, second_root, bad).ok()) << m << " " << n;
      }
    }
  }
  // A fork: the same size twice with different roots is never consistent.
  EXPECT_FALSE(VerifyConsistency(5, 5, LeafHash("a"), LeafHash("b"), {}).ok());
}

TEST(NoteTest, SignedCheckpointOpensOnlyWithItsKeyAndItsText) {
  auto key = crypto::SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  auto signer = NoteSigner::Create("audit.example/log", *key);
  ASSERT_TRUE(signer.ok()) << signer.status();
  Checkpoint c{"audit.example/log", 13, RootOf(Leaves(13)), {}};
  const std::string text = CheckpointText(c);
  auto note = signer->Sign(text);
  ASSERT_TRUE(note.ok());
  auto verifier = NoteVerifier::Parse(signer->VerifierKey());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  auto opened = OpenNote(*note, {*verifier});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, text);
  auto parsed = ParseCheckpoint(*opened);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, c);

  std::string altered = *note;
  altered[altered.find("13")] = '2';  // the size
  EXPECT_EQ(OpenNote(altered, {*verifier}).status().code(), absl::StatusCode::kFailedPrecondition);
  auto other = crypto::SigningKey::Generate();
  auto stranger = NoteSigner::Create("audit.example/log", *other);
  EXPECT_EQ(OpenNote(*note, {*NoteVerifier::Parse(stranger->VerifierKey())}).status().message(),
            "note: no signature by a known key");
}

TEST(NoteTest, MalformedKeysAndCheckpointsNameWhatIsWrong) {
  auto key = crypto::SigningKey::Generate();
  EXPECT_FALSE(NoteSigner::Create("has space", *key).ok());
  EXPECT_FALSE(NoteSigner::Create("a+b", *key).ok());
  const std::string vkey = NoteSigner::Create("log", *key)->VerifierKey();
  std::string wrong_id = vkey;
  wrong_id[4] = wrong_id[4] == '0' ? '1' : '0';
  EXPECT_EQ(NoteVerifier::Parse(wrong_id).status().message(),
            "verifier key: the key id does not match name and key");
  EXPECT_FALSE(NoteVerifier::Parse("log+abc+AAAA").ok());
  EXPECT_EQ(*VerifierKeyOf("log", key->public_key()), vkey);
  EXPECT_EQ(VerifierKeyOf("a b", key->public_key()).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* text :
       {"log\n", "log\n012\nAAAA\n", "log\n-1\nAAAA\n", "\n1\nAAAA\n", "log\n5 \nAAAA\n",
        "log\n+5\nAAAA\n", "log\n1\nnot base64\n", "log\n1\nAAAA\n"}) {
    EXPECT_EQ(ParseCheckpoint(text).status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// One row, one encoding: every truncation, a byte more, another version or
// an oversized length is refused with its reason.
TEST(LeafTest, OneEncodingPerRow) {
  const LeafV1 leaf{"auth", "01a23577-d926-7479-a052-93d79727c5ff", "0123456789abcdef",
                    std::string(64, 's'),
                    std::string("\x0a\x24"
                                "env\0elope",
                                12)};
  const std::string bytes = EncodeLeaf(leaf);
  EXPECT_EQ(bytes.size(), 1 + 5 * 4 + 4 + 36 + 16 + 64 + 12);
  auto decoded = DecodeLeaf(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, leaf);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(DecodeLeaf(bytes.substr(0, n)).status().code(), absl::StatusCode::kInvalidArgument)
        << n;
  }
  EXPECT_EQ(DecodeLeaf(bytes + "x").status().message(), "leaf: 1 bytes after the envelope");
  std::string v2 = bytes;
  v2[0] = 0x02;
  EXPECT_EQ(DecodeLeaf(v2).status().message(), "leaf: not a version 1 leaf");
  std::string huge = bytes;
  huge[1] = 0x7f;  // the owner's length
  EXPECT_NE(DecodeLeaf(huge).status().message().find("over 262144"), std::string::npos);
}

// A log grown in batches of random sizes stores each node once, and its
// roots and proofs, read from the stored nodes alone, equal the RFC 9162
// ones computed from all the leaves; reading a node that was never stored is
// an error, never a wrong hash.
TEST(StoredTreeTest, BatchedAppendsGiveTheSameRootsAndProofs) {
  const std::vector<Hash> all = Leaves(100);
  absl::flat_hash_map<NodeId, Hash> stored;
  size_t reads = 0;
  const NodeReader read = [&](const NodeId& id) -> absl::StatusOr<Hash> {
    ++reads;
    auto it = stored.find(id);
    if (it == stored.end()) {
      return absl::NotFoundError(absl::StrCat("node ", id.level, "/", id.index));
    }
    return it->second;
  };
  std::mt19937 rng(7);
  uint64_t size = 0;
  while (size < all.size()) {
    const uint64_t batch = std::min<uint64_t>(1 + rng() % 9, all.size() - size);
    auto nodes = NodesToAppend(size, absl::MakeConstSpan(all).subspan(size, batch), read);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    for (const auto& [id, h] : *nodes) {
      ASSERT_TRUE(stored.emplace(id, h).second) << "node stored twice";
    }
    size += batch;
    const auto tree = absl::MakeConstSpan(all).subspan(0, size);
    auto root = StoredRoot(size, read);
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(*root, RootOf(tree)) << size;
    for (uint64_t i = 0; i < size; ++i) {
      ASSERT_EQ(*StoredInclusionProof(i, size, read), *InclusionProof(i, tree)) << i << " " << size;
    }
    for (uint64_t m = 1; m <= size; ++m) {
      ASSERT_EQ(*StoredConsistencyProof(m, size, read), *ConsistencyProof(m, tree))
          << m << " " << size;
    }
  }
  EXPECT_EQ(stored.size(), 100u + 50 + 25 + 12 + 6 + 3 + 1);  // a node per complete subtree
  reads = 0;
  ASSERT_TRUE(StoredInclusionProof(37, 100, read).ok());
  EXPECT_LE(reads, 30u) << "a proof reads O(log n) nodes";
  EXPECT_EQ(StoredRoot(101, read).status().code(), absl::StatusCode::kNotFound);
}

// The bytes in base64 at the end of a signature line.
std::string SignatureBytes(absl::string_view line) {
  absl::ConsumeSuffix(&line, "\n");
  std::string out;
  EXPECT_TRUE(absl::Base64Unescape(line.substr(line.rfind(' ') + 1), &out));
  return out;
}

// c2sp.org/tlog-cosignature: a cosignature line verifies against its own
// checkpoint text, key and time only; the key id hashes type 0x04, so the
// same key as a note key (0x01) has another id; lines by other keys are
// told apart from bad ones.
TEST(CosignatureTest, RoundTripAndEveryChangeRefused) {
  auto key = crypto::SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  auto signer = CosignatureSigner::Create("witness.example/w1", *key);
  ASSERT_TRUE(signer.ok()) << signer.status();
  auto verifier = CosignatureVerifier::Parse(signer->VerifierKey());
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  EXPECT_EQ(verifier->key_id(), signer->key_id());
  EXPECT_EQ(verifier->name(), "witness.example/w1");

  const std::string text = CheckpointText({"audit.example/log", 13, RootOf(Leaves(13)), {}});
  auto line = signer->Cosign(text, 1700000000);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(line->starts_with("\xe2\x80\x94 witness.example/w1 "));
  EXPECT_TRUE(line->ends_with("\n"));
  auto time = verifier->Verify(text, *line);
  ASSERT_TRUE(time.ok()) << time.status();
  EXPECT_EQ(*time, 1700000000u);

  // The line, split from a note like any signature, verifies the same.
  auto note = NoteSigner::Create("audit.example/log", *key)->Sign(text);
  auto split = SplitNoteSignatures(*note + *line);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->signatures.size(), 2u);
  EXPECT_EQ(split->text, text);
  EXPECT_EQ(*verifier->Verify(split->text, split->signatures[1]), 1700000000u);
  EXPECT_EQ(verifier->Verify(text, split->signatures[0]).status().code(),
            absl::StatusCode::kNotFound);

  // Another time: the 8 bytes after the key id.
  std::string sig = SignatureBytes(*line);
  sig[4 + 7] ^= 1;
  const std::string other_time =
      absl::StrCat("\xe2\x80\x94 witness.example/w1 ", absl::Base64Escape(sig), "\n");
  EXPECT_EQ(verifier->Verify(text, other_time).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Another text.
  const std::string other_text = CheckpointText({"audit.example/log", 14, RootOf(Leaves(14)), {}});
  EXPECT_EQ(verifier->Verify(other_text, *line).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Another key under the same name.
  auto other_key = crypto::SigningKey::Generate();
  auto other = CosignatureVerifier::Parse(
      CosignatureSigner::Create("witness.example/w1", *other_key)->VerifierKey());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->Verify(text, *line).status().code(), absl::StatusCode::kNotFound);
  // Malformed lines and texts.
  EXPECT_EQ(verifier->Verify(text, "witness.example/w1 AAAA").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(verifier->Verify("", *line).status().code(), absl::StatusCode::kInvalidArgument);
  sig.pop_back();
  EXPECT_EQ(
      verifier
          ->Verify(text, absl::StrCat("\xe2\x80\x94 witness.example/w1 ", absl::Base64Escape(sig)))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(CosignatureTest, KeyIdHashesType04AndOtherTypesAreRefused) {
  auto key = crypto::SigningKey::Generate();
  ASSERT_TRUE(key.ok());
  const std::string raw = key->public_key().raw();
  auto signer = CosignatureSigner::Create("w", *key);
  ASSERT_TRUE(signer.ok());
  EXPECT_EQ(signer->key_id(), KeyIdOf("w", 0x04, raw));
  EXPECT_NE(signer->key_id(), NoteKeyId("w", raw));

  // A verifier key whose id was computed with 0x01 is not this key's.
  const std::string b64 = absl::Base64Escape(std::string(1, 0x04) + raw);
  const std::string id01 = absl::StrFormat("%08x", NoteKeyId("w", raw));
  EXPECT_EQ(CosignatureVerifier::Parse(absl::StrCat("w+", id01, "+", b64)).status().message(),
            "verifier key: the key id does not match name and key");
  // A note key (type 0x01) is not a witness key, and a witness key is not a
  // note key.
  auto note_signer = NoteSigner::Create("w", *key);
  EXPECT_EQ(CosignatureVerifier::Parse(note_signer->VerifierKey()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NoteVerifier::Parse(signer->VerifierKey()).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A line carrying the 0x01 id, signed correctly, is not by this key.
  const std::string text = CheckpointText({"log", 1, LeafHash("a"), {}});
  const std::string line = *signer->Cosign(text, 5);
  const std::string with_01 =
      SignatureLine("w", NoteKeyId("w", raw), SignatureBytes(line).substr(4));
  auto verifier = CosignatureVerifier::Parse(signer->VerifierKey());
  ASSERT_TRUE(verifier.ok());
  EXPECT_EQ(verifier->Verify(text, with_01).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*verifier->Verify(text, line), 5u);
}

TEST(NoteTest, SplitNoteSignaturesKeepsTextAndLines) {
  auto split = SplitNoteSignatures("a\nb\n\n\xe2\x80\x94 k AAAA\n\xe2\x80\x94 j BBBB\n");
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->text, "a\nb\n");
  EXPECT_EQ(split->signatures,
            (std::vector<std::string>{"\xe2\x80\x94 k AAAA", "\xe2\x80\x94 j BBBB"}));
  EXPECT_EQ(SplitNoteSignatures("a\n").status().message(),
            "note: no empty line before the signatures");
  EXPECT_EQ(SplitNoteSignatures("a\n\n").status().message(), "note: no signature lines");
}

// Proof items carry the leaf's key id and seal: they survive encoding, and
// an item missing any part, or with a seal that is not base64, is refused.
TEST(WitnessingTest, ProofsRoundTripWithKeyIdAndSeal) {
  const std::vector<LeafProof> proofs = {
      {"01a23577-d926-7479-a052-93d79727c5ff",
       7,
       {LeafHash("a"), LeafHash("b")},
       "0123456789abcdef",
       std::string("\x01seal\0bytes:,", 15)},
      {"01a23577-d926-7479-a052-93d79727c600", 0, {}, "fedcba9876543210", "s"}};
  auto decoded = DecodeProofs(EncodeProofs(proofs));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, proofs);
  const std::string one = EncodeProofs({proofs[0]});
  for (const std::string& bad :
       {one.substr(0, one.rfind(':')), one + ":x", one.substr(0, one.rfind(':') + 1),
        one.substr(0, one.rfind(':') + 1) + "!!", absl::StrCat(one, ",")}) {
    EXPECT_EQ(DecodeProofs(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ulticode::tlog
