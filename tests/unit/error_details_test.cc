// The error surface every RPC shares (server::ToGrpcStatus): for a generated
// mix of codes, messages and attached details, a client always gets the
// details it must act on, and never what it must not see.
//   - every error: an ErrorInfo of domain kErrorDomain;
//   - INVALID_ARGUMENT: a BadRequest, naming the field of a "field: ..."
//     message;
//   - a code a retry can fix (UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED,
//     UNKNOWN, RESOURCE_EXHAUSTED): a RetryInfo;
//   - an error raised by PostgreSQL (SQLSTATE payload): neither its text nor
//     its payloads, whatever its code.
// Seeded (ULTICODE_ERROR_DETAILS_SEED), so a failure is reproducible.
#include "common/server/error_details.h"

#include <cstdlib>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/pg/errors.h"
#include "common/server/grpc_status.h"
#include "gtest/gtest.h"

namespace ulticode::server {
namespace {

bool Retryable(absl::StatusCode code) {
  return code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kAborted ||
         code == absl::StatusCode::kDeadlineExceeded || code == absl::StatusCode::kUnknown ||
         code == absl::StatusCode::kResourceExhausted;
}

TEST(ErrorDetailsTest, EveryErrorCarriesWhatItsClientMustActOnAndNoMore) {
  const char* env = std::getenv("ULTICODE_ERROR_DETAILS_SEED");
  const uint32_t seed = env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 34034;
  std::mt19937 rng(seed);
  const std::string fields[] = {"page_size", "filter.entity_id", "ids.ids[3]",
                                "update_mask.paths[0]", "login_policy.session_lifetime"};
  for (int i = 0; i < 2000; ++i) {
    const auto code = static_cast<absl::StatusCode>(1 + rng() % 16);
    const std::string field = fields[rng() % std::size(fields)];
    const int shape = static_cast<int>(rng() % 5);
    absl::Status status(
        code, shape == 0 ? absl::StrCat(field, ": must be valid") : "row 42 holds secret-value");
    if (shape == 1) status = absl::Status(code, absl::StrCat(field, ":  spaced description"));
    if (shape == 2) status = WithRetryDelay(std::move(status), absl::Seconds(7));
    if (shape == 3) status = WithErrorInfo(std::move(status), "SOME_REASON", {{"k", "v"}});
    const bool from_database = rng() % 4 == 0;
    if (from_database) status.SetPayload(pg::kSqlStatePayload, absl::Cord("23505"));
    const std::string what = absl::StrCat("seed ", seed, " case ", i, ": ", status.ToString());

    const grpc::Status g = ToGrpcStatus(status, "Test");
    const ErrorDetails d = ErrorDetails::Of(g);
    ASSERT_TRUE(d.error_info.has_value()) << what;
    EXPECT_EQ(d.error_info->domain(), kErrorDomain) << what;
    EXPECT_EQ(d.bad_request.has_value(), status.code() == absl::StatusCode::kInvalidArgument)
        << what;
    if (from_database) {
      EXPECT_EQ(g.error_message().find("secret-value"), std::string::npos) << what;
      EXPECT_NE(d.error_info->reason(), "SOME_REASON") << what;
      if (d.bad_request) EXPECT_EQ(d.BadField(), "") << what;
    } else if (status.code() == absl::StatusCode::kInvalidArgument && shape <= 1) {
      EXPECT_EQ(d.BadField(), field) << what;
    }
    if (Retryable(status.code()) || (shape == 2 && !from_database)) {
      ASSERT_TRUE(d.retry_info.has_value()) << what;
      EXPECT_EQ(d.retry_info->retry_delay().seconds(), shape == 2 && !from_database ? 7 : 1)
          << what;
    } else {
      EXPECT_FALSE(d.retry_info.has_value()) << what;
    }
    if (shape == 3 && !from_database) {
      EXPECT_EQ(d.error_info->reason(), "SOME_REASON") << what;
      EXPECT_EQ(d.error_info->metadata().at("k"), "v") << what;
      EXPECT_EQ(g.error_message(), status.message()) << what;
    }
  }
}

}  // namespace
}  // namespace ulticode::server
