// The one place that maps PostgreSQL errors (SQLSTATE) to absl::Status.
//
//   23505 unique_violation            -> ALREADY_EXISTS   (retryable: re-read finds the row)
//   40001 serialization_failure,
//   40P01 deadlock_detected,
//   55P03 lock_not_available          -> ABORTED          (retry the whole transaction)
//   57014 query_canceled (timeout)    -> DEADLINE_EXCEEDED
//   08xxx, 57P01..57P03, lost socket  -> UNAVAILABLE      (connection dropped; redial)
//   23xxx other integrity violations  -> FAILED_PRECONDITION
//   22xxx data exceptions             -> INVALID_ARGUMENT
//   53xxx insufficient resources      -> RESOURCE_EXHAUSTED
//   everything else (42xxx, XX...)    -> INTERNAL
// A connection lost while COMMIT was in flight is UNKNOWN ("commit outcome
// unknown"): the transaction may or may not have committed; callers resolve it
// with an idempotency key.
//
// The SQLSTATE travels as a status payload; the SQL text never reaches clients.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ulticode::pg {

inline constexpr char kSqlStatePayload[] = "ulticode.dev/pg.sqlstate";
inline constexpr char kCommitUnknownPayload[] = "ulticode.dev/pg.commit_outcome_unknown";

absl::Status StatusFromSqlState(absl::string_view sqlstate, absl::string_view message);

// The SQLSTATE carried by `status`, or "" when none.
std::string SqlState(const absl::Status& status);

bool IsUniqueViolation(const absl::Status& status);
bool IsCommitOutcomeUnknown(const absl::Status& status);
absl::Status CommitOutcomeUnknownError(absl::string_view detail);

// True when running the whole transaction again may succeed: serialization
// failures, deadlocks, unique violations from racing inserts, lost connections
// and timeouts. Never true for commit-outcome-unknown (retry only with an
// idempotency key).
bool IsRetryable(const absl::Status& status);

}  // namespace ulticode::pg
