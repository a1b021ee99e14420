// The offline check of a log export (docs/transparency-log.md, "Export"):
// everything an auditor can prove about the log from its export, its keys
// and optionally a checkpoint they already hold. An export is a directory:
//
//   checkpoint              the newest checkpoint note (the bytes of
//                           checkpoints/<its size>); its size is the export's
//   checkpoints/<size>      every checkpoint the log signed up to that size:
//                           the log's signed note, then any witness
//                           cosignature lines
//   tile/<L>/<N>[.p/<W>]    the log's stored hashes of the tree of the
//                           export's size (tiles.h)
//   entries/<N>[.p/<W>]     leaves start .. size - 1 in entry bundles
//                           (tiles.h); a leaf the exporter could not read is
//                           empty
//   start                   optional: the first exported leaf, a multiple of
//                           256 (0 without); the leaves before it count with
//                           their stored hashes, which the roots vouch for
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crypto/key_directory.h"
#include "common/seal/seal.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/note.h"

namespace ulticode::verify {

struct Keys {
  std::vector<tlog::NoteVerifier> log;  // the log's keys: a signature by any one counts
  crypto::KeyDirectory owners;          // the owners' event keys: party "auth", "app", "admin"
  // The witness policy: a checkpoint is witnessed when at least
  // `witness_quorum` of these keys cosigned it (0: every one of them).
  std::vector<tlog::CosignatureVerifier> witnesses;
  size_t witness_quorum = 0;
};

enum class BreakKind {
  kModified,
  kDeleted,
  kInserted,
  kReordered,
  kTruncated,
  kRolledBack,
  kForked,
  kBadSignature,
  kUnknownKey,
  kMalformed,
  // A witness's cosignature of a larger checkpoint is older than its
  // cosignature of a smaller one: it cosigned two histories.
  kWitnessTimeReversed,
};
// "modified", "deleted", ..., "forked checkpoint", "bad signature", ...
absl::string_view BreakKindName(BreakKind kind);

struct Break {
  BreakKind kind = BreakKind::kMalformed;
  // A leaf index; for a checkpoints/ file the size it signs; for a trusted
  // checkpoint that does not verify, or the history cut short below it,
  // the export's size.
  uint64_t index = 0;
  std::string detail;
};

struct Report {
  uint64_t size = 0;            // the size of `checkpoint`
  uint64_t start = 0;           // the first exported leaf (file "start"; 0 without)
  uint64_t leaves_checked = 0;  // leaves read from the entry bundles
  uint64_t checkpoints = 0;     // checkpoints/ files with a valid log signature
  uint64_t cosignatures = 0;    // verified cosignatures by keys.witnesses
  // The witness policy: keys.witnesses' size and the quorum applied, and the
  // size of the newest checkpoint that a quorum cosigned (0: none). Leaves
  // [witnessed_size, size) are not witnessed yet.
  size_t witness_keys = 0;
  size_t witness_quorum = 0;
  uint64_t witnessed_size = 0;
  size_t views_checked = 0;  // witness views the export agrees with
  // The break with the smallest index; at one index, the first the checks
  // find (checkpoints, leaves, stored tree, roots, trusted checkpoint).
  std::optional<Break> first_break;
};

// Checks the export in `dir`. `trusted`: a checkpoint note the auditor
// already holds (signed by one of keys.log), or none. Everything wrong in
// the export is a Break in the report; an error status means only that `dir`
// is not a readable directory.
//
// The checks:
//  - checkpoints: each one's file name is its size, it carries a valid
//    signature by one of keys.log, all have one origin, every cosignature
//    by keys.witnesses verifies, and `checkpoint` is the newest (behind a
//    larger one the log signed: rolled back);
//  - leaves: every bundle is there and holds its width of leaves; each leaf
//    decodes, is sealed over its envelope by a key of keys.owners of its
//    owner's party, its envelope's event id and owner are the leaf's, and
//    no event id comes twice;
//  - the stored tree: the leaves' hashes equal the stored level-0 hashes
//    (the first difference named modified, deleted, inserted or reordered)
//    and every stored higher hash is the one the leaves give;
//  - roots: each checkpoint's root is the root of that many exported leaves;
//  - the trusted checkpoint, if any: the export reaches its size and gives
//    its root;
//  - each witness view: signed by the log, cosigned by the key of
//    keys.witnesses of that witness's name, and, like a trusted checkpoint,
//    reached by the export with the same root (a view larger than the
//    export is a truncated or rolled back log, or an export older than
//    what the witness saw; another root is a split view);
//  - witnesses: per witness key, cosignature times do not run backwards as
//    the checkpoints grow; witnessed_size is the newest checkpoint that a
//    quorum of keys.witnesses cosigned (the caller tells a witnessed export
//    from one whose tail is not yet witnessed).
// OK when `leaf`'s seal shows its envelope in a bundle signed by a key of
// `owners` of the leaf's owner's party: NOT_FOUND for a key not in the
// directory, PERMISSION_DENIED for another party's key,
// FAILED_PRECONDITION for a seal that does not decode or verify. `seals`
// (thread-safe) remembers verified bundles: one Ed25519 verification a
// bundle, however many of its leaves are checked.
absl::Status CheckLeafSignature(const tlog::LeafV1& leaf, const crypto::KeyDirectory& owners,
                                seal::Verifier& seals);

// The first thing wrong with leaf `index` on its own: its seal
// (CheckLeafSignature), and its envelope's event id and owner against the
// leaf's. Nullopt when it holds.
std::optional<Break> LeafBreak(const tlog::LeafV1& leaf, uint64_t index,
                               const crypto::KeyDirectory& owners, seal::Verifier& seals);

// A witness's own view of the log, as the witness served it
// (ulticode.outbox.v1.LogWitness): the checkpoint note it holds, with its
// cosignature.
struct WitnessView {
  std::string witness;  // its name: the name of its key in Keys::witnesses
  std::string note;
};

absl::StatusOr<Report> CheckExport(const std::string& dir, const Keys& keys,
                                   const std::optional<std::string>& trusted,
                                   const std::vector<WitnessView>& views = {});

}  // namespace ulticode::verify
