// The offline check of a log export (tools/verify/check.h) over exports
// written here from real keys and signed events: a clean export passes, and
// each way of tampering with one is reported with its kind at its index.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/seal/seal.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/tiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/verify/check.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::verify {
namespace {

namespace fs = std::filesystem;
using tlog::Hash;

constexpr char kOrigin[] = "audit.example/log";
constexpr uint64_t kSize = 600;
// Sizes around the tile edges: a partial tile, a full one, two of level 1.
const std::vector<uint64_t> kCheckpointSizes = {1, 100, 256, 300, 513, kSize};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void WriteAll(const fs::path& path, absl::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Hash> HashesOf(const std::vector<std::string>& leaves) {
  std::vector<Hash> hashes;
  for (const std::string& leaf : leaves) hashes.push_back(tlog::LeafHash(leaf));
  return hashes;
}

Hash RootOfFirst(const std::vector<std::string>& leaves, uint64_t size) {
  return tlog::RootOf(absl::MakeConstSpan(HashesOf(leaves)).subspan(0, size));
}

// A signed leaf of event number `n`.
std::string SignedLeaf(const crypto::SigningKey& key, audit::v1::Owner owner, int n) {
  const std::string owner_name = owner == audit::v1::OWNER_AUTH ? "auth" : "app";
  audit::v1::AuditEvent event;
  event.set_event_id(absl::StrFormat("018f0000-0000-7000-8000-%012d", n));
  event.set_owner(owner);
  event.set_event_type(owner_name + ".user.created");
  event.set_schema_version(1);
  event.mutable_record()->set_audit_id(event.event_id());
  event.mutable_record()->set_action("create_user");
  std::string envelope;
  EXPECT_TRUE(event.SerializeToString(&envelope));
  auto sealed = seal::SealBundle(key, {absl::string_view(envelope)});
  EXPECT_TRUE(sealed.ok());
  return tlog::EncodeLeaf({owner_name, event.event_id(), key.key_id(), (*sealed)[0], envelope});
}

class VerifyCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("verify_check_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto owners = crypto::KeyDirectory::Parse(
        absl::StrCat("auth ", absl::Base64Escape(auth_.public_key().raw()), "\napp ",
                     absl::Base64Escape(app_.public_key().raw()), "\n"));
    ASSERT_TRUE(owners.ok()) << owners.status();
    keys_.owners = *std::move(owners);
    keys_.log.push_back(*tlog::NoteVerifier::Parse(log_signer_.VerifierKey()));
    keys_.witnesses.push_back(*tlog::CosignatureVerifier::Parse(witness_signer_.VerifierKey()));
    leaves_ = Leaves(0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // kSize leaves, by Auth and App in turn, of events first .. first + kSize - 1.
  std::vector<std::string> Leaves(int first) {
    std::vector<std::string> leaves;
    for (int i = 0; i < static_cast<int>(kSize); ++i) {
      leaves.push_back(i % 2 == 0 ? SignedLeaf(auth_, audit::v1::OWNER_AUTH, first + i)
                                  : SignedLeaf(app_, audit::v1::OWNER_APP, first + i));
    }
    return leaves;
  }

  std::string CheckpointNote(const std::vector<std::string>& leaves, uint64_t size,
                             const tlog::NoteSigner& signer) {
    auto note = signer.Sign(tlog::CheckpointText({kOrigin, size, RootOfFirst(leaves, size), {}}));
    EXPECT_TRUE(note.ok());
    return *note;
  }

  // The export of the log whose leaves are `stored` (its tiles and its
  // checkpoints at `sizes`, the last the export's size) with `bundled` in
  // its entry bundles.
  void Write(const std::vector<std::string>& stored, const std::vector<std::string>& bundled,
             const std::vector<uint64_t>& sizes = kCheckpointSizes) {
    const uint64_t size = sizes.back();
    const std::vector<Hash> hashes = HashesOf(stored);
    for (const tlog::TileRef& t : tlog::TilesOf(size)) {
      const int shift = tlog::kTileHeight * t.level;
      std::vector<Hash> tile;
      for (uint64_t e = 0; e < t.width; ++e) {
        const uint64_t node = t.index * tlog::kTileWidth + e;
        tile.push_back(
            tlog::RootOf(absl::MakeConstSpan(hashes).subspan(node << shift, 1u << shift)));
      }
      WriteAll(dir_ / tlog::TilePath(t.level, t.index, t.width), tlog::EncodeTile(tile));
      if (t.level == 0) {
        const auto first = bundled.begin() + t.index * tlog::kTileWidth;
        WriteAll(dir_ / tlog::EntryBundlePath(t.index, t.width),
                 tlog::EncodeEntryBundle({first, first + t.width}));
      }
    }
    for (uint64_t s : sizes) {
      WriteAll(dir_ / "checkpoints" / absl::StrCat(s), CheckpointNote(stored, s, log_signer_));
    }
    WriteAll(dir_ / "checkpoint", CheckpointNote(stored, size, log_signer_));
  }

  Report Check(const std::optional<std::string>& trusted = std::nullopt,
               const std::vector<WitnessView>& views = {}) {
    auto report = CheckExport(dir_.string(), keys_, trusted, views);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : Report{};
  }

  // Appends a cosignature of checkpoints/<size> (and of `checkpoint` when
  // it is that one) by the witness, over `text`.
  void Cosign(uint64_t size, const std::string& text, const tlog::CosignatureSigner* by = nullptr,
              uint64_t time = 0) {
    const fs::path file = dir_ / "checkpoints" / absl::StrCat(size);
    const std::string note = ReadAll(file);
    if (by == nullptr) by = &witness_signer_;
    auto line = by->Cosign(text, time != 0 ? time : 1700000000 + size);
    ASSERT_TRUE(line.ok()) << line.status();
    WriteAll(file, note + *line);
    if (ReadAll(dir_ / "checkpoint") == note) WriteAll(dir_ / "checkpoint", note + *line);
  }

  std::string TextOf(uint64_t size) {
    return tlog::CheckpointText({kOrigin, size, RootOfFirst(leaves_, size), {}});
  }

  crypto::SigningKey auth_ = *crypto::SigningKey::Generate();
  crypto::SigningKey app_ = *crypto::SigningKey::Generate();
  crypto::SigningKey log_key_ = *crypto::SigningKey::Generate();
  crypto::SigningKey witness_ = *crypto::SigningKey::Generate();
  tlog::NoteSigner log_signer_ = *tlog::NoteSigner::Create(kOrigin, log_key_);
  tlog::CosignatureSigner witness_signer_ =
      *tlog::CosignatureSigner::Create("witness.example/w1", witness_);
  crypto::SigningKey witness2_ = *crypto::SigningKey::Generate();
  tlog::CosignatureSigner witness2_signer_ =
      *tlog::CosignatureSigner::Create("witness.example/w2", witness2_);
  Keys keys_;
  fs::path dir_;
  std::vector<std::string> leaves_;
};

#define EXPECT_BREAK(report, kind_, index_)                                                   \
  do {                                                                                        \
    ASSERT_TRUE((report).first_break.has_value());                                            \
    EXPECT_EQ(BreakKindName((report).first_break->kind), BreakKindName(kind_))                \
        << (report).first_break->detail;                                                      \
    EXPECT_EQ((report).first_break->index, uint64_t{index_}) << (report).first_break->detail; \
  } while (0)

TEST_F(VerifyCheckTest, CleanExportPasses) {
  Write(leaves_, leaves_);
  const Report report = Check(CheckpointNote(leaves_, 300, log_signer_));
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.size, kSize);
  EXPECT_EQ(report.leaves_checked, kSize);
  EXPECT_EQ(report.checkpoints, kCheckpointSizes.size());
  EXPECT_EQ(report.cosignatures, 0u);
}

// An export of a range: the bundles from leaf 256 only, and "start".
TEST_F(VerifyCheckTest, ARangeFromAMultipleOf256Verifies) {
  Write(leaves_, leaves_);
  fs::remove(dir_ / tlog::EntryBundlePath(0, tlog::kTileWidth));
  WriteAll(dir_ / "start", "256\n");
  const Report report = Check(CheckpointNote(leaves_, 300, log_signer_));
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.start, 256u);
  EXPECT_EQ(report.leaves_checked, kSize - 256);
}

