// audit::AuditEvent parsing, audit::Validate and Ed25519 verification.
//
// Input: a 64-byte signature, then the envelope bytes (shorter inputs are
// all signature). The signature is checked with each fixed key, the envelope
// parsed and validated. Invariant (audit::Validate's promise): a valid event
// is one Admin's audit_logs writer can store (fuzz::CheckStorable: JSON of
// old/new values, text columns, occurred_at), and it stays valid across
// Serialize -> parse, which is stable.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"

using namespace ::ulticode;  // NOLINT

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietProtobufLogs();
  fuzz::Keys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  const absl::string_view signature = in.substr(0, crypto::kEd25519SignatureBytes);
  const absl::string_view envelope = in.substr(signature.size());
  const fuzz::FixedKeys& keys = fuzz::Keys();
  const bool by_auth = keys.auth.public_key().Verify(envelope, signature);
  const bool by_app = keys.app.public_key().Verify(envelope, signature);
  FUZZ_CHECK(!(by_auth && by_app), "one signature verifies with two keys");
  if (by_auth || by_app) {
    // Ed25519 signing is deterministic: a verified signature is the key's own.
    FUZZ_CHECK(fuzz::MustSign(keys.owner(by_app ? audit::v1::OWNER_APP : audit::v1::OWNER_AUTH),
                              envelope) == signature,
               "verified signature is not the deterministic one");
  }

  audit::AuditEvent event;
  if (!event.ParseFromArray(envelope.data(), static_cast<int>(envelope.size()))) return 0;
  (void)audit::IsKnownEventType(event.owner(), event.event_type());
  (void)audit::StreamFor(event.owner());
  const absl::Status status = audit::Validate(event);
  if (!status.ok()) {
    FUZZ_CHECK(
        status.code() == absl::StatusCode::kInvalidArgument || audit::IsNewerThanKnown(status),
        status.ToString());
    return 0;
  }
  fuzz::CheckStorable(event);
  const std::string bytes = audit::Serialize(event);
  audit::AuditEvent again;
  FUZZ_CHECK(again.ParseFromString(bytes), "serialized valid event does not parse");
  FUZZ_CHECK(audit::Validate(again).ok(), "valid event is invalid after Serialize");
  FUZZ_CHECK(audit::Serialize(again) == bytes, "Serialize is not stable");
  return 0;
}
