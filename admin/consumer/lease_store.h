// The lease consumer's side of consumer_inbox: claim due rows under a lease
// with a fresh fencing token, renew it, and settle rows. Every settle
// statement only touches rows still held with the caller's token, so a worker
// whose lease expired and was taken over cannot settle (or commit) late.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/pg/connection.h"

namespace ulticode::admin::consumer {

struct LeasedRow {
  int64_t id = 0;
  std::string event_id;
  std::string payload;  // the owner's serialized AuditEvent
  int64_t fencing_token = 0;
  int attempts = 0;  // including this claim
  std::string seal;  // the seal of `payload` (common/seal/seal.h), and its key
  std::string key_id;
};

struct HeldRow {
  int64_t id;
  int64_t fencing_token;
};

// Claims up to `limit` rows of `consumer` that are PENDING and due, or
// PROCESSING with an expired lease (a crashed or stalled worker), with
// FOR UPDATE SKIP LOCKED: PROCESSING, lease owner and expiry set, a new
// fencing token, attempts + 1. An expired row that already had
// `max_attempts` claims goes DEAD instead (a row that keeps killing its
// worker must not crash-loop the consumer forever). Rows whose id is in
// `skip` are left to other consumers.
absl::StatusOr<std::vector<LeasedRow>> Claim(pg::Connection& conn, const std::string& consumer,
                                             const std::string& lease_owner, absl::Duration lease,
                                             int limit, int max_attempts,
                                             const std::vector<int64_t>& skip = {});

// Pushes the lease of rows still held with their token `lease` ahead. Rows
// locked by their worker's completing transaction are skipped (they are
// being settled). Returns how many were renewed.
absl::StatusOr<int64_t> Renew(pg::Connection& conn, const std::vector<HeldRow>& rows,
                              absl::Duration lease);

// Inside the transaction that writes the rows' effects: marks PROCESSED the
// rows still held with their token and returns their ids. The row locks
// taken here keep them from being claimed until the transaction ends.
absl::StatusOr<std::vector<int64_t>> CompleteHeld(pg::Transaction& tx,
                                                  const std::vector<HeldRow>& rows);

struct Failure {
  HeldRow row;
  absl::Duration retry_delay;
  std::string error;
};
// A failed attempt: PENDING again after the delay, or DEAD once `attempts`
// reached `max_attempts`; the error and the first failure time are kept.
// Returns (rescheduled, dead).
absl::StatusOr<std::pair<int64_t, int64_t>> Fail(pg::Connection& conn,
                                                 const std::vector<Failure>& failures,
                                                 int max_attempts);

// An error retrying cannot fix: DEAD at once with its reason.
absl::StatusOr<int64_t> MarkDead(pg::Connection& conn, const HeldRow& row,
                                 const std::string& reason);
// A held row this binary cannot handle yet (an event newer than it knows,
// during a rolling upgrade): PENDING again after `delay`, with the claim's
// attempt given back, so it never goes DEAD for it; a binary that knows the
// event takes it.
absl::StatusOr<int64_t> Postpone(pg::Connection& conn, const HeldRow& row, absl::Duration delay,
                                 const std::string& reason);

}  // namespace ulticode::admin::consumer