TEST_F(VerifyCheckTest, ARangeStillCatchesAChangedStoredHashBelowIt) {
  // The hashes before the range are the stored ones: changed, they no
  // longer give the stored hashes above them (nor the checkpoints' roots).
  std::vector<std::string> stored = leaves_;
  stored[3] = leaves_[4];
  Write(leaves_, leaves_);
  const std::vector<Hash> hashes = HashesOf(stored);
  WriteAll(dir_ / tlog::TilePath(0, 0, tlog::kTileWidth),
           tlog::EncodeTile({hashes.begin(), hashes.begin() + tlog::kTileWidth}));
  fs::remove(dir_ / tlog::EntryBundlePath(0, tlog::kTileWidth));
  WriteAll(dir_ / "start", "256\n");
  EXPECT_BREAK(Check(), BreakKind::kModified, 0);
}

TEST_F(VerifyCheckTest, AStartThatIsNotAMultipleOf256IsMalformed) {
  Write(leaves_, leaves_);
  WriteAll(dir_ / "start", "100\n");
  EXPECT_BREAK(Check(), BreakKind::kMalformed, 0);
}

TEST_F(VerifyCheckTest, NotADirectoryIsAnError) {
  EXPECT_FALSE(CheckExport((dir_ / "none").string(), keys_, std::nullopt).ok());
}

