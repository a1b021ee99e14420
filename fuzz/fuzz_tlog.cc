// The log's parsers on arbitrary bytes: tlog::DecodeLeaf, ParseCheckpoint,
// NoteVerifier::Parse, OpenNote, DecodeEntryBundle (exports), DecodeProofs
// (the proofs an owner is sent) and CosignatureVerifier::Verify; and
// RootFromRange (how a follower proves a run of rows) on fuzzed ranges,
// leaves and proofs.
//
// Input: byte 0 picks the parser (mod 8), the rest is its input.
// Invariants: a leaf, checkpoint or entry bundle that decodes encodes back
// to exactly the input (one encoding each); a note opens only with a
// signature that verifies under the fixed test key, and then its text is a
// prefix of the input; decoded proofs encode to proofs that decode the same;
// no cosignature line verifies under a key that never signed; a run leads
// to a tree's root only when every leaf of it is the tree's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "common/tlog/tiles.h"
#include "common/tlog/witnessing.h"
#include "fuzz/fuzz_support.h"

using namespace ::ulticode;  // NOLINT

namespace {

const tlog::NoteVerifier& Verifier() {
  static const tlog::NoteVerifier* v = [] {
    auto signer = tlog::NoteSigner::Create("fuzz.log", fuzz::Keys().admin);
    return new tlog::NoteVerifier(*tlog::NoteVerifier::Parse(signer->VerifierKey()));
  }();
  return *v;
}

const tlog::CosignatureVerifier& Witness() {
  static const tlog::CosignatureVerifier* v = [] {
    auto signer = tlog::CosignatureSigner::Create("fuzz.witness", fuzz::Keys().admin);
    return new tlog::CosignatureVerifier(*tlog::CosignatureVerifier::Parse(signer->VerifierKey()));
  }();
  return *v;
}

// A tree of 1..1024 leaves (leaf i hashes "i"), a range of it, leaves for
// the range (the tree's, one changed when the input says) and two proofs
// made of the input's bytes after the first hashes of the true ones.
void RangeOf(const std::string& in) {
  if (in.size() < 6) return;
  const auto u16 = [&](size_t at) {
    return static_cast<uint64_t>(uint8_t(in[at])) << 8 | uint8_t(in[at + 1]);
  };
  const uint64_t n = 1 + u16(0) % 1024, a = u16(2) % n, b = a + 1 + u16(4) % (n - a);
  std::vector<tlog::Hash> tree;
  for (uint64_t i = 0; i < n; ++i) tree.push_back(tlog::LeafHash(std::to_string(i)));
  std::vector<tlog::Hash> leaves(tree.begin() + a, tree.begin() + b);
  std::vector<tlog::Hash> first = *tlog::InclusionProof(a, tree);
  std::vector<tlog::Hash> last = *tlog::InclusionProof(b - 1, tree);
  // The rest of the input: (target, position, byte) triples overwriting a
  // byte of a range leaf (target 0), the first proof (1) or the last (2);
  // a proof may also be cut (target 3, 4).
  for (size_t at = 6; at + 3 <= in.size(); at += 3) {
    const uint8_t target = uint8_t(in[at]) % 5, pos = uint8_t(in[at + 1]),
                  byte = uint8_t(in[at + 2]);
    std::vector<tlog::Hash>& v = target == 0 ? leaves : (target % 2 == 1 ? first : last);
    if (target >= 3) {
      if (!v.empty()) v.resize(pos % v.size());
      continue;
    }
    if (v.empty()) continue;
    tlog::Hash& h = v[pos % v.size()];
    h[byte % 32] ^= static_cast<uint8_t>(byte | 1);
  }
  auto root = tlog::RootFromRange(a, n, leaves, first, last);
  bool all_true = true;
  for (uint64_t i = 0; i < leaves.size(); ++i) all_true = all_true && leaves[i] == tree[a + i];
  FUZZ_CHECK(!root.ok() || *root != tlog::RootOf(tree) || all_true,
             "a run with a leaf not the tree's led to its root");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Verifier();
  Witness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 8) {
    case 0:
      if (auto leaf = tlog::DecodeLeaf(input); leaf.ok()) {
        FUZZ_CHECK(tlog::EncodeLeaf(*leaf) == input, "a leaf with two encodings");
      }
      break;
    case 1:
      if (auto c = tlog::ParseCheckpoint(input); c.ok()) {
        FUZZ_CHECK(tlog::CheckpointText(*c) == input, "a checkpoint with two texts");
      }
      break;
    case 2:
      (void)tlog::NoteVerifier::Parse(input);
      break;
    case 3:
      if (auto text = tlog::OpenNote(input, {Verifier()}); text.ok()) {
        FUZZ_CHECK(input.compare(0, text->size(), *text) == 0, "an opened text not in the note");
      }
      break;
    case 4:
      if (auto leaves = tlog::DecodeEntryBundle(input); leaves.ok()) {
        FUZZ_CHECK(tlog::EncodeEntryBundle(*leaves) == input, "an entry bundle with two encodings");
      }
      break;
    case 5:
      if (auto proofs = tlog::DecodeProofs(input); proofs.ok()) {
        auto again = tlog::DecodeProofs(tlog::EncodeProofs(*proofs));
        FUZZ_CHECK(again.ok() && *again == *proofs, "proofs that do not survive re-encoding");
      }
      break;
    case 6:
      FUZZ_CHECK(!Witness()
                      .Verify("fuzz.log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", input)
                      .ok(),
                 "a cosignature verified that nobody made");
      break;
    case 7:
      RangeOf(input);
      break;
  }
  return 0;
}
