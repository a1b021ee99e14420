#include "admin/inbox/bridge.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/worker/instance_id.h"
#include "common/worker/loop.h"

namespace ulticode::admin::inbox {
namespace {

constexpr char kComponent[] = "admin.inbox_bridge";

}  // namespace

redis::Options ReadingOptions(const BridgeOptions& options) {
  redis::Options redis = options.redis;
  redis.reply_limits.max_array_bytes = options.limits.max_entry_bytes;
  redis.reply_limits.max_array_elements =
      std::max<size_t>(1024, static_cast<size_t>(options.batch_size));
  redis.reply_limits.max_element_bytes = size_t{2} << 20;
  return redis;
}

InboxBridge::InboxBridge(BridgeOptions options, prometheus::Registry& registry, BridgeHooks hooks)
    : options_(std::move(options)),
      consumer_name_(options_.consumer_name.empty() ? worker::DefaultInstanceId()
                                                    : options_.consumer_name),
      hooks_(std::move(hooks)),
      writer_metrics_(registry) {
  direct_fallbacks_ = &metrics::Counter(
      registry, "ulticode_inbox_direct_write_fallbacks_total",
      "Batches whose audit rows could not be written in the inbox transaction; the lease "
      "consumer took them");
  entries_ = &prometheus::BuildCounter()
                  .Name("ulticode_inbox_entries_total")
                  .Help(
                      "Stream entries handled by the inbox bridge, by outcome "
                      "(inserted, duplicate, poison)")
                  .Register(registry);
  poison_ = &prometheus::BuildCounter()
                 .Name("ulticode_inbox_poison_total")
                 .Help("Stream entries stored in the poison store, by reason")
                 .Register(registry);
  personal_values_ = &prometheus::BuildCounter()
                          .Name("ulticode_inbox_personal_values_total")
                          .Help(
                              "Personal values beside taken-over envelopes, by outcome: stored, or "
                              "refused (they open no commitment of the sealed envelope)")
                          .Register(registry);
  group_created_ = &prometheus::BuildCounter()
                        .Name("ulticode_inbox_group_created_total")
                        .Help("Consumer groups (re-)created, e.g. after Redis lost its data")
                        .Register(registry);
  autoclaimed_ = &prometheus::BuildCounter()
                      .Name("ulticode_inbox_autoclaimed_total")
                      .Help("Pending entries taken over from an idle consumer with XAUTOCLAIM")
                      .Register(registry);
  errors_ = &prometheus::BuildCounter()
                 .Name("ulticode_inbox_bridge_errors_total")
                 .Help("Bridge cycles that failed (Redis or PostgreSQL unavailable); retried")
                 .Register(registry);
  lag_ = &prometheus::BuildHistogram()
              .Name("ulticode_inbox_arrival_lag_seconds")
              .Help(
                  "Time from the owner's commit (occurred_at) to the event being durable "
                  "in the inbox")
              .Register(registry);
  // Every labelled series exists from the start at 0, so rate() and
  // increase() over it (the alert rules) see the first event.
  for (const auto& [owner, stream] : options_.streams) {
    const prometheus::Labels labels{{"stream", stream}};
    for (const char* outcome : {"inserted", "duplicate", "poison"}) {
      entries_->Add({{"stream", stream}, {"outcome", outcome}});
    }
    for (int r = 0; r <= static_cast<int>(kLastPoisonReason); ++r) {
      poison_->Add({{"stream", stream},
                    {"reason", std::string(PoisonReasonName(static_cast<PoisonReason>(r)))}});
    }
    group_created_->Add(labels);
    autoclaimed_->Add(labels);
    for (const char* outcome : {"stored", "refused"}) {
      personal_values_->Add({{"stream", stream}, {"outcome", outcome}});
    }
    errors_->Add(labels);
  }
}

InboxBridge::~InboxBridge() { Stop(); }

void InboxBridge::Start() {
  waker_.Reset();
  for (size_t i = 0; i < options_.streams.size(); ++i) {
    threads_.emplace_back([this, i] { StreamLoop(i); });
  }
  log::Info(kComponent, "started",
            {{"group", options_.group},
             {"consumer", consumer_name_},
             {"streams", absl::StrCat(options_.streams.size())},
             {"batch_size", absl::StrCat(options_.batch_size)},
             {"claim_idle", absl::FormatDuration(options_.claim_idle)}});
}

void InboxBridge::Stop() {
  waker_.Stop();
  for (auto& t : threads_) t.join();
  if (!threads_.empty()) log::Info(kComponent, "stopped", {{"consumer", consumer_name_}});
  threads_.clear();
}

absl::StatusOr<std::vector<redis::StreamEntry>> InboxBridge::Read(redis::Client& redis,
                                                                  StreamCursor& cursor,
                                                                  BridgeCycle& cycle) {
  const prometheus::Labels labels{{"stream", cursor.stream}};
  if (!cursor.group_ready) {
    absl::StatusOr<bool> created = redis.XGroupCreate(cursor.stream, options_.group, "0", true);
    // A Redis at its memory limit refuses XGROUP CREATE even for a group that
    // exists, but serves reads, XACK and XTRIM, which free memory: read on
    // (a group that is really missing fails the read; creation is retried).
    if (!created.ok() && !absl::IsResourceExhausted(created.status())) return created.status();
    cursor.group_ready = created.ok();
    if (created.ok() && *created) {
      cycle.group_created = 1;
      group_created_->Add(labels).Increment();
      log::Warn(kComponent, "consumer group created; reading the stream from its start",
                {{"stream", cursor.stream}, {"group", options_.group}});
    }
  }
  if (cursor.read_own_pending && !cursor.new_entries_next) {
    ASSIGN_OR_RETURN(auto reads, redis.XReadGroup(options_.group, consumer_name_, {cursor.stream},
                                                  options_.batch_size, absl::ZeroDuration(), "0"));
    if (!reads.empty() && !reads[0].entries.empty()) {
      cursor.new_entries_next = true;
      return std::move(reads[0].entries);
    }
    cursor.read_own_pending = false;
  }
  const bool new_entries_turn = cursor.new_entries_next;
  cursor.new_entries_next = false;
  const absl::Time now = absl::Now();
  // (Not on the new entries' turn: the batch just retried may be idle long
  // enough to be taken over again, by this very consumer.)
  if (!new_entries_turn && now >= cursor.next_autoclaim) {
    ASSIGN_OR_RETURN(
        redis::AutoClaimResult claimed,
        redis.XAutoClaim(cursor.stream, options_.group, consumer_name_, options_.claim_idle,
                         cursor.autoclaim_start, options_.batch_size));
    cursor.autoclaim_start = claimed.next_start;
    if (claimed.next_start == "0-0") cursor.next_autoclaim = now + options_.claim_interval;
    // Ids whose entries vanished while pending: Redis dropped them from the
    // pending list; record them so the loss is visible.
    for (const std::string& id : claimed.deleted_ids) cursor.vanished.push_back(id);
    if (!claimed.entries.empty() || !cursor.vanished.empty()) {
      autoclaimed_->Add(labels).Increment(static_cast<double>(claimed.entries.size()));
      log::Warn(kComponent, "took over entries left pending by another consumer",
                {{"stream", cursor.stream}, {"entries", absl::StrCat(claimed.entries.size())}});
      return std::move(claimed.entries);
    }
  }
  ASSIGN_OR_RETURN(auto reads, redis.XReadGroup(options_.group, consumer_name_, {cursor.stream},
                                                options_.batch_size, options_.block, ">"));
  if (reads.empty()) return std::vector<redis::StreamEntry>{};
  return std::move(reads[0].entries);
}

absl::StatusOr<BridgeCycle> InboxBridge::RunOnce(pg::Connection& pg, redis::Client& redis,
                                                 StreamCursor& cursor) {
  BridgeCycle cycle;
  auto entries = Read(redis, cursor, cycle);
  if (!entries.ok()) {
    // NOGROUP, a deleted stream, a restarted Redis: make sure the group
    // exists before the next read (cheap when it does). A read that timed
    // out may still have delivered entries to us: re-read our pending list.
    cursor.group_ready = false;
    cursor.read_own_pending = true;
    return entries.status();
  }
  for (const std::string& id : cursor.vanished)
    entries->push_back(redis::StreamEntry{.id = id, .deleted = true});
  cycle.read = static_cast<int>(entries->size());
  if (entries->empty()) return cycle;
  auto done = TakeOverBatch(pg, redis, cursor, *entries, cycle);
  // Whatever failed, the batch is still in this consumer's pending list:
  // read it again before anything new.
  if (!done.ok()) {
    cursor.read_own_pending = true;
  } else {
    cursor.vanished.clear();
  }
  return done;
}

absl::StatusOr<BridgeCycle> InboxBridge::TakeOverBatch(
    pg::Connection& pg, redis::Client& redis, const StreamCursor& cursor,
    const std::vector<redis::StreamEntry>& entries, BridgeCycle cycle) {
  std::vector<BatchItem> items;
  items.reserve(entries.size());
  for (const redis::StreamEntry& e : entries) items.push_back({cursor.owner, cursor.stream, &e});
  const PreparedBatch batch =
      PrepareBatch(items, absl::Now(), *options_.keys->Current(), seals_, options_.limits);
  if (hooks_.before_insert) RETURN_IF_ERROR(hooks_.before_insert(entries));

  ASSIGN_OR_RETURN(const Absorbed absorbed, AbsorbOrFallBack(pg, cursor.stream, entries, batch));
  writer_metrics_.Committed(absorbed.inserted.logs, absorbed.inserted.written, absl::Now());
  if (hooks_.after_commit) RETURN_IF_ERROR(hooks_.after_commit(entries));

  std::vector<std::string> ack_ids;
  ack_ids.reserve(entries.size());
  for (const redis::StreamEntry& e : entries) ack_ids.push_back(e.id);
  ASSIGN_OR_RETURN(const int64_t acked, redis.XAck(cursor.stream, options_.group, ack_ids));
  cycle.acked = static_cast<int>(acked);
  Count(cursor, absorbed, cycle);
  return cycle;
}

absl::StatusOr<InboxBridge::Absorbed> InboxBridge::AbsorbOrFallBack(
    pg::Connection& pg, const std::string& stream, const std::vector<redis::StreamEntry>& entries,
    const PreparedBatch& batch) {
  const bool direct = options_.write_audit_logs;
  auto absorbed = Absorb(pg, stream, entries, batch, direct);
  if (absorbed.ok() || !direct || pg.broken()) return absorbed;
  // Whatever refused the audit rows (a constraint, a value PostgreSQL would
  // not take), the lease consumer retries each event with back-off and
  // moves it to DEAD if it never goes through.
  direct_fallbacks_->Increment();
  log::Warn(kComponent, "audit rows not written in the inbox transaction; left to the consumer",
            {{"stream", stream}, {"error", absorbed.status().ToString()}});
  return Absorb(pg, stream, entries, batch, false);
}

absl::StatusOr<InboxBridge::Absorbed> InboxBridge::Absorb(
    pg::Connection& pg, const std::string& stream, const std::vector<redis::StreamEntry>& entries,
    const PreparedBatch& batch, bool direct) {
  Absorbed out;
  ASSIGN_OR_RETURN(pg::Transaction tx, pg.Begin());
  ASSIGN_OR_RETURN(out.inserted, InsertBatch(tx, options_.inbox_consumer, batch,
                                             direct ? InsertAs::kProcessed : InsertAs::kPending));
  for (const Refusal& r : out.inserted.refused) {
    const redis::StreamEntry& e = entries[r.item];
    out.poison.push_back(Poison{stream, e.id, r.event_id, r.reason, r.detail, e.fields});
  }
  RETURN_IF_ERROR(StorePoison(tx, options_.inbox_consumer, out.poison).status());
  if (hooks_.before_commit) RETURN_IF_ERROR(hooks_.before_commit(entries));
  RETURN_IF_ERROR(tx.Commit());
  return out;
}

void InboxBridge::Count(const StreamCursor& cursor, const Absorbed& absorbed, BridgeCycle& cycle) {
  const TakeOver& take = absorbed.inserted.take;
  cycle.inserted = static_cast<int>(take.inserted);
  cycle.written = static_cast<int>(absorbed.inserted.written);
  cycle.duplicates = static_cast<int>(take.duplicates.size()) + absorbed.inserted.repeats_taken;
  cycle.poison = static_cast<int>(absorbed.poison.size());
  entries_->Add({{"stream", cursor.stream}, {"outcome", "inserted"}}).Increment(cycle.inserted);
  entries_->Add({{"stream", cursor.stream}, {"outcome", "duplicate"}}).Increment(cycle.duplicates);
  entries_->Add({{"stream", cursor.stream}, {"outcome", "poison"}}).Increment(cycle.poison);
  for (const Poison& p : absorbed.poison) {
    poison_->Add({{"stream", cursor.stream}, {"reason", std::string(PoisonReasonName(p.reason))}})
        .Increment();
    log::Error(kComponent, "poison entry stored and acknowledged",
               {{"stream", cursor.stream},
                {"entry_id", p.entry_id},
                {"event_id", p.event_id},
                {"reason", std::string(PoisonReasonName(p.reason))},
                {"detail", p.detail}});
  }
  personal_values_->Add({{"stream", cursor.stream}, {"outcome", "stored"}})
      .Increment(static_cast<double>(absorbed.inserted.personal_stored));
  for (const Arrival* a : absorbed.inserted.taken) {
    if (a->entry.refused_personal.empty()) continue;
    personal_values_->Add({{"stream", cursor.stream}, {"outcome", "refused"}})
        .Increment(static_cast<double>(a->entry.refused_personal.size()));
    // Paths and reasons only: a refused value is never logged.
    log::Warn(kComponent, "personal values refused; the event is taken over without them",
              {{"stream", cursor.stream},
               {"event_id", a->entry.event_id},
               {"refused", absl::StrJoin(a->entry.refused_personal, "; ")}});
  }
  // Lag of first arrivals only: a re-sent duplicate would count its re-send delay.
  auto& lag = lag_->Add({{"owner", audit::OwnerName(cursor.owner)}}, metrics::LatencyBuckets());
  const absl::Time committed = absl::Now();
  for (const Arrival* a : take.fresh) {
    lag.Observe(absl::ToDoubleSeconds(committed - a->entry.occurred_at));
  }
}

void InboxBridge::StreamLoop(size_t index) {
  StreamCursor cursor;
  cursor.owner = options_.streams[index].first;
  cursor.stream = options_.streams[index].second;
  redis::Client client(ReadingOptions(options_));
  worker::Loop loop(waker_, options_.pg, options_.backoff, kComponent);
  while (!waker_.stopping()) {
    pg::Connection* conn = loop.Database();
    if (conn == nullptr) continue;
    auto cycle = RunOnce(*conn, client, cursor);
    if (!cycle.ok()) {
      errors_->Add({{"stream", cursor.stream}}).Increment();
      loop.Failed("cycle failed; nothing acknowledged, will re-read", cycle.status(),
                  {{"stream", cursor.stream}});
      continue;
    }
    loop.Succeeded();
    // No sleep: the next XREADGROUP blocks until entries arrive or `block` ends.
  }
}

}  // namespace ulticode::admin::inbox
