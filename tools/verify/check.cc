#include "tools/verify/check.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/tiles.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::verify {
namespace {

namespace fs = std::filesystem;
using tlog::Hash;

// Entry bundles read, and their leaves checked in parallel, at a time.
constexpr uint64_t kBundlesPerBatch = 16;

struct Problem {
  BreakKind kind;
  std::string detail;
};

// NOT_FOUND when `path` is not a regular file that can be opened.
absl::StatusOr<std::string> ReadFile(const fs::path& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!fs::is_regular_file(path, ec) || !in.is_open()) {
    return absl::NotFoundError("missing or not a readable file");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A size written the one way a checkpoint writes it: digits, no leading zero.
bool ParseSize(absl::string_view text, uint64_t* size) {
  return !text.empty() && text.find_first_not_of("0123456789") == absl::string_view::npos &&
         (text.size() == 1 || text[0] != '0') && absl::SimpleAtoi(text, size);
}

// The note split once a signature by one of `log` verifies. INVALID_ARGUMENT
// for a malformed note, FAILED_PRECONDITION when a known key's signature does
// not verify, NOT_FOUND when no known key signed it. (tlog::OpenNote gives
// the last two one code.)
absl::StatusOr<tlog::SplitNote> OpenLogNote(absl::string_view note,
                                            const std::vector<tlog::NoteVerifier>& log) {
  ASSIGN_OR_RETURN(tlog::SplitNote split, tlog::SplitNoteSignatures(note));
  bool known = false;
  for (const std::string& line : split.signatures) {
    ASSIGN_OR_RETURN(const tlog::NoteSignature sig, tlog::ParseSignatureLine(line));
    for (const tlog::NoteVerifier& v : log) {
      if (v.name() != sig.name || v.key_id() != sig.key_id) continue;
      if (!v.Verify(split.text, sig.signature)) {
        return absl::FailedPreconditionError(
            absl::StrCat("the signature by log key ", sig.name, " does not verify"));
      }
      known = true;
    }
  }
  if (!known) return absl::NotFoundError("no signature by a log key");
  return split;
}

BreakKind KindOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
      return BreakKind::kBadSignature;
    case absl::StatusCode::kNotFound:
      return BreakKind::kUnknownKey;
    default:
      return BreakKind::kMalformed;
  }
}

// The names of audit::OwnerName (this library does not link the audit one).
absl::string_view OwnerName(audit::v1::Owner owner) {
  switch (owner) {
    case audit::v1::OWNER_AUTH:
      return "auth";
    case audit::v1::OWNER_APP:
      return "app";
    case audit::v1::OWNER_ADMIN:
      return "admin";
    default:
      return "";
  }
}

struct LeafResult {
  Hash hash{};
  std::string event_id;  // empty unless the leaf decodes
  std::optional<Problem> problem;
};

// The first thing wrong with a leaf on its own.
std::optional<Problem> LeafProblem(const tlog::LeafV1& leaf, const crypto::KeyDirectory& owners,
                                   seal::Verifier& seals) {
  if (const absl::Status signed_by = CheckLeafSignature(leaf, owners, seals); !signed_by.ok()) {
    const BreakKind kind = absl::IsNotFound(signed_by)           ? BreakKind::kUnknownKey
                           : absl::IsPermissionDenied(signed_by) ? BreakKind::kBadSignature
                                                                 : BreakKind::kModified;
    return Problem{kind, std::string(signed_by.message())};
  }
  audit::v1::AuditEvent event;
  if (!event.ParseFromString(leaf.envelope)) {
    return Problem{BreakKind::kModified, "the envelope is not an AuditEvent"};
  }
  if (event.event_id() != leaf.event_id) {
    return Problem{BreakKind::kModified, absl::StrCat("the envelope's event id ", event.event_id(),
                                                      " is not the leaf's ", leaf.event_id)};
  }
  if (OwnerName(event.owner()) != leaf.owner) {
    return Problem{BreakKind::kModified,
                   absl::StrCat("the envelope's owner \"", OwnerName(event.owner()),
                                "\" is not the leaf's \"", leaf.owner, "\"")};
  }
  return std::nullopt;
}

