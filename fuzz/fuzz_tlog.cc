// The log's parsers on arbitrary bytes: tlog::DecodeLeaf, ParseCheckpoint,
// NoteVerifier::Parse, OpenNote, DecodeEntryBundle (exports), DecodeProofs
// (the proofs an owner is sent) and CosignatureVerifier::Verify.
//
// Input: byte 0 picks the parser (mod 7), the rest is its input.
// Invariants: a leaf, checkpoint or entry bundle that decodes encodes back
// to exactly the input (one encoding each); a note opens only with a
// signature that verifies under the fixed test key, and then its text is a
// prefix of the input; decoded proofs encode to proofs that decode the same;
// no cosignature line verifies under a key that never signed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Verifier();
  Witness();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 7) {
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
  }
  return 0;
}