TEST_F(VerifyCheckTest, ModifiedEnvelopeByte) {
  std::vector<std::string> bundled = leaves_;
  tlog::LeafV1 leaf = *tlog::DecodeLeaf(bundled[7]);
  leaf.envelope[leaf.envelope.size() - 1] ^= 1;
  bundled[7] = tlog::EncodeLeaf(leaf);
  Write(leaves_, bundled);
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kModified, 7);
  EXPECT_THAT(report.first_break->detail,
              ::testing::StartsWith("leaf 7: the owner's seal over the envelope does not verify"));
}

// A leaf that does not decode, and one whose signed envelope is another
// event's.
TEST_F(VerifyCheckTest, UndecodableOrMismatchedLeafIsModified) {
  std::vector<std::string> bundled = leaves_;
  bundled[3] = "not a leaf";
  Write(leaves_, bundled);
  EXPECT_BREAK(Check(), BreakKind::kModified, 3);

  std::vector<std::string> leaves = leaves_;
  tlog::LeafV1 leaf = *tlog::DecodeLeaf(leaves[12]);
  leaf.event_id = "018f0000-0000-7000-8000-999999999999";
  leaves[12] = tlog::EncodeLeaf(leaf);
  Write(leaves, leaves);
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kModified, 12);
  EXPECT_NE(report.first_break->detail.find("is not the leaf's"), std::string::npos);
}

TEST_F(VerifyCheckTest, EmptyLeafIsDeleted) {
  std::vector<std::string> bundled = leaves_;
  bundled[50] = "";
  Write(leaves_, bundled);
  EXPECT_BREAK(Check(), BreakKind::kDeleted, 50);
}

// The row of leaf 70 deleted and the later ones renumbered down: the
// exporter finds no row for the last index.
TEST_F(VerifyCheckTest, RemovedLeafWithTheRestMovedDownIsDeleted) {
  std::vector<std::string> bundled = leaves_;
  bundled.erase(bundled.begin() + 70);
  bundled.push_back("");
  Write(leaves_, bundled);
  EXPECT_BREAK(Check(), BreakKind::kDeleted, 70);
}

