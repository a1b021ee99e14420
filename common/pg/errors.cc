#include "common/pg/errors.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ulticode::pg {

absl::Status StatusFromSqlState(absl::string_view sqlstate, absl::string_view message) {
  absl::StatusCode code = absl::StatusCode::kInternal;
  if (sqlstate == "23505") {
    code = absl::StatusCode::kAlreadyExists;
  } else if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03") {
    code = absl::StatusCode::kAborted;
  } else if (sqlstate == "57014") {
    code = absl::StatusCode::kDeadlineExceeded;
  } else if (absl::StartsWith(sqlstate, "08") || sqlstate == "57P01" || sqlstate == "57P02" ||
             sqlstate == "57P03" || sqlstate.empty()) {
    code = absl::StatusCode::kUnavailable;
  } else if (absl::StartsWith(sqlstate, "23")) {
    code = absl::StatusCode::kFailedPrecondition;
  } else if (absl::StartsWith(sqlstate, "22")) {
    code = absl::StatusCode::kInvalidArgument;
  } else if (absl::StartsWith(sqlstate, "53")) {
    code = absl::StatusCode::kResourceExhausted;
  }
  absl::Status status(
      code, sqlstate.empty() ? std::string(message) : absl::StrCat("[", sqlstate, "] ", message));
  if (!sqlstate.empty()) status.SetPayload(kSqlStatePayload, absl::Cord(sqlstate));
  return status;
}

std::string SqlState(const absl::Status& status) {
  auto p = status.GetPayload(kSqlStatePayload);
  return p ? std::string(*p) : std::string();
}

bool IsUniqueViolation(const absl::Status& status) { return SqlState(status) == "23505"; }

bool IsCommitOutcomeUnknown(const absl::Status& status) {
  return status.GetPayload(kCommitUnknownPayload).has_value();
}

absl::Status CommitOutcomeUnknownError(absl::string_view detail) {
  absl::Status status(absl::StatusCode::kUnknown, absl::StrCat("commit outcome unknown: ", detail));
  status.SetPayload(kCommitUnknownPayload, absl::Cord("1"));
  return status;
}

bool IsRetryable(const absl::Status& status) {
  if (IsCommitOutcomeUnknown(status)) return false;
  switch (status.code()) {
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    case absl::StatusCode::kAlreadyExists:
      return IsUniqueViolation(status);
    default:
      return false;
  }
}

}  // namespace ulticode::pg
