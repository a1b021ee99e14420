// The request validation of every mutating RPC, plus the text layer and the
// request id check they share.
//
// Input: byte 0 selects the RPC (mod kModes); the rest is that RPC's request
// proto (ParseFromArray; unparseable bytes are skipped) or, for the text
// mode, raw bytes. Every validator runs on the request, and
// mutation::ValidateRequestId on its request_id. Invariants: validators fail
// only with INVALID_ARGUMENT, and the google.rpc.BadRequest a client gets
// for it (server::ToGrpcStatus) names a field path of the request, so a
// client can always tell which field to fix; text::Check accepts only valid UTF-8 within
// its rule's length, without forbidden controls; TruncateUtf8 keeps valid
// UTF-8 valid.
#include <cstddef>
#include <cstdint>

#include "absl/strings/match.h"
#include "app/app_service.h"
#include "auth/auth_service.h"
#include "common/server/error_details.h"
#include "common/server/grpc_status.h"
#include "fuzz/fuzz_support.h"
#include "owner/mutation/mutation.h"

using namespace ::ulticode;  // NOLINT

namespace {

void Expect(const absl::Status& s) {
  FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
}

// A validator's verdict on `req`: OK, or INVALID_ARGUMENT whose BadRequest
// names a field of the request.
void Expect(const absl::Status& s, const google::protobuf::Message& req) {
  Expect(s);
  if (s.ok()) return;
  const server::ErrorDetails d = server::ErrorDetails::Of(server::ToGrpcStatus(s, "fuzz"));
  FUZZ_CHECK(d.BadFieldIsIn(req.GetDescriptor()), "BadRequest names no field of " +
                                                      req.GetDescriptor()->name() + ": \"" +
                                                      d.BadField() + "\" (" + s.ToString() + ")");
}

template <typename Request>
bool Parse(absl::string_view bytes, Request* req) {
  return req->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// What text::Check promises for OK.
void CheckText(absl::string_view value) {
  static constexpr text::Rule kRules[] = {
      {},                                                                     // the default
      {.min_chars = 1, .max_chars = 64, .identifier = true},                  // a name
      {.min_chars = 0, .max_chars = 40, .max_bytes = 48, .multiline = true},  // short text
      {.min_chars = 2, .max_chars = 100000, .max_bytes = 100000, .multiline = true},
  };
  const bool valid_utf8 = text::IsValidUtf8(value);
  for (const text::Rule& rule : kRules) {
    const absl::Status s = text::Check("field", value, rule);
    Expect(s);
    if (!s.ok()) {
      FUZZ_CHECK(absl::StartsWith(s.message(), "field"), s.ToString());
      continue;
    }
    const size_t max_bytes = rule.max_bytes != 0 ? rule.max_bytes : 4 * rule.max_chars;
    const size_t chars = text::CodePoints(value);
    FUZZ_CHECK(valid_utf8, "Check accepted invalid UTF-8");
    FUZZ_CHECK(value.size() <= max_bytes, "Check accepted too many bytes");
    FUZZ_CHECK(chars >= rule.min_chars && chars <= rule.max_chars, "Check accepted a bad length");
    FUZZ_CHECK(text::FirstForbiddenControl(value, rule.multiline) == -1,
               "Check accepted a forbidden control");
  }
  if (!valid_utf8) return;  // FirstForbiddenControl and TruncateUtf8 assume valid UTF-8
  (void)text::FirstForbiddenControl(value, false);
  for (size_t max : {size_t{0}, size_t{1}, size_t{3}, value.size() / 2, value.size()}) {
    const absl::string_view cut = text::TruncateUtf8(value, max);
    FUZZ_CHECK(cut.size() <= max && value.substr(0, cut.size()) == cut && text::IsValidUtf8(cut),
               "TruncateUtf8 broke a code point");
  }
}

constexpr int kModes = 12;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % kModes;
  const absl::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0: {
      auth::v1::CreateUserRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(auth::ValidateCreateUser(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 1: {
      auth::v1::DisableUserRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(auth::ValidateDisableUser(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 2: {
      auth::v1::AssignRoleRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(auth::ValidateRoleChange(req.user_id(), req.role()), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 3: {
      auth::v1::RevokeRoleRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(auth::ValidateRoleChange(req.user_id(), req.role()), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 4: {
      auth::v1::UpdateLoginPolicyRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(auth::ValidateUpdateLoginPolicy(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 5: {
      app::v1::CreateProblemRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidateCreateProblem(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 6: {
      app::v1::UpdateProblemRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidateUpdateProblem(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 7: {
      app::v1::CreateContestRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidateCreateContest(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 8: {
      app::v1::AddProblemToContestRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidateAddProblemToContest(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 9: {
      app::v1::RemoveProblemFromContestRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidateRemoveProblemFromContest(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    case 10: {
      app::v1::PublishContestRequest req;
      if (!Parse(rest, &req)) return 0;
      Expect(app::ValidatePublishContest(req), req);
      Expect(mutation::ValidateRequestId(req.request_id()), req);
      break;
    }
    default: {
      // Raw bytes: the text layer and the single-string validators.
      CheckText(rest);
      const std::string s(rest);
      Expect(mutation::ValidateRequestId(s));
      Expect(app::ValidateSlug(s));
      Expect(app::ValidateLabel(s));
      Expect(app::ValidateId("problem_id", s));
      Expect(auth::ValidateRoleChange(s, "admin"));
      break;
    }
  }
  return 0;
}
