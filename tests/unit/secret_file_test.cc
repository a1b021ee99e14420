// crypto::ReadSecretFile's permission rule: owner-only, or group-readable
// when root owns the file (a Kubernetes Secret mounted for the pod's fsGroup).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/crypto/crypto.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace ulticode::crypto {
namespace {

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/secret-file-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/secret";
    std::ofstream(path_) << "hunter2\n";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  absl::StatusOr<std::string> ReadWithMode(mode_t mode) {
    EXPECT_EQ(::chmod(path_.c_str(), mode), 0);
    return ReadSecretFile(path_);
  }
  std::string dir_, path_;
};

TEST_F(SecretFileTest, OwnerOnlyIsRead) {
  for (mode_t mode : {0600, 0400}) {
    auto s = ReadWithMode(mode);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(*s, "hunter2");
  }
}

TEST_F(SecretFileTest, OthersNeverAndGroupWriteNever) {
  for (mode_t mode : {0644, 0604, 0660, 0620, 0610}) {
    auto s = ReadWithMode(mode);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << std::oct << mode;
    EXPECT_NE(s.status().message().find("group and others must have no access"), std::string::npos);
    EXPECT_EQ(s.status().message().find("hunter2"), std::string::npos);
  }
}

TEST_F(SecretFileTest, GroupReadOnlyWhenRootOwnsTheFileAndTheGroupIsOurs) {
  if (::geteuid() != 0) {
    // Only root can make a root-owned file: the refusal half still runs.
    for (mode_t mode : {0440, 0640}) {
      EXPECT_EQ(ReadWithMode(mode).status().code(), absl::StatusCode::kFailedPrecondition);
    }
    if (::ulticode::testing::InCi()) FAIL() << "CI runs as root: the test needs it";
    GTEST_SKIP() << "the accepting half needs root";
  }
  // Root's file, our group, as kubelet mounts a Secret: 0440 and 0640 are fine.
  ASSERT_EQ(::chown(path_.c_str(), 0, ::getegid()), 0);
  for (mode_t mode : {0440, 0640}) EXPECT_TRUE(ReadWithMode(mode).ok()) << std::oct << mode;
  // Root's file, a group we are not in: refused.
  ASSERT_EQ(::chown(path_.c_str(), 0, 65534), 0);
  EXPECT_EQ(ReadWithMode(0440).status().code(), absl::StatusCode::kFailedPrecondition);
  // Anyone else's file: group-readable is refused.
  ASSERT_EQ(::chown(path_.c_str(), 65534, ::getegid()), 0);
  for (mode_t mode : {0440, 0640}) {
    EXPECT_EQ(ReadWithMode(mode).status().code(), absl::StatusCode::kFailedPrecondition)
        << std::oct << mode;
  }
}

}  // namespace
}  // namespace ulticode::crypto