TEST_F(VerifyCheckTest, SignedLeafInsertedWithTheRestMovedUpIsInserted) {
  std::vector<std::string> bundled = leaves_;
  bundled.insert(bundled.begin() + 120, SignedLeaf(auth_, audit::v1::OWNER_AUTH, 9000));
  Write(leaves_, bundled);
  EXPECT_BREAK(Check(), BreakKind::kInserted, 120);
}

TEST_F(VerifyCheckTest, SwappedLeavesAreReordered) {
  std::vector<std::string> bundled = leaves_;
  std::swap(bundled[20], bundled[30]);
  Write(leaves_, bundled);
  EXPECT_BREAK(Check(), BreakKind::kReordered, 20);
}

// A second copy of an event, in the log itself: the tree agrees, the event
// ids do not.
TEST_F(VerifyCheckTest, RepeatedEventIsInserted) {
  std::vector<std::string> leaves = leaves_;
  leaves.insert(leaves.begin() + 40, leaves[5]);
  Write(leaves, leaves);
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kInserted, 40);
  EXPECT_NE(report.first_break->detail.find("is already leaf 5"), std::string::npos);
}

TEST_F(VerifyCheckTest, RewrittenStoredHashIsModified) {
  Write(leaves_, leaves_);
  const fs::path tile = dir_ / tlog::TilePath(1, 0, 2);
  std::string bytes = ReadAll(tile);
  bytes[32 + 5] ^= 1;  // entry 1: leaves [256, 512)
  WriteAll(tile, bytes);
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kModified, 256);
  EXPECT_EQ(report.first_break->detail,
            "stored tree hash tile 1/0 entry 1 was rewritten: it is not the hash of leaves "
            "[256, 512)");

  const fs::path leaf_tile = dir_ / tlog::TilePath(0, 0, 256);
  bytes = ReadAll(leaf_tile);
  bytes[9 * 32] ^= 1;
  WriteAll(leaf_tile, bytes);
  EXPECT_BREAK(Check(), BreakKind::kModified, 9);
}

TEST_F(VerifyCheckTest, EditedCheckpointIsABadSignature) {
  Write(leaves_, leaves_);
  const fs::path file = dir_ / "checkpoints" / "300";
  std::string note = ReadAll(file);
  const std::string root = absl::Base64Escape(tlog::ToBytes(RootOfFirst(leaves_, 300)));
  note.replace(note.find(root), root.size(),
               absl::Base64Escape(tlog::ToBytes(tlog::LeafHash("x"))));
  WriteAll(file, note);
  EXPECT_BREAK(Check(), BreakKind::kBadSignature, 300);
}

TEST_F(VerifyCheckTest, CheckpointByAnotherKeyIsAnUnknownKey) {
  Write(leaves_, leaves_);
  const crypto::SigningKey other = *crypto::SigningKey::Generate();
  const tlog::NoteSigner stranger = *tlog::NoteSigner::Create(kOrigin, other);
  WriteAll(dir_ / "checkpoints" / "300", CheckpointNote(leaves_, 300, stranger));
  EXPECT_BREAK(Check(), BreakKind::kUnknownKey, 300);
}

// The log's key signed a root that is not the leaves': the change is placed
// between the last checkpoint that matched and this one.
TEST_F(VerifyCheckTest, CheckpointOfOtherLeavesIsForked) {
  Write(leaves_, leaves_);
  WriteAll(dir_ / "checkpoints" / "300", CheckpointNote(Leaves(5000), 300, log_signer_));
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kForked, 300);
  EXPECT_NE(report.first_break->detail.find("[256, 300)"), std::string::npos);
}

TEST_F(VerifyCheckTest, LeafByAKeyNotInTheDirectoryIsAnUnknownKey) {
  const crypto::SigningKey stranger = *crypto::SigningKey::Generate();
  std::vector<std::string> leaves = leaves_;
  leaves[10] = SignedLeaf(stranger, audit::v1::OWNER_AUTH, 10);
  Write(leaves, leaves);
  EXPECT_BREAK(Check(), BreakKind::kUnknownKey, 10);
}

