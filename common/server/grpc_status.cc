#include "common/server/grpc_status.h"

#include <string>

#include "common/log/log.h"
#include "common/pg/errors.h"
#include "common/server/error_details.h"

namespace ulticode::server {
namespace {

// Codes whose messages are written for the client: they name the bad
// field or the missing thing, never a database's text.
bool ForwardsMessage(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kCancelled:
    // Ours name an event and what of it disagrees with the log, never values.
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status, absl::string_view method) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  // Errors raised by PostgreSQL carry its message and DETAIL (row contents):
  // never forward those, whatever their code. An error that names its
  // reason (WithErrorInfo) was written for the client, whatever its code.
  const bool from_database = status.GetPayload(pg::kSqlStatePayload).has_value();
  if (!from_database && (ForwardsMessage(status.code()) || HasErrorInfo(status))) {
    return grpc::Status(code, std::string(status.message()),
                        internal::SerializedDetails(status, status.message(), true));
  }
  log::Warn("grpc", "call failed",
            {{"method", std::string(method)},
             {"code", absl::StatusCodeToString(status.code())},
             {"detail", std::string(status.message())}});
  const char* message = "internal error";
  switch (status.code()) {
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
      message = "the database rejected the change";
      break;
    case absl::StatusCode::kUnavailable:
      message = "a dependency is unavailable; retry with the same request_id";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      message = "the operation timed out; retry with the same request_id";
      break;
    case absl::StatusCode::kAborted:
      message = "concurrent update conflict; retry with the same request_id";
      break;
    case absl::StatusCode::kUnknown:
      message = "outcome unknown; retry with the same request_id to learn it";
      break;
    default:
      break;
  }
  // Details of our own (WithRetryDelay ...) still go; a database's never.
  return grpc::Status(code, message, internal::SerializedDetails(status, message, !from_database));
}

}  // namespace ulticode::server