LeafResult CheckLeaf(absl::string_view bytes, const crypto::KeyDirectory& owners,
                     seal::Verifier& seals) {
  LeafResult result;
  result.hash = tlog::LeafHash(bytes);
  if (bytes.empty()) {
    result.problem =
        Problem{BreakKind::kDeleted, "the leaf is empty: the exporter found no row with its index"};
    return result;
  }
  auto leaf = tlog::DecodeLeaf(bytes);
  if (!leaf.ok()) {
    result.problem = Problem{BreakKind::kModified,
                             absl::StrCat("does not decode (", leaf.status().message(), ")")};
    return result;
  }
  result.event_id = leaf->event_id;
  result.problem = LeafProblem(*leaf, owners, seals);
  return result;
}

// CheckLeaf of every leaf, on every core (one Ed25519 verification a
// bundle, shared by the workers, and a few hashes a leaf).
std::vector<LeafResult> CheckLeaves(const std::vector<std::string>& leaves,
                                    const crypto::KeyDirectory& owners) {
  std::vector<LeafResult> results(leaves.size());
  const size_t workers = std::max(1u, std::thread::hardware_concurrency());
  seal::Verifier seals;
  {
    std::vector<std::jthread> pool;  // joins at the end of this block
    for (size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&, w] {
        for (size_t i = w; i < leaves.size(); i += workers) {
          results[i] = CheckLeaf(leaves[i], owners, seals);
        }
      });
    }
  }
  return results;
}

// The roots of the perfect subtrees of the leaves appended so far, left to
// right (a compact range): O(1) amortized per leaf, O(log n) per root.
class CompactRange {
 public:
  void Append(const Hash& leaf) {
    hashes_.push_back(leaf);
    for (uint64_t n = size_++; (n & 1) == 1; n >>= 1) {
      const Hash right = hashes_.back();
      hashes_.pop_back();
      hashes_.back() = tlog::NodeHash(hashes_.back(), right);
    }
  }
  // MTH of the leaves appended: RFC 9162 splits off the largest perfect
  // subtree first, so the subtrees fold from the right.
  Hash Root() const {
    if (hashes_.empty()) return tlog::EmptyRoot();
    Hash root = hashes_.back();
    for (size_t k = hashes_.size() - 1; k > 0; --k) root = tlog::NodeHash(hashes_[k - 1], root);
    return root;
  }

 private:
  uint64_t size_ = 0;
  std::vector<Hash> hashes_;
};

// The parents of `nodes` one tile height up: the root of each complete
// group of 256.
std::vector<Hash> TileParents(const std::vector<Hash>& nodes) {
  std::vector<Hash> parents;
  for (size_t i = 0; i + tlog::kTileWidth <= nodes.size(); i += tlog::kTileWidth) {
    parents.push_back(tlog::RootOf(absl::MakeConstSpan(nodes).subspan(i, tlog::kTileWidth)));
  }
  return parents;
}

// The first index after `from` where `hashes` holds `h`.
std::optional<uint64_t> FindAfter(const std::vector<Hash>& hashes, uint64_t from, const Hash& h) {
  for (uint64_t i = from + 1; i < hashes.size(); ++i) {
    if (hashes[i] == h) return i;
  }
  return std::nullopt;
}

class Checker {
 public:
  Checker(fs::path dir, const Keys& keys) : dir_(std::move(dir)), keys_(keys) {}

  Report Run(const std::optional<std::string>& trusted, const std::vector<WitnessView>& views) {
    if (ReadNewest() && ReadStart()) {
      CheckCheckpoints();
      ReadLeaves();
      CompareStoredTree();
      CheckRoots();
      if (trusted.has_value()) CheckTrusted(*trusted);
      for (const WitnessView& view : views) CheckView(view);
      ApplyWitnessPolicy();
    }
    report_.leaves_checked = leaves_.size() > start_ ? leaves_.size() - start_ : 0;
    report_.start = start_;
    return report_;
  }

  // An export of leaves from `start` (a multiple of 256; file "start"):
  // the hashes of the leaves before it are the stored ones (level-0
  // tiles), which the checkpoints' roots then vouch for.
  bool ReadStart() {
    if (!fs::exists(dir_ / "start")) return true;
    auto text = ReadFile(dir_ / "start");
    uint64_t start = 0;
    if (!text.ok() || !ParseSize(absl::StripSuffix(*text, "\n"), &start) ||
        start % tlog::kTileWidth != 0 || start > size()) {
      Add(BreakKind::kMalformed, 0,
          "start: not a multiple of 256 within the tree (the first exported leaf)");
      return false;
    }
    start_ = start;
    leaves_ = ReadTiles(0, start_);
    return leaves_.size() == start_;
  }

