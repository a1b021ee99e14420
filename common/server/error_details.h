// google.rpc error details (AIP-193) carried on absl::Status as payloads.
// ToGrpcStatus (grpc_status.h) sends them to the client in the standard
// `grpc-status-details-bin` trailer, as a google.rpc.Status whose details are
// always an ErrorInfo, plus a BadRequest on every INVALID_ARGUMENT and a
// RetryInfo when a retry can succeed. The BadRequest names the field of a
// message written "<field path>: <what is wrong>" (the validators' form);
// its field is empty when the database refused the change (its text never
// goes to the client).
//
//   return server::WithRetryDelay(absl::ResourceExhaustedError("..."), absl::Seconds(1));
//   ErrorDetails d = ErrorDetails::Of(grpc_status);  // a client reads them back
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "google/rpc/error_details.pb.h"
#include "grpcpp/support/status.h"

namespace ulticode::server {

// ErrorInfo.domain of every error the mesh's services return.
inline constexpr char kErrorDomain[] = "ulticode.audit-mesh";

// `status` with a RetryInfo: retrying after `delay` can succeed.
absl::Status WithRetryDelay(absl::Status status, absl::Duration delay);

// `status` with an ErrorInfo of this reason (UPPER_SNAKE_CASE) and metadata;
// without one, ToGrpcStatus sends the status code's name as the reason.
absl::Status WithErrorInfo(absl::Status status, absl::string_view reason,
                           const std::map<std::string, std::string>& metadata = {});

// The details of an error as a client receives them.
struct ErrorDetails {
  std::optional<google::rpc::ErrorInfo> error_info;
  std::optional<google::rpc::BadRequest> bad_request;
  std::optional<google::rpc::RetryInfo> retry_info;

  // Parsed from the status's details; empty ones when it carries none or
  // they do not parse.
  static ErrorDetails Of(const grpc::Status& status);
  // The first violation's field, or "".
  std::string BadField() const;
  // Whether BadField() is a field path of `request` ("ids.ids[3]",
  // "login_policy.session_lifetime"): a client can tell what to fix.
  bool BadFieldIsIn(const google::protobuf::Descriptor* request) const;
};

// Whether `status` carries an ErrorInfo set by WithErrorInfo.
bool HasErrorInfo(const absl::Status& status);

namespace internal {
// The details ToGrpcStatus sends for `status` with the client-visible
// `message`, serialized google.rpc.Status. `trusted`: the payloads and the
// message's field name may go to the client (not a database error).
std::string SerializedDetails(const absl::Status& status, absl::string_view message, bool trusted);
}  // namespace internal

}  // namespace ulticode::server
