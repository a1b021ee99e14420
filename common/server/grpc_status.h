// The one mapping from absl::Status to grpc::Status (the codes are the same).
// Messages of INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION,
// UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED, OUT_OF_RANGE,
// UNIMPLEMENTED, CANCELLED and DATA_LOSS go to the client as they are (ours
// name the bad field, or the event that disagrees with the log, never
// values). INTERNAL, UNKNOWN, UNAVAILABLE, ABORTED and DEADLINE_EXCEEDED may
// carry database detail, so the client gets a generic message and the
// detail is logged with the method. Any error that came from PostgreSQL (it
// carries a SQLSTATE) is treated that way whatever its code, and loses its
// payloads: its text may quote row contents.
// Every error carries google.rpc details (error_details.h): an ErrorInfo, a
// BadRequest on INVALID_ARGUMENT, a RetryInfo when a retry can succeed. An
// error with an ErrorInfo of its own (WithErrorInfo) was written for the
// client: its message goes as it is, whatever its code.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace ulticode::server {

grpc::Status ToGrpcStatus(const absl::Status& status, absl::string_view method = "");

}  // namespace ulticode::server