 private:
  // Keeps the break with the smallest index; at one index, the first found.
  void Add(BreakKind kind, uint64_t index, std::string detail) {
    if (!report_.first_break.has_value() || index < report_.first_break->index) {
      report_.first_break = Break{kind, index, std::move(detail)};
    }
  }
  uint64_t size() const { return newest_.size; }

  // `checkpoint`: the export's size and origin.
  bool ReadNewest() {
    auto note = ReadFile(dir_ / "checkpoint");
    if (!note.ok()) {
      Add(BreakKind::kMalformed, 0, absl::StrCat("checkpoint: ", note.status().message()));
      return false;
    }
    auto split = tlog::SplitNoteSignatures(*note);
    auto checkpoint = split.ok() ? tlog::ParseCheckpoint(split->text) : split.status();
    if (!checkpoint.ok()) {
      Add(BreakKind::kMalformed, 0, absl::StrCat("checkpoint: ", checkpoint.status().message()));
      return false;
    }
    newest_ = *std::move(checkpoint);
    newest_note_ = *std::move(note);
    report_.size = newest_.size;
    return true;
  }

  void CheckCheckpoints() {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_ / "checkpoints", ec)) {
      files.push_back(e.path());
    }
    if (ec) {
      Add(BreakKind::kMalformed, size(), absl::StrCat("checkpoints/: ", ec.message()));
      return;
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) CheckCheckpointFile(file);
    CheckNewestIsLargest();
  }

  void CheckCheckpointFile(const fs::path& file) {
    const std::string name = absl::StrCat("checkpoints/", file.filename().string());
    uint64_t named = 0;
    const bool canonical = ParseSize(file.filename().string(), &named);
    if (!canonical) named = 0;  // the breaks below, before the note's size is known
    auto note = ReadFile(file);
    if (!note.ok()) {
      Add(BreakKind::kMalformed, named, absl::StrCat(name, ": ", note.status().message()));
      return;
    }
    auto split = OpenLogNote(*note, keys_.log);
    if (!split.ok()) {
      Add(KindOf(split.status()), named, absl::StrCat(name, ": ", split.status().message()));
      return;
    }
    auto checkpoint = tlog::ParseCheckpoint(split->text);
    if (!checkpoint.ok()) {
      Add(BreakKind::kMalformed, named, absl::StrCat(name, ": ", checkpoint.status().message()));
      return;
    }
    if (!canonical || named != checkpoint->size) {
      Add(BreakKind::kMalformed, checkpoint->size,
          absl::StrCat(name, " holds the checkpoint of size ", checkpoint->size));
      return;
    }
    ++report_.checkpoints;
    CheckCosignatures(*split, name, named);
    if (!LogKeyNamed(checkpoint->origin)) {
      // Signed with the log's key under another name: another log.
      Add(BreakKind::kForked, named,
          absl::StrCat(name, " is of origin \"", checkpoint->origin,
                       "\", which names none of the log's keys"));
      return;
    }
    if (checkpoint->origin != newest_.origin) {
      Add(BreakKind::kForked, named,
          absl::StrCat(name, " is of origin \"", checkpoint->origin, "\", checkpoint of \"",
                       newest_.origin, "\""));
      return;
    }
    signed_.emplace(named, std::move(*checkpoint));
    if (named >= largest_) {
      largest_ = named;
      largest_note_ = *std::move(note);
    }
  }

  // Lines by names or key ids not in keys.witnesses are not cosignatures
  // this auditor can check (the log's own signature is one of them).
  bool LogKeyNamed(absl::string_view origin) const {
    for (const tlog::NoteVerifier& key : keys_.log) {
      if (key.name() == origin) return true;
    }
    return false;
  }

  void CheckCosignatures(const tlog::SplitNote& note, const std::string& name, uint64_t size) {
    for (const std::string& line : note.signatures) {
      for (size_t w = 0; w < keys_.witnesses.size(); ++w) {
        auto time = keys_.witnesses[w].Verify(note.text, line);
        if (time.ok()) {
          ++report_.cosignatures;
          cosigned_[size].insert(w);
          times_[w].emplace(size, *time);
        } else if (time.status().code() != absl::StatusCode::kNotFound) {
          Add(BreakKind::kBadSignature, size, absl::StrCat(name, ": ", time.status().message()));
        }
      }
    }
  }

  // The newest checkpoint (of the export's history: its root matched the
  // leaves) that a quorum of witnesses cosigned; and per witness, times
  // that never run backwards as the checkpoints it cosigned grow.
  void ApplyWitnessPolicy() {
    const size_t keys = keys_.witnesses.size();
    report_.witness_keys = keys;
    report_.witness_quorum =
        keys_.witness_quorum == 0 ? keys : std::min(keys_.witness_quorum, keys);
    for (const auto& [w, by_size] : times_) {
      uint64_t latest = 0, latest_size = 0;
      for (const auto& [checkpoint_size, time] : by_size) {
        if (time < latest) {
          Add(BreakKind::kWitnessTimeReversed, checkpoint_size,
              absl::StrCat("witness ", keys_.witnesses[w].name(), " cosigned checkpoints/",
                           checkpoint_size, " at ", time,
                           ", before its cosignature of checkpoints/", latest_size, " at ", latest,
                           ": it cosigned two histories"));
          break;
        }
        latest = time;
        latest_size = checkpoint_size;
      }
    }
    if (report_.witness_quorum == 0) {
      report_.witnessed_size = size();
      return;
    }
    for (const auto& [checkpoint_size, witnesses] : cosigned_) {
      if (witnesses.size() >= report_.witness_quorum && signed_.contains(checkpoint_size) &&
          checkpoint_size <= size()) {
        report_.witnessed_size = std::max(report_.witnessed_size, checkpoint_size);
      }
    }
  }

  // `checkpoint` must be the newest signed checkpoint. One the log signed
  // for more leaves than the export has means the log went back.
  void CheckNewestIsLargest() {
    if (largest_note_ == newest_note_) return;
    if (!largest_note_.empty() && largest_ > size()) {
      Add(BreakKind::kRolledBack, size(),
          absl::StrCat("the log signed checkpoints/", largest_, ", but its checkpoint is of ",
                       size(), " leaves: rolled back"));
      return;
    }
    Add(BreakKind::kMalformed, size(),
        largest_note_.empty()
            ? "checkpoints/ holds no checkpoint signed by the log"
            : absl::StrCat("checkpoint is not checkpoints/", largest_, ", the newest signed one"));
  }

  // Reads the bundles in order until one is missing or malformed; leaves_
  // gets the hash of every leaf read.
  void ReadLeaves() {
    std::vector<std::string> batch;
    for (uint64_t n = start_ / tlog::kTileWidth; n * tlog::kTileWidth < size(); ++n) {
      const uint64_t width = std::min(tlog::kTileWidth, size() - n * tlog::kTileWidth);
      const std::string path = tlog::EntryBundlePath(n, width);
      auto leaves = ReadBundle(path, width);
      if (!leaves.ok()) {
        AddBundleBreak(n, path, leaves.status());
        break;
      }
      for (std::string& leaf : *leaves) batch.push_back(std::move(leaf));
      if ((n + 1) % kBundlesPerBatch == 0) {
        AddLeaves(batch);
        batch.clear();
      }
    }
    AddLeaves(batch);
  }

  absl::StatusOr<std::vector<std::string>> ReadBundle(const std::string& path, uint64_t width) {
    ASSIGN_OR_RETURN(const std::string bytes, ReadFile(dir_ / path));
    auto leaves = tlog::DecodeEntryBundle(bytes);
    if (!leaves.ok()) return absl::InvalidArgumentError(leaves.status().message());
    if (leaves->size() != width) {
      return absl::InvalidArgumentError(
          absl::StrCat("holds ", leaves->size(), " leaves, not ", width));
    }
    return leaves;
  }

  // A missing bundle is where the export was cut short when the last bundle
  // is missing too; any other unreadable bundle is a malformed export.
  void AddBundleBreak(uint64_t n, const std::string& path, const absl::Status& status) {
    const uint64_t first = n * tlog::kTileWidth;
    const uint64_t last = (size() - 1) / tlog::kTileWidth;
    const std::string last_path = tlog::EntryBundlePath(last, size() - last * tlog::kTileWidth);
    std::error_code ec;
    if (status.code() == absl::StatusCode::kNotFound && !fs::exists(dir_ / last_path, ec)) {
      Add(BreakKind::kTruncated, first,
          absl::StrCat("the export ends before leaf ", first, " of ", size(), ": ",
                       n == last ? path : absl::StrCat(path, " and ", last_path), " missing"));
      return;
    }
    Add(BreakKind::kMalformed, first, absl::StrCat(path, ": ", status.message()));
  }

  void AddLeaves(const std::vector<std::string>& leaves) {
    for (LeafResult& r : CheckLeaves(leaves, keys_.owners)) {
      const uint64_t i = leaves_.size();
      leaves_.push_back(r.hash);
      if (r.problem.has_value()) {
        Add(r.problem->kind, i, absl::StrCat("leaf ", i, ": ", r.problem->detail));
      }
      if (r.event_id.empty()) continue;
      auto [seen, added] = event_ids_.emplace(std::move(r.event_id), i);
      if (!added && !r.problem.has_value()) {
        Add(BreakKind::kInserted, i,
            absl::StrCat("leaf ", i, ": event ", seen->first, " is already leaf ", seen->second));
      }
    }
  }

  // The stored hashes of tile level `level` for nodes [0, count) of tree
  // level 8 * level; a missing or malformed tile is a break at the first
  // leaf it covers, and the hashes end before it.
  std::vector<Hash> ReadTiles(int level, uint64_t count) {
    const int shift = tlog::kTileHeight * level;
    const uint64_t nodes = size() >> shift;  // this level's nodes in the export's tree
    std::vector<Hash> hashes;
    for (uint64_t n = 0; n * tlog::kTileWidth < count; ++n) {
      const uint64_t width = std::min(tlog::kTileWidth, nodes - n * tlog::kTileWidth);
      const std::string path = tlog::TilePath(level, n, width);
      auto bytes = ReadFile(dir_ / path);
      auto tile = bytes.ok() ? tlog::DecodeTile(*bytes, width) : bytes.status();
      if (!tile.ok()) {
        Add(BreakKind::kMalformed, (n * tlog::kTileWidth) << shift,
            absl::StrCat(path, ": ", tile.status().message()));
        break;
      }
      hashes.insert(hashes.end(), tile->begin(), tile->end());
    }
    hashes.resize(std::min<uint64_t>(hashes.size(), count));
    return hashes;
  }

  // The leaves against the log's stored tree: level 0 names the first leaf
  // that differs; the levels above must then be the hashes of the leaves
  // below the first difference.
  void CompareStoredTree() {
    const std::vector<Hash> stored = ReadTiles(0, leaves_.size());
    uint64_t same = 0;
    while (same < stored.size() && stored[same] == leaves_[same]) ++same;
    if (same < stored.size()) {
      ClassifyDifference(same, stored);
      tree_finding_ = same;
    }
    std::vector<Hash> nodes(leaves_.begin(), leaves_.begin() + same);
    for (int level = 1;; ++level) {
      nodes = TileParents(nodes);
      if (nodes.empty()) break;
      CompareLevel(level, nodes);
    }
  }

  // Leaf i is the first whose hash is not the stored one: where each of the
  // two went tells a swap, a removal, an addition or a change apart.
  void ClassifyDifference(uint64_t i, const std::vector<Hash>& stored) {
    const std::optional<uint64_t> stored_moved = FindAfter(leaves_, i, stored[i]);
    const std::optional<uint64_t> leaf_was = FindAfter(stored, i, leaves_[i]);
    if (stored_moved.has_value() && leaf_was.has_value()) {
      Add(BreakKind::kReordered, i,
          absl::StrCat("the log's leaf ", i, " is the export's leaf ", *stored_moved,
                       ", and the export's leaf ", i, " is the log's leaf ", *leaf_was));
    } else if (leaf_was.has_value()) {
      Add(BreakKind::kDeleted, i,
          absl::StrCat("the log's leaf ", i, " is not in the export; the export's leaf ", i,
                       " is the log's leaf ", *leaf_was));
    } else if (stored_moved.has_value()) {
      Add(BreakKind::kInserted, i,
          absl::StrCat("the export's leaf ", i, " is not in the log; the log's leaf ", i,
                       " is the export's leaf ", *stored_moved));
    } else {
      Add(BreakKind::kModified, i,
          absl::StrCat("the export's leaf ", i, " is not the log's leaf ", i,
                       ", and neither is found further on in the other: the leaf was changed"));
    }
  }

  void CompareLevel(int level, const std::vector<Hash>& computed) {
    const std::vector<Hash> stored = ReadTiles(level, computed.size());
    const int shift = tlog::kTileHeight * level;
    for (uint64_t m = 0; m < stored.size(); ++m) {
      if (stored[m] == computed[m]) continue;
      const uint64_t first = m << shift;
      Add(BreakKind::kModified, first,
          absl::StrCat("stored tree hash tile ", level, "/", m / tlog::kTileWidth, " entry ",
                       m % tlog::kTileWidth, " was rewritten: it is not the hash of leaves [",
                       first, ", ", (m + 1) << shift, ")"));
      tree_finding_ = std::min(tree_finding_.value_or(first), first);
      return;
    }
  }

  // Each signed checkpoint's root against the root of that many exported
  // leaves, all taken in one pass. Every root comes from the same leaves, so
  // checkpoints whose roots match are consistent with each other by
  // construction: no consistency proof is needed between them.
  void CheckRoots() {
    CompactRange range;
    uint64_t appended = 0;
    uint64_t matched = 0;  // the size of the last checkpoint whose root matched
    for (const auto& [checkpoint_size, checkpoint] : signed_) {
      if (checkpoint_size > leaves_.size()) break;  // a break below it says why
      while (appended < checkpoint_size) range.Append(leaves_[appended++]);
      if (range.Root() == checkpoint.root) {
        matched = checkpoint_size;
        continue;
      }
      // A difference from the stored tree below this size explains it.
      if (tree_finding_.has_value() && *tree_finding_ < checkpoint_size) continue;
      Add(BreakKind::kForked, checkpoint_size,
          absl::StrCat("checkpoints/", checkpoint_size,
                       ": the checkpoint's root is not the root of the exported leaves; the last "
                       "checkpoint below it that matches is of ",
                       matched,
                       " leaves, so (unless the log's own checkpoints disagree) the "
                       "change lies in leaves [",
                       matched, ", ", checkpoint_size, ")"));
    }
  }

  void CheckTrusted(const std::string& note) {
    auto split = OpenLogNote(note, keys_.log);
    if (split.ok())
      CheckHeld("the trusted checkpoint", split->text);
    else
      Add(KindOf(split.status()), size(),
          absl::StrCat("the trusted checkpoint: ", split.status().message()));
  }

  // What a witness says it holds: the log's note with the witness's own
  // cosignature, then the same comparison as a trusted checkpoint.
  void CheckView(const WitnessView& view) {
    const std::string label = absl::StrCat("witness ", view.witness, "'s checkpoint");
    auto split = OpenLogNote(view.note, keys_.log);
    if (!split.ok()) {
      Add(KindOf(split.status()), size(), absl::StrCat(label, ": ", split.status().message()));
      return;
    }
    bool cosigned = false;
    for (const tlog::CosignatureVerifier& key : keys_.witnesses) {
      if (key.name() != view.witness) continue;
      for (const std::string& line : split->signatures) {
        cosigned = cosigned || key.Verify(split->text, line).ok();
      }
    }
    if (!cosigned) {
      Add(BreakKind::kBadSignature, size(),
          absl::StrCat(label, " carries no valid cosignature by a witness key named \"",
                       view.witness, "\""));
      return;
    }
    if (CheckHeld(label, split->text)) ++report_.views_checked;
  }

  // A checkpoint held outside the export (`text`, its signature checked):
  // the export must reach its size with its root. False on a break.
  bool CheckHeld(const std::string& label, const std::string& text) {
    auto checkpoint = tlog::ParseCheckpoint(text);
    if (!checkpoint.ok()) {
      Add(BreakKind::kMalformed, size(), absl::StrCat(label, ": ", checkpoint.status().message()));
      return false;
    }
    const uint64_t t = checkpoint->size;
    if (checkpoint->origin != newest_.origin) {
      Add(BreakKind::kForked, t,
          absl::StrCat(label, " is of origin \"", checkpoint->origin, "\", the export of \"",
                       newest_.origin, "\""));
    } else if (t > size()) {
      Add(BreakKind::kTruncated, size(),
          absl::StrCat("the log shows ", size(), " leaves, ", label, " ", t,
                       ": rolled back or truncated (or the export is older than it)"));
    } else if (t <= leaves_.size() &&
               tlog::RootOf(absl::MakeConstSpan(leaves_).subspan(0, t)) != checkpoint->root) {
      Add(BreakKind::kForked, t,
          absl::StrCat(label, ": its root is not the root of the export's first ", t,
                       " leaves (another history)"));
    } else {
      return true;
    }
    return false;
  }

  const fs::path dir_;
  const Keys& keys_;
  Report report_;
  tlog::Checkpoint newest_;
  std::string newest_note_;
  std::map<uint64_t, tlog::Checkpoint> signed_;  // by size: signed by the log, of its origin
  uint64_t largest_ = 0;                         // the largest of them, and its note
  std::string largest_note_;
  uint64_t start_ = 0;        // the first exported leaf
  std::vector<Hash> leaves_;  // the hashes of the leaves from leaf 0 (stored ones below start_)
  absl::flat_hash_map<std::string, uint64_t> event_ids_;
  std::optional<uint64_t> tree_finding_;  // the first leaf that differs from the stored tree
  // Valid cosignatures: by checkpoint size, the witnesses (keys_.witnesses
  // indexes); by witness, each cosigned size and its time.
  std::map<uint64_t, std::set<size_t>> cosigned_;
  std::map<size_t, std::map<uint64_t, uint64_t>> times_;
};

}  // namespace

