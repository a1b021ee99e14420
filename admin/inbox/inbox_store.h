// The bridge's side of Admin's database: consumer_inbox inserts and the
// poison store (schema: admin/migrations/0001_admin.sql). Both take an
// open transaction: the bridge makes a whole batch durable in one commit and
// acknowledges the stream entries only after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "admin/inbox/entry_validation.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"

namespace ulticode::admin::inbox {

// LISTEN channel notified on every commit that inserted PENDING inbox rows.
inline constexpr char kNotifyChannel[] = "consumer_inbox";

struct Arrival {
  std::string stream;
  std::string entry_id;
  AcceptedEntry entry;
};

struct TakeOver {
  int64_t inserted = 0;
  // The arrivals that were inserted (first deliveries), in arrival order.
  std::vector<const Arrival*> fresh;
  // Already in the inbox with the same bytes (a re-delivery): acknowledge.
  std::vector<const Arrival*> duplicates;
  // Already in the inbox with DIFFERENT bytes: never overwritten; poison.
  std::vector<const Arrival*> conflicts;
  // The event id is already in the inbox from ANOTHER owner (whose name is
  // given): only a compromised key of that owner can have put it there;
  // poison with a reason of its own.
  std::vector<std::pair<const Arrival*, std::string>> foreign;
};

// How new rows are inserted: PENDING for the lease consumer (with the
// envelope and its seal, which it writes to audit_logs), or PROCESSED
// when the caller writes their audit_logs rows in the same transaction (the
// SHA-256 of the envelope only: each payload is stored once).
enum class InsertAs { kPending, kProcessed };

// Inserts each arrival into consumer_inbox for `consumer` unless its event id
// is there already, then sorts the ones that were there into duplicates and
// conflicts by comparing SHA-256 of the bytes. Arrivals must have distinct
// event ids (the bridge collapses repeats within a batch first).
absl::StatusOr<TakeOver> InsertIfAbsent(pg::Transaction& tx, const std::string& consumer,
                                        const std::vector<Arrival>& arrivals, InsertAs status);

// Asks for the log proofs of re-delivered events to be sent again
// (log_proof_requests): their owner has not confirmed them, and confirms
// only on proof that they are in the log (admin/transparency/witness_feed.h).
absl::Status RequestProofs(pg::Transaction& tx, const std::vector<const Arrival*>& redelivered);

struct Poison {
  std::string stream;
  std::string entry_id;
  std::string event_id;  // may be empty
  PoisonReason reason;
  std::string detail;
  redis::StreamFields fields;
};

// Stores poison entries; a re-delivered entry (same stream, entry id and
// fields) is stored once, while another entry under a repeated id is stored
// too. Returns how many rows were new.
absl::StatusOr<int64_t> StorePoison(pg::Transaction& tx, const std::string& consumer,
                                    const std::vector<Poison>& poison);

// The poison row's `fields` document: [{"name":..,"text":..} |
// {"name":..,"hex":..} | {"name":..,"omitted_bytes":N}] (values over 64 KiB,
// and all values once 256 KiB are stored).
std::string FieldsJson(const redis::StreamFields& fields);

}  // namespace ulticode::admin::inbox
