#include "owner/mutation/mutation.h"

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/pg/errors.h"

namespace ulticode::mutation {
namespace {

constexpr int kMaxAttempts = 4;

absl::Status Attempt(pg::Pool& pool, absl::string_view method, const IdempotencyKey& key,
                     google::protobuf::Message& response,
                     const std::function<absl::Status(pg::Transaction&)>& body,
                     const MutationHooks& hooks) {
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool.Acquire());
  ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
  ASSIGN_OR_RETURN(const bool seen, key.Replay(tx, response));
  if (seen) return tx.Commit();
  RETURN_IF_ERROR(body(tx));
  key.Save(tx, response);  // with the outbox row and COMMIT: one round trip
  if (hooks.before_commit) RETURN_IF_ERROR(hooks.before_commit(method));
  return tx.Commit();
}

}  // namespace

namespace internal {

absl::Status RunMutation(pg::Pool& pool, absl::string_view method,
                         const google::protobuf::Message& request, absl::string_view principal,
                         absl::string_view request_id, google::protobuf::Message& response,
                         const std::function<absl::Status(pg::Transaction&)>& body,
                         const MutationHooks& hooks) {
  RETURN_IF_ERROR(ValidateRequestId(request_id));
  const IdempotencyKey key(method, request, principal, request_id);
  absl::Status status;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    response.Clear();
    status = Attempt(pool, method, key, response, body, hooks);
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
