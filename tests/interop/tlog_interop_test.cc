// Our RFC 9162 proofs and C2SP checkpoints, checked by an implementation
// nobody here wrote: Go's golang.org/x/mod/sumdb/tlog and sumdb/note
// (tests/interop/tlog_check.go, Debian's golang-go and
// golang-golang-x-mod-dev, offline). A mistake in our encoding cannot hide
// behind a verifier that shares it. The harness must also be able to fail: a
// file with one wrong root is refused.
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crypto/crypto.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "gtest/gtest.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"

namespace ulticode::tlog {
namespace {

std::string Hex(const Hash& h) { return absl::BytesToHexString(ToBytes(h)); }

std::string Hashes(const std::vector<Hash>& hs) {
  if (hs.empty()) return "-";
  std::vector<std::string> out;
  for (const Hash& h : hs) out.push_back(Hex(h));
  return absl::StrJoin(out, ",");
}

testing::CommandResult GoCheck(const std::string& file) {
  char tmpl[] = "/tmp/ulticode-gocache-XXXXXX";
  const std::string cache = mkdtemp(tmpl);
  auto r = testing::RunCommand(absl::StrCat(
      "cd ", testing::SourceDir(), " && GO111MODULE=off GOPATH=/usr/share/gocode",
      " GOCACHE=", cache, " GOFLAGS= go run tests/interop/tlog_check.go ", file, " 2>&1"));
  testing::RunCommand("rm -rf " + cache);
  return r;
}

class TlogInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ulticode-tlog-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::mt19937_64 rng(20261202);
    leaves_.push_back("");  // an empty leaf is a leaf too
    for (int i = 1; i < 70; ++i) {
      std::string leaf(rng() % 200, '\0');
      for (char& c : leaf) c = static_cast<char>(rng());
      leaves_.push_back(leaf);
    }
    for (const std::string& l : leaves_) hashes_.push_back(LeafHash(l));
  }
  void TearDown() override { testing::RunCommand("rm -rf " + dir_); }

  // Every root, proofs of every leaf of a few sizes, consistency between
  // many pairs, and a signed checkpoint.
  std::string Claims(bool one_wrong_root) {
    std::string out;
    for (const std::string& l : leaves_)
      absl::StrAppend(&out, "leaf x", absl::BytesToHexString(l), "\n");
    const size_t n = hashes_.size();
    for (size_t size = 1; size <= n; ++size) {
      Hash root = RootOf(absl::MakeConstSpan(hashes_).subspan(0, size));
      if (one_wrong_root && size == 33) root[5] ^= 1;
      absl::StrAppend(&out, "root ", size, " ", Hex(root), "\n");
    }
    for (size_t size : {1, 2, 3, 7, 8, 9, 31, 32, 33, 64, 70}) {
      const auto tree = absl::MakeConstSpan(hashes_).subspan(0, size);
      for (size_t i = 0; i < size; ++i) {
        absl::StrAppend(&out, "inclusion ", i, " ", size, " ", Hashes(*InclusionProof(i, tree)),
                        "\n");
      }
      for (size_t m = 1; m <= size; ++m) {
        absl::StrAppend(&out, "consistency ", m, " ", size, " ", Hashes(*ConsistencyProof(m, tree)),
                        "\n");
      }
    }
    auto key = crypto::SigningKey::Generate();
    auto signer = NoteSigner::Create("audit.ulticode.test/log", *key);
    const Checkpoint c{"audit.ulticode.test/log", n, RootOf(hashes_), {}};
    absl::StrAppend(&out, "vkey ", signer->VerifierKey(), "\n");
    absl::StrAppend(&out, "note ", absl::Base64Escape(*signer->Sign(CheckpointText(c))), "\n");
    return out;
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
  std::vector<std::string> leaves_;
  std::vector<Hash> hashes_;
};

TEST_F(TlogInteropTest, GoVerifiesOurRootsProofsAndSignedCheckpoint) {
  auto r = GoCheck(Write("claims", Claims(false)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok "), std::string::npos) << r.output;
}

TEST_F(TlogInteropTest, GoRefusesAWrongRoot) {
  auto r = GoCheck(Write("wrong", Claims(true)));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("FAIL root of 33"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ulticode::tlog
