#include "admin/inbox/batch.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "admin/personal/personal_store.h"
#include "common/base/status_macros.h"

namespace ulticode::admin::inbox {
namespace {

constexpr char kInBatchConflict[] = "event id twice in one batch with different bytes";
constexpr char kInboxConflict[] =
    "event id already taken over with different bytes; kept the first";

// Sorts `batch`'s arrivals by event id, keeping arrival_items and repeats in step.
void SortByEventId(PreparedBatch& batch) {
  std::vector<size_t> order(batch.arrivals.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return batch.arrivals[x].entry.event_id < batch.arrivals[y].entry.event_id;
  });
  std::vector<Arrival> arrivals;
  std::vector<size_t> items;
  std::vector<size_t> new_index(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    new_index[order[i]] = i;
    arrivals.push_back(std::move(batch.arrivals[order[i]]));
    items.push_back(batch.arrival_items[order[i]]);
  }
  batch.arrivals = std::move(arrivals);
  batch.arrival_items = std::move(items);
  for (auto& [item, arrival] : batch.repeats) arrival = new_index[arrival];
}

}  // namespace

PreparedBatch PrepareBatch(const std::vector<BatchItem>& items, absl::Time now,
                           const crypto::KeyDirectory& keys, seal::Verifier& seals,
                           const ValidationLimits& limits) {
  PreparedBatch batch;
  absl::flat_hash_map<std::string, size_t> first_of;  // event id -> arrival
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& item = items[i];
    Verdict verdict = ValidateEntry(item.owner, *item.entry, now, keys, seals, limits);
    if (auto* r = std::get_if<Rejection>(&verdict)) {
      batch.refused.push_back({i, r->reason, r->event_id, r->detail});
      continue;
    }
    AcceptedEntry& accepted = std::get<AcceptedEntry>(verdict);
    if (auto first = first_of.find(accepted.event_id); first != first_of.end()) {
      if (batch.arrivals[first->second].entry.envelope == accepted.envelope) {
        batch.repeats.emplace_back(i, first->second);
      } else {
        batch.refused.push_back({i, PoisonReason::kConflict, accepted.event_id, kInBatchConflict});
      }
      continue;
    }
    first_of[accepted.event_id] = batch.arrivals.size();
    batch.arrivals.push_back(Arrival{item.stream, item.entry->id, std::move(accepted)});
    batch.arrival_items.push_back(i);
  }
  SortByEventId(batch);
  return batch;
}

absl::StatusOr<InsertedBatch> InsertBatch(pg::Transaction& tx, const std::string& consumer,
                                          const PreparedBatch& batch, InsertAs as) {
  InsertedBatch out;
  ASSIGN_OR_RETURN(out.take, InsertIfAbsent(tx, consumer, batch.arrivals, as));
  RETURN_IF_ERROR(RequestProofs(tx, out.take.duplicates));
  const absl::flat_hash_set<const Arrival*> conflicted(out.take.conflicts.begin(),
                                                       out.take.conflicts.end());
  const absl::flat_hash_map<const Arrival*, std::string> foreign(out.take.foreign.begin(),
                                                                 out.take.foreign.end());
  out.refused = batch.refused;
  // Whether `a` was refused (with its repeats): a conflict, or an event id
  // another owner holds.
  auto refused = [&](size_t item, const Arrival& a) {
    if (auto holder = foreign.find(&a); holder != foreign.end()) {
      out.refused.push_back({item, PoisonReason::kEventIdOfAnotherOwner, a.entry.event_id,
                             absl::StrCat("event id already taken over from owner ", holder->second,
                                          "; kept the first")});
      return true;
    }
    if (!conflicted.contains(&a)) return false;
    out.refused.push_back({item, PoisonReason::kConflict, a.entry.event_id, kInboxConflict});
    return true;
  };
  for (size_t i = 0; i < batch.arrivals.size(); ++i) {
    const Arrival& a = batch.arrivals[i];
    if (refused(batch.arrival_items[i], a)) continue;
    out.taken.push_back(&a);
    out.taken_items.push_back({batch.arrival_items[i], &a});
  }
  for (const auto& [item, arrival] : batch.repeats) {
    const Arrival& a = batch.arrivals[arrival];
    if (refused(item, a)) continue;
    out.taken_items.push_back({item, &a});
    ++out.repeats_taken;
  }
  std::vector<personal::EventValues> values;
  for (const Arrival* a : out.taken) {
    if (!a->entry.personal.empty()) values.push_back({&a->entry.event, &a->entry.personal});
  }
  ASSIGN_OR_RETURN(out.personal_stored, personal::StoreValues(tx, values));
  if (as == InsertAs::kProcessed) {
    for (const Arrival* a : out.take.fresh) {
      out.logs.push_back(audit_logs::AuditLogInput{&a->entry.event, &a->entry.envelope,
                                                   &a->entry.seal, &a->entry.key_id});
    }
    ASSIGN_OR_RETURN(out.written, audit_logs::InsertAuditLogs(tx, out.logs));
  }
  return out;
}

}  // namespace ulticode::admin::inbox
