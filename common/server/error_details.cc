#include "common/server/error_details.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"
#include "google/rpc/status.pb.h"

namespace ulticode::server {
namespace {

constexpr char kTypePrefix[] = "type.googleapis.com/";

template <typename Message>
std::string TypeUrl() {
  return absl::StrCat(kTypePrefix, Message::descriptor()->full_name());
}

template <typename Message>
absl::Status WithPayload(absl::Status status, const Message& detail) {
  status.SetPayload(TypeUrl<Message>(), absl::Cord(detail.SerializeAsString()));
  return status;
}

template <typename Message>
std::optional<Message> Payload(const absl::Status& status) {
  auto bytes = status.GetPayload(TypeUrl<Message>());
  Message m;
  if (!bytes || !m.ParseFromString(std::string(*bytes))) return std::nullopt;
  return m;
}

// "<field path>: <description>": the field path of a validation message.
std::string LeadingField(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon == 0) return "";
  for (char c : message.substr(0, colon)) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' ||
          c == ']')) {
      return "";
    }
  }
  return std::string(message.substr(0, colon));
}

bool Retryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

template <typename Message>
void Add(google::rpc::Status& out, const Message& detail) {
  google::protobuf::Any* any = out.add_details();
  any->set_type_url(TypeUrl<Message>());
  any->set_value(detail.SerializeAsString());
}

}  // namespace

absl::Status WithRetryDelay(absl::Status status, absl::Duration delay) {
  google::rpc::RetryInfo retry;
  *retry.mutable_retry_delay() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(absl::ToInt64Milliseconds(delay));
  return WithPayload(std::move(status), retry);
}

absl::Status WithErrorInfo(absl::Status status, absl::string_view reason,
                           const std::map<std::string, std::string>& metadata) {
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain(kErrorDomain);
  for (const auto& [k, v] : metadata) (*info.mutable_metadata())[k] = v;
  return WithPayload(std::move(status), info);
}

bool HasErrorInfo(const absl::Status& status) {
  return status.GetPayload(TypeUrl<google::rpc::ErrorInfo>()).has_value();
}

namespace internal {

std::string SerializedDetails(const absl::Status& status, absl::string_view message, bool trusted) {
  google::rpc::Status out;
  out.set_code(static_cast<int>(status.code()));
  out.set_message(std::string(message));
  std::optional<google::rpc::ErrorInfo> info;
  if (trusted) info = Payload<google::rpc::ErrorInfo>(status);
  if (!info) {
    info.emplace();
    info->set_reason(absl::StatusCodeToString(status.code()));
    for (char& c : *info->mutable_reason()) c = c == ' ' ? '_' : c;
    info->set_domain(kErrorDomain);
  }
  Add(out, *info);
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    std::optional<google::rpc::BadRequest> bad;
    if (trusted) bad = Payload<google::rpc::BadRequest>(status);
    if (!bad) {
      bad.emplace();
      auto* v = bad->add_field_violations();
      v->set_field(trusted ? LeadingField(message) : "");
      v->set_description(std::string(message));
    }
    Add(out, *bad);
  }
  std::optional<google::rpc::RetryInfo> retry;
  if (trusted) retry = Payload<google::rpc::RetryInfo>(status);
  if (!retry && Retryable(status.code())) {
    retry.emplace();
    retry->mutable_retry_delay()->set_seconds(1);
  }
  if (retry) Add(out, *retry);
  return out.SerializeAsString();
}

}  // namespace internal

ErrorDetails ErrorDetails::Of(const grpc::Status& status) {
  ErrorDetails d;
  google::rpc::Status parsed;
  if (status.error_details().empty() || !parsed.ParseFromString(status.error_details())) return d;
  for (const google::protobuf::Any& any : parsed.details()) {
    if (any.type_url() == TypeUrl<google::rpc::ErrorInfo>()) {
      any.UnpackTo(&d.error_info.emplace());
    } else if (any.type_url() == TypeUrl<google::rpc::BadRequest>()) {
      any.UnpackTo(&d.bad_request.emplace());
    } else if (any.type_url() == TypeUrl<google::rpc::RetryInfo>()) {
      any.UnpackTo(&d.retry_info.emplace());
    }
  }
  return d;
}

std::string ErrorDetails::BadField() const {
  if (!bad_request || bad_request->field_violations().empty()) return "";
  return bad_request->field_violations(0).field();
}

bool ErrorDetails::BadFieldIsIn(const google::protobuf::Descriptor* request) const {
  const std::string path = BadField();
  if (path.empty()) return false;
  const google::protobuf::Descriptor* type = request;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (type == nullptr) return false;
    const size_t bracket = part.find('[');
    const google::protobuf::FieldDescriptor* field =
        type->FindFieldByName(std::string(part.substr(0, bracket)));
    if (field == nullptr || (bracket != absl::string_view::npos && !field->is_repeated())) {
      return false;
    }
    type = field->message_type();
  }
  return true;
}

}  // namespace ulticode::server
