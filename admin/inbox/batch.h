// One batch of stream entries on its way into consumer_inbox: the rules the
// inbox bridge and the poison replay share.
//
//   PrepareBatch   validates every entry (ValidateEntry), collapses repeats
//                  of an event within the batch (same bytes), refuses a
//                  second copy with other bytes (conflict), and sorts the
//                  arrivals by event id: two writers inserting overlapping
//                  batches lock the same keys in the same order, so they
//                  cannot deadlock.
//   InsertBatch    in the caller's transaction: inserts the arrivals if
//                  absent (InsertIfAbsent), turns an event the inbox holds
//                  with other bytes into a conflict (with its repeats), and
//                  with InsertAs::kProcessed writes the audit rows of the
//                  first deliveries.
//
// Pure data and one transaction; thread-compatible.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "admin/audit_logs/writer.h"
#include "admin/inbox/entry_validation.h"
#include "admin/inbox/inbox_store.h"
#include "common/crypto/key_directory.h"
#include "common/pg/connection.h"
#include "common/redis/redis_client.h"

namespace ulticode::admin::inbox {

// One entry of a batch, read from `stream` of `owner`.
struct BatchItem {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  std::string stream;
  const redis::StreamEntry* entry = nullptr;
};

// An item the inbox does not take: the poison reason and its detail.
struct Refusal {
  size_t item = 0;
  PoisonReason reason = PoisonReason::kInvalidRecord;
  std::string event_id;  // the id the entry claimed, if any
  std::string detail;
};

struct PreparedBatch {
  // The first copy of each valid event, sorted by event id.
  std::vector<Arrival> arrivals;
  // The item of each arrival.
  std::vector<size_t> arrival_items;
  // Later items carrying an arrival's event with the same bytes:
  // (item, index into arrivals).
  std::vector<std::pair<size_t, size_t>> repeats;
  // Items refused by validation or as an in-batch conflict.
  std::vector<Refusal> refused;
};

PreparedBatch PrepareBatch(const std::vector<BatchItem>& items, absl::Time now,
                           const crypto::KeyDirectory& keys, seal::Verifier& seals,
                           const ValidationLimits& limits);

struct InsertedBatch {
  TakeOver take;
  // Every item the inbox does not take: the batch's refusals, then the
  // arrivals it holds with other bytes and their repeats (kConflict).
  std::vector<Refusal> refused;
  // Arrivals now in the inbox with these bytes (fresh and duplicates), in
  // event id order; and every item they came in (their repeats too), each
  // with its arrival.
  std::vector<const Arrival*> taken;
  struct TakenItem {
    size_t item = 0;
    const Arrival* arrival = nullptr;
  };
  std::vector<TakenItem> taken_items;
  // Repeats within the batch of events now in the inbox (duplicates, to
  // whoever counts outcomes).
  int repeats_taken = 0;
  // With kProcessed: the audit rows written (those of `take.fresh`).
  std::vector<audit_logs::AuditLogInput> logs;
  int64_t written = 0;
  // Personal values of the taken arrivals newly kept (admin/personal).
  int64_t personal_stored = 0;
};

// `batch` must outlive the result (it points into `batch.arrivals`).
absl::StatusOr<InsertedBatch> InsertBatch(pg::Transaction& tx, const std::string& consumer,
                                          const PreparedBatch& batch, InsertAs as);

}  // namespace ulticode::admin::inbox
