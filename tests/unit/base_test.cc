// Pure logic of the small libraries: logging, error mapping, peer parsing.
#include "common/log/log.h"
#include "common/pg/errors.h"
#include "common/server/grpc_status.h"
#include "common/server/principal.h"
#include "gtest/gtest.h"

namespace ulticode {
namespace {

TEST(LogTest, JsonEscapeHandlesQuotesControlAndUnicode) {
  EXPECT_EQ(log::JsonEscape("a\"b\\c\n\t\x01"), "a\\\"b\\\\c\\n\\t\\u0001");
  EXPECT_EQ(log::JsonEscape("héllo"), "héllo");
  log::Level level;
  EXPECT_TRUE(log::ParseLevel("WARN", &level).ok());
  EXPECT_EQ(level, log::Level::kWarn);
  EXPECT_FALSE(log::ParseLevel("loud", &level).ok());
}

TEST(PgErrorsTest, SqlStateMapping) {
  struct Case {
    const char* state;
    absl::StatusCode code;
    bool retryable;
  };
  for (const Case& c : std::vector<Case>{
           {"23505", absl::StatusCode::kAlreadyExists, true},
           {"40001", absl::StatusCode::kAborted, true},
           {"40P01", absl::StatusCode::kAborted, true},
           {"57014", absl::StatusCode::kDeadlineExceeded, true},
           {"08006", absl::StatusCode::kUnavailable, true},
           {"57P01", absl::StatusCode::kUnavailable, true},
           {"23503", absl::StatusCode::kFailedPrecondition, false},
           {"22P02", absl::StatusCode::kInvalidArgument, false},
           {"53300", absl::StatusCode::kResourceExhausted, false},
           {"42601", absl::StatusCode::kInternal, false},
       }) {
    absl::Status s = pg::StatusFromSqlState(c.state, "msg");
    EXPECT_EQ(s.code(), c.code) << c.state;
    EXPECT_EQ(pg::SqlState(s), c.state);
    EXPECT_EQ(pg::IsRetryable(s), c.retryable) << c.state;
  }
  absl::Status unknown = pg::CommitOutcomeUnknownError("socket closed");
  EXPECT_TRUE(pg::IsCommitOutcomeUnknown(unknown));
  EXPECT_FALSE(pg::IsRetryable(unknown));
}

TEST(GrpcStatusTest, ClientErrorsKeepMessageInternalOnesAreHidden) {
  grpc::Status bad = server::ToGrpcStatus(absl::InvalidArgumentError("username: too short"));
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "username: too short");
  grpc::Status internal =
      server::ToGrpcStatus(absl::InternalError("[42601] syntax error at SELECT secret"));
  EXPECT_EQ(internal.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(internal.error_message().find("secret"), std::string::npos);
  EXPECT_TRUE(server::ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(PrincipalTest, PeerToIp) {
  EXPECT_EQ(server::PeerToIp("ipv4:10.1.2.3:5555"), "10.1.2.3");
  EXPECT_EQ(server::PeerToIp("ipv6:[::1]:5555"), "::1");
  EXPECT_EQ(server::PeerToIp("ipv6:[2001:db8::7]:80"), "2001:db8::7");
  EXPECT_EQ(server::PeerToIp("unix:/tmp/sock"), "unix");
}

}  // namespace
}  // namespace ulticode

namespace ulticode {
namespace {
TEST(GrpcStatusTest, DatabaseErrorsNeverReachTheClientVerbatim) {
  absl::Status check = pg::StatusFromSqlState(
      "23514", "new row violates check constraint; DETAIL: Failing row contains (secret)");
  grpc::Status g = server::ToGrpcStatus(check);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(g.error_message().find("secret"), std::string::npos) << g.error_message();
}
}  // namespace
}  // namespace ulticode
