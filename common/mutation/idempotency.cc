#include "common/mutation/idempotency.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/ids/uuid.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace ulticode::mutation {
namespace {

constexpr pg::Statement kLockKey{
    "idempotency.lock", "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 0))"};
constexpr pg::Statement kFindKey{"idempotency.find",
                                 "SELECT method, request_sha256, response FROM idempotency_keys"
                                 " WHERE principal = $1 AND request_id = $2"};
constexpr pg::Statement kSaveKey{
    "idempotency.save",
    "INSERT INTO idempotency_keys (principal, request_id, method, request_sha256, response)"
    " VALUES ($1, $2, $3, $4, $5)"};

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream raw(&out);
  google::protobuf::io::CodedOutputStream coded(&raw);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// SHA-256 of the request's canonical form: unknown fields dropped (a client
// cannot make two equal requests differ, nor smuggle bytes into storage),
// fields in tag order, map entries sorted.
std::string CanonicalHash(const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  copy->DiscardUnknownFields();
  return crypto::Sha256(Deterministic(*copy));
}

}  // namespace

absl::Status ValidateRequestId(absl::string_view request_id) {
  if (request_id.empty() || ids::IsValidUuid(request_id)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "request_id: must be a UUID (8-4-4-4-12 hex digits, as "
      "0190d5a3-6f1e-7c2a-9b4e-1d2c3b4a5f60): the audit record keeps it for good, so it may "
      "not carry a name or any other personal data");
}

IdempotencyKey::IdempotencyKey(absl::string_view method, const google::protobuf::Message& request,
                               absl::string_view principal, absl::string_view request_id)
    : method_(method),
      principal_(principal),
      request_id_(request_id),
      request_hash_(request_id.empty() ? "" : CanonicalHash(request)) {}

absl::StatusOr<bool> IdempotencyKey::Replay(pg::Transaction& tx,
                                            google::protobuf::Message& response) const {
  if (request_id_.empty()) return false;
  // Serializes concurrent repeats of one key without aborting either. It
  // goes out with BEGIN and the lookup: one round trip.
  tx.Defer(kLockKey, {pg::Text(principal_), pg::Text(request_id_)});
  ASSIGN_OR_RETURN(pg::Result found,
                   tx.Execute(kFindKey, {pg::Text(principal_), pg::Text(request_id_)}));
  if (found.empty()) return false;
  if (found.Get(0, 0) != method_ || found.GetBytes(0, 1) != request_hash_) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id: \"", request_id_, "\" was already used for a different request"));
  }
  if (!response.ParseFromString(found.GetBytes(0, 2))) {
    return absl::InternalError("stored idempotent response does not parse");
  }
  return true;
}

void IdempotencyKey::Save(pg::Transaction& tx, const google::protobuf::Message& response) const {
  if (request_id_.empty()) return;
  tx.Defer(kSaveKey, {pg::Text(principal_), pg::Text(request_id_), pg::Text(method_),
                      pg::Bytes(request_hash_), pg::Bytes(Deterministic(response))});
}

}  // namespace ulticode::mutation