TEST_F(VerifyCheckTest, LeafByAnotherPartysKeyIsABadSignature) {
  std::vector<std::string> leaves = leaves_;
  leaves[11] = SignedLeaf(auth_, audit::v1::OWNER_APP, 11);  // App's event, Auth's key
  Write(leaves, leaves);
  EXPECT_BREAK(Check(), BreakKind::kBadSignature, 11);
}

// The history cut to 400 leaves and signed again, while the auditor holds
// the checkpoint of 600.
TEST_F(VerifyCheckTest, HistoryCutBelowTheTrustedCheckpointIsTruncated) {
  const std::string trusted = CheckpointNote(leaves_, kSize, log_signer_);
  Write(leaves_, leaves_, {1, 100, 256, 300, 400});
  const Report report = Check(trusted);
  EXPECT_BREAK(report, BreakKind::kTruncated, 400);
  EXPECT_EQ(
      report.first_break->detail,
      "the log shows 400 leaves, the trusted checkpoint 600: rolled back or truncated (or the "
      "export is older than it)");
}

TEST_F(VerifyCheckTest, TrustedCheckpointOfAnotherHistoryIsForked) {
  Write(leaves_, leaves_);
  EXPECT_BREAK(Check(CheckpointNote(Leaves(5000), kSize, log_signer_)), BreakKind::kForked, kSize);
}

TEST_F(VerifyCheckTest, CosignaturesAreCountedAndBadOnesRefused) {
  Write(leaves_, leaves_);
  Cosign(300, TextOf(300));
  Cosign(kSize, TextOf(kSize));
  Report report = Check();
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.cosignatures, 2u);

  Cosign(100, TextOf(101));  // not this checkpoint's text
  report = Check();
  EXPECT_BREAK(report, BreakKind::kBadSignature, 100);
  EXPECT_EQ(report.cosignatures, 2u);
}

// The witness policy: the newest checkpoint a quorum of the witness keys
// cosigned bounds what is witnessed; the leaves past it are reported.
TEST_F(VerifyCheckTest, TheWitnessPolicyFindsTheNewestCheckpointAQuorumCosigned) {
  keys_.witnesses.push_back(*tlog::CosignatureVerifier::Parse(witness2_signer_.VerifierKey()));
  Write(leaves_, leaves_);
  Report report = Check();
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.witness_keys, 2u);
  EXPECT_EQ(report.witness_quorum, 2u);
  EXPECT_EQ(report.witnessed_size, 0u) << "nothing cosigned: nothing witnessed";

  Cosign(256, TextOf(256));
  Cosign(256, TextOf(256), &witness2_signer_);
  Cosign(kSize, TextOf(kSize));
  report = Check();
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.witnessed_size, 256u) << "only one of two cosigned the newest";

  keys_.witness_quorum = 1;
  report = Check();
  EXPECT_EQ(report.witness_quorum, 1u);
  EXPECT_EQ(report.witnessed_size, kSize);

  keys_.witness_quorum = 0;
  Cosign(kSize, TextOf(kSize), &witness2_signer_);
  EXPECT_EQ(Check().witnessed_size, kSize);
}

// The insider's rewrite: an event deleted, the rest sequenced again, every
// checkpoint from the change on signed anew with the log's key. The
// checkpoints below the change keep their cosignatures and still verify;
// the new ones carry none. Without a policy the export is clean; with one
// the rewritten tail is unwitnessed from the last witnessed size.
TEST_F(VerifyCheckTest, AHistoryTheWitnessesDidNotSignIsUnwitnessedFromItsChange) {
  std::vector<std::string> rewritten = leaves_;
  rewritten.erase(rewritten.begin() + 400);
  rewritten.push_back(SignedLeaf(auth_, audit::v1::OWNER_AUTH, 9000));
  Write(rewritten, rewritten);
  Cosign(256, tlog::CheckpointText({kOrigin, 256, RootOfFirst(rewritten, 256), {}}));
  Cosign(300, tlog::CheckpointText({kOrigin, 300, RootOfFirst(rewritten, 300), {}}));
  const Report report = Check();
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.cosignatures, 2u);
  EXPECT_EQ(report.witnessed_size, 300u);
  EXPECT_LT(report.witnessed_size, report.size);
}

