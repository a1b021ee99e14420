#include "common/mutation/mutation.h"

#include "absl/strings/str_cat.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/log/log.h"
#include "common/pg/errors.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace ulticode::mutation {
namespace {

constexpr int kMaxAttempts = 4;

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

absl::Status Attempt(pg::Pool& pool, absl::string_view method, const std::string& request_hash,
                     absl::string_view principal, absl::string_view request_id,
                     google::protobuf::Message& response,
                     const std::function<absl::Status(pg::Transaction&)>& body,
                     const MutationHooks& hooks) {
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool.Acquire());
  ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
  if (!request_id.empty()) {
    // Serializes concurrent repeats of one key without aborting either. It
    // goes out with BEGIN and the lookup: one round trip.
    tx.Defer(kLockKey, {pg::Text(principal), pg::Text(request_id)});
    ASSIGN_OR_RETURN(pg::Result found,
                     tx.Execute(kFindKey, {pg::Text(principal), pg::Text(request_id)}));
    if (!found.empty()) {
      if (found.Get(0, 0) != method || found.GetBytes(0, 1) != request_hash) {
        return absl::InvalidArgumentError(absl::StrCat(
            "request_id \"", request_id, "\" was already used for a different request"));
      }
      if (!response.ParseFromString(found.GetBytes(0, 2))) {
        return absl::InternalError("stored idempotent response does not parse");
      }
      return tx.Commit();
    }
  }
  RETURN_IF_ERROR(body(tx));
  if (!request_id.empty()) {
    // With the outbox row and COMMIT: one round trip.
    tx.Defer(kSaveKey, {pg::Text(principal), pg::Text(request_id), pg::Text(method),
                        pg::Bytes(request_hash), pg::Bytes(Deterministic(response))});
  }
  if (hooks.before_commit) RETURN_IF_ERROR(hooks.before_commit(method));
  return tx.Commit();
}

}  // namespace

absl::Status ValidateRequestId(absl::string_view request_id) {
  if (request_id.size() > 128) {
    return absl::InvalidArgumentError("request_id: longer than 128 characters");
  }
  for (char c : request_id) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError("request_id: only printable ASCII without spaces");
    }
  }
  return absl::OkStatus();
}

namespace internal {

absl::Status RunMutation(pg::Pool& pool, absl::string_view method,
                         const google::protobuf::Message& request, absl::string_view principal,
                         absl::string_view request_id, google::protobuf::Message& response,
                         const std::function<absl::Status(pg::Transaction&)>& body,
                         const MutationHooks& hooks) {
  RETURN_IF_ERROR(ValidateRequestId(request_id));
  const std::string request_hash = request_id.empty() ? "" : CanonicalHash(request);
  absl::Status status;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    response.Clear();
    status = Attempt(pool, method, request_hash, principal, request_id, response, body, hooks);
    if (status.ok() || !pg::IsRetryable(status)) return status;
    log::Debug("mutation", "retrying transaction",
               {{"method", std::string(method)},
                {"attempt", absl::StrCat(attempt)},
                {"error", status.ToString()}});
  }
  return status;
}

void LogAbandonedNumbers(absl::string_view method, const std::vector<int64_t>& numbers,
                         const absl::Status& status) {
  const size_t abandoned = status.ok() && !numbers.empty() ? numbers.size() - 1 : numbers.size();
  for (size_t i = 0; i < abandoned; ++i) {
    log::Warn("mutation",
              pg::IsCommitOutcomeUnknown(status) && i + 1 == numbers.size()
                  ? "audit event number taken; its commit outcome is unknown"
                  : "audit event number taken and rolled back (attested void later)",
              {{"method", std::string(method)},
               {"owner_sequence", absl::StrCat(numbers[i])},
               {"error", i + 1 == numbers.size() ? status.ToString() : "retried"}});
  }
}

}  // namespace internal
}  // namespace ulticode::mutation