std::optional<Break> LeafBreak(const tlog::LeafV1& leaf, uint64_t index,
                               const crypto::KeyDirectory& owners, seal::Verifier& seals) {
  std::optional<Problem> problem = LeafProblem(leaf, owners, seals);
  if (!problem) return std::nullopt;
  return Break{problem->kind, index, std::move(problem->detail)};
}

absl::Status CheckLeafSignature(const tlog::LeafV1& leaf, const crypto::KeyDirectory& owners,
                                seal::Verifier& seals) {
  const crypto::KeyDirectory::Entry* entry = owners.Find(leaf.key_id);
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("sealed by key \"", leaf.key_id, "\", not in the key directory"));
  }
  if (entry->party != leaf.owner) {
    return absl::PermissionDeniedError(absl::StrCat("sealed by key ", leaf.key_id, " of ",
                                                    entry->party, ", but the leaf's owner is \"",
                                                    leaf.owner, "\""));
  }
  if (absl::Status s = seals.Verify(entry->key, leaf.envelope, leaf.seal); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the owner's seal over the envelope does not verify: ", s.message()));
  }
  return absl::OkStatus();
}

absl::string_view BreakKindName(BreakKind kind) {
  switch (kind) {
    case BreakKind::kModified:
      return "modified";
    case BreakKind::kDeleted:
      return "deleted";
    case BreakKind::kInserted:
      return "inserted";
    case BreakKind::kReordered:
      return "reordered";
    case BreakKind::kTruncated:
      return "truncated";
    case BreakKind::kRolledBack:
      return "rolled back";
    case BreakKind::kForked:
      return "forked checkpoint";
    case BreakKind::kBadSignature:
      return "bad signature";
    case BreakKind::kUnknownKey:
      return "unknown key";
    case BreakKind::kMalformed:
      return "malformed";
    case BreakKind::kWitnessTimeReversed:
      return "cosignature time reversed";
  }
  return "unknown break";
}

absl::StatusOr<Report> CheckExport(const std::string& dir, const Keys& keys,
                                   const std::optional<std::string>& trusted,
                                   const std::vector<WitnessView>& views) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("export ", dir, ": not a readable directory (", ec.message(), ")"));
  }
  return Checker(dir, keys).Run(trusted, views);
}

}  // namespace ulticode::verify