// A witness cosigns only checkpoints that extend the one it holds, so its
// cosignatures' times grow with the size; a larger checkpoint cosigned
// earlier means it was shown two histories.
TEST_F(VerifyCheckTest, CosignatureTimesThatRunBackwardsAreABreak) {
  Write(leaves_, leaves_);
  Cosign(256, TextOf(256), nullptr, 1700000500);
  Cosign(300, TextOf(300), nullptr, 1700000600);
  Cosign(kSize, TextOf(kSize), nullptr, 1700000400);
  EXPECT_BREAK(Check(), BreakKind::kWitnessTimeReversed, kSize);
}

// What each witness says it holds, asked directly: the export must be that
// history, cosigned by that witness.
TEST_F(VerifyCheckTest, WitnessViewsMustBeTheExportsHistory) {
  Write(leaves_, leaves_);
  auto view = [&](const std::vector<std::string>& leaves, uint64_t size,
                  const tlog::CosignatureSigner& by) {
    const std::string note = CheckpointNote(leaves, size, log_signer_);
    const std::string text = tlog::CheckpointText({kOrigin, size, RootOfFirst(leaves, size), {}});
    return note + *by.Cosign(text, 1700000000);
  };
  Report report =
      Check(std::nullopt, {{"witness.example/w1", view(leaves_, 513, witness_signer_)}});
  EXPECT_FALSE(report.first_break.has_value()) << report.first_break->detail;
  EXPECT_EQ(report.views_checked, 1u);

  // The witness saw more than the export shows: truncated (or old).
  std::vector<std::string> longer = leaves_;
  for (const std::string& leaf : Leaves(5000)) longer.push_back(leaf);
  EXPECT_BREAK(Check(std::nullopt, {{"witness.example/w1", view(longer, 700, witness_signer_)}}),
               BreakKind::kTruncated, kSize);
  // The witness saw another history: a split view.
  EXPECT_BREAK(
      Check(std::nullopt, {{"witness.example/w1", view(Leaves(5000), 300, witness_signer_)}}),
      BreakKind::kForked, 300);
  // A view is only the witness's when its own key cosigned it.
  EXPECT_BREAK(Check(std::nullopt, {{"witness.example/w1", view(leaves_, 300, witness2_signer_)}}),
               BreakKind::kBadSignature, kSize);
}

TEST_F(VerifyCheckTest, MissingLastBundlesAreTruncated) {
  Write(leaves_, leaves_);
  fs::remove(dir_ / tlog::EntryBundlePath(2, kSize - 512));
  const Report report = Check();
  EXPECT_BREAK(report, BreakKind::kTruncated, 512);
  EXPECT_EQ(report.leaves_checked, 512u);
}

TEST_F(VerifyCheckTest, MissingCheckpointIsMalformed) {
  Write(leaves_, leaves_);
  fs::remove(dir_ / "checkpoint");
  EXPECT_BREAK(Check(), BreakKind::kMalformed, 0);
}

// The log signed 600 leaves; the export's newest checkpoint is of 300.
TEST_F(VerifyCheckTest, NewestBelowASignedCheckpointIsRolledBack) {
  Write(leaves_, leaves_, {1, 100, 256, 300});
  WriteAll(dir_ / "checkpoints" / "600", CheckpointNote(leaves_, kSize, log_signer_));
  EXPECT_BREAK(Check(), BreakKind::kRolledBack, 300);
}

}  // namespace
}  // namespace ulticode::verify
