#include "owner/outbox/dispatcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/seal/seal.h"
#include "common/worker/loop.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.dispatcher";

DispatcherOptions WithCutoff(DispatcherOptions options) {
  options.pg.idle_in_transaction_timeout = options.claim_lease;
  return options;
}

}  // namespace

Dispatcher::Dispatcher(DispatcherOptions options, prometheus::Registry& registry, FaultHooks hooks)
    : options_(WithCutoff(std::move(options))),
      stream_(options_.stream.empty() ? audit::StreamFor(options_.owner) : options_.stream),
      seals_(options_.seals != nullptr ? options_.seals : &own_seals_),
      hooks_(std::move(hooks)),
      watch_(stream_, options_.admin_group) {
  for (const crypto::SigningKey& key : options_.previous_keys) mac_keys_[key.key_id()] = &key;
  if (options_.signer != nullptr) mac_keys_[options_.signer->key_id()] = options_.signer;
  const prometheus::Labels labels{{"owner", audit::OwnerName(options_.owner)}};
  claimed_ = &metrics::Counter(registry, "ulticode_outbox_claimed_total",
                               "Outbox rows claimed for publication", labels);
  published_ =
      &metrics::Counter(registry, "ulticode_outbox_published_total",
                        "Outbox rows published to the stream and marked PUBLISHED", labels);
  transient_failures_ =
      &metrics::Counter(registry, "ulticode_outbox_retries_total",
                        "Rows rescheduled after a transient publication failure", labels);
  dead_ = &metrics::Counter(registry, "ulticode_outbox_dead_total",
                            "Rows that can never be published, moved to DEAD", labels);
  wakeups_ = &metrics::Counter(registry, "ulticode_outbox_wakeups_total",
                               "Dispatcher wake-ups by commits of audited changes in this process",
                               labels);
  resends_ = &metrics::Counter(
      registry, "ulticode_outbox_resends_total",
      "Rows published again: their entries were lost, or acknowledged long ago and still "
      "unproved",
      labels);
  seals_replaced_ = &metrics::Counter(
      registry, "ulticode_outbox_seals_replaced_total",
      "Rows published again whose kept seal no longer verified (altered through the database "
      "login): sealed anew",
      labels);
  lag_ = &prometheus::BuildHistogram()
              .Name("ulticode_outbox_publish_lag_seconds")
              .Help("Time from outbox insert to the row being marked PUBLISHED")
              .Register(registry)
              .Add(labels, metrics::LatencyBuckets());
}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::Wake() {
  if (!options_.wake_on_commit) return;
  wakeups_->Increment();
  waker_.Wake();
}

void Dispatcher::Start() {
  waker_.Reset();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
  log::Info(kComponent, "started",
            {{"owner", audit::OwnerName(options_.owner)},
             {"threads", absl::StrCat(options_.threads)},
             {"batch_size", absl::StrCat(options_.batch_size)},
             {"poll_interval", absl::FormatDuration(options_.poll_interval)},
             {"linger", absl::FormatDuration(options_.linger)},
             {"wake_on_commit", options_.wake_on_commit ? "on" : "off"}});
}

void Dispatcher::Stop() {
  waker_.Stop();
  for (auto& t : threads_) t.join();
  if (!threads_.empty())
    log::Info(kComponent, "stopped", {{"owner", audit::OwnerName(options_.owner)}});
  threads_.clear();
}

bool Dispatcher::OwnersKey(const std::string& key_id) const {
  if (options_.keys == nullptr) return true;
  return options_.keys->Current()->FindOf(audit::OwnerName(options_.owner), key_id) != nullptr;
}

bool Dispatcher::KeptSealVerifies(const ClaimedRow& row) const {
  if (row.seal.empty()) return false;
  if (options_.keys != nullptr) {
    const auto directory = options_.keys->Current();
    const crypto::KeyDirectory::Entry* entry =
        directory->FindOf(audit::OwnerName(options_.owner), row.sealed_by);
    if (entry != nullptr) {
      return seals_->Verify(entry->key, row.payload, row.seal).ok();
    }
  }
  const auto key = mac_keys_.find(row.sealed_by);
  return key != mac_keys_.end() &&
         seals_->Verify(key->second->public_key(), row.payload, row.seal).ok();
}

absl::Status Dispatcher::CheckRow(const ClaimedRow& row) const {
  // The envelope and the personal values beside it: what an event with its
  // values embedded weighed (Admin refuses a larger entry as too_large).
  if (row.payload.size() + row.personal.size() > options_.max_event_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("event is ", row.payload.size(), " bytes and its personal values ",
                     row.personal.size(), ", over the limit of ", options_.max_event_bytes));
  }
  // A seal of this owner's over the payload proves it as well as the MAC
  // (a re-send whose MAC key was rotated out).
  if (!KeptSealVerifies(row)) {
    const auto key = mac_keys_.find(row.key_id);
    if (key == mac_keys_.end()) {
      if (!OwnersKey(row.key_id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the row names MAC key ", row.key_id.substr(0, 64),
                         ", which is not one of this owner's keys: it was not written by this "
                         "owner's code (forged)"));
      }
      return absl::UnavailableError(
          absl::StrCat("the row's MAC key ", row.key_id.substr(0, 64),
                       " is not loaded here (--previous-audit-signing-key-files)"));
    }
    ASSIGN_OR_RETURN(const std::string mac, RowMac(*key->second, row.payload));
    if (!crypto::ConstantTimeEquals(mac, row.mac)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the row's MAC does not verify with key ", row.key_id,
                       ": it was not written by this owner's code (forged or altered)"));
    }
  }
  audit::AuditEvent event;
  if (!event.ParseFromString(row.payload)) {
    return absl::InvalidArgumentError("payload is not a serialized AuditEvent");
  }
  // A type or schema version newer than this binary knows was written by a
  // newer release of this owner (a rolling upgrade): its bytes are passed on
  // untouched, and Admin decides.
  if (absl::Status valid = audit::Validate(event, options_.known_event_types);
      !valid.ok() && !audit::IsNewerThanKnown(valid)) {
    return valid;
  }
  if (event.owner() != options_.owner) {
    return absl::InvalidArgumentError(absl::StrCat("event owner ", audit::OwnerName(event.owner()),
                                                   " is not this dispatcher's owner ",
                                                   audit::OwnerName(options_.owner)));
  }
  if (event.event_id() != row.event_id) {
    return absl::InvalidArgumentError("payload event_id differs from the outbox row's");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Published>> Dispatcher::Publish(
    redis::Client& redis, const std::vector<const ClaimedRow*>& rows) {
  if (options_.signer == nullptr) {
    return absl::FailedPreconditionError("dispatcher: no signing key to seal with");
  }
  // A row published before goes with the seal it was first published with,
  // if that still verifies with a key of this owner's; one that no longer
  // does was altered through the database login: it is sealed anew, loudly.
  std::vector<Published> out(rows.size());
  std::vector<bool> kept(rows.size(), false);
  std::vector<size_t> unsealed;
  std::vector<absl::string_view> payloads;
  for (size_t i = 0; i < rows.size(); ++i) {
    out[i].event_id = rows[i]->event_id;
    kept[i] = KeptSealVerifies(*rows[i]);
    if (!kept[i] && !rows[i]->seal.empty()) {
      seals_replaced_->Increment();
      log::Error(
          kComponent, "the row's kept seal does not verify: sealed anew",
          {{"event_id", rows[i]->event_id}, {"sealed_by", rows[i]->sealed_by.substr(0, 64)}});
    }
    if (!kept[i]) {
      unsealed.push_back(i);
      payloads.push_back(rows[i]->payload);
    }
  }
  if (!payloads.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> seals,
                     seal::SealBundle(*options_.signer, payloads, seals_));
    for (size_t j = 0; j < unsealed.size(); ++j) {
      out[unsealed[j]].seal = std::move(seals[j]);
      out[unsealed[j]].sealed_by = options_.signer->key_id();
    }
  }
  std::vector<redis::StreamFields> entries;
  entries.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    entries.push_back({{audit::kEnvelopeField, rows[i]->payload},
                       {audit::kSealField, kept[i] ? rows[i]->seal : out[i].seal},
                       {audit::kKeyIdField, kept[i] ? rows[i]->sealed_by : out[i].sealed_by}});
    if (!rows[i]->personal.empty()) {
      entries.back().emplace_back(audit::kPersonalField, rows[i]->personal);
    }
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> ids, redis.XAddBatch(stream_, entries));
  for (size_t i = 0; i < rows.size(); ++i) out[i].stream_entry_id = ids[i];
  return out;
}

absl::StatusOr<CycleResult> Dispatcher::RunOnce(pg::Connection& pg, redis::Client& redis) {
  CycleResult result;
  // One transaction: the row locks it takes are the claim; any failure below
  // returns before Commit() and rolls everything back.
  ASSIGN_OR_RETURN(pg::Transaction tx, pg.Begin());
  ASSIGN_OR_RETURN(std::vector<ClaimedRow> rows, LockDue(tx, options_.batch_size));
  result.claimed = static_cast<int>(rows.size());
  if (rows.empty()) return result;
  claimed_->Increment(static_cast<double>(rows.size()));
  if (hooks_.after_claim) RETURN_IF_ERROR(hooks_.after_claim(rows));

  std::vector<const ClaimedRow*> publishing;
  std::vector<Retry> waiting;  // for a dispatcher that holds their MAC key
  std::string waiting_error;
  std::vector<std::pair<const ClaimedRow*, std::string>> dead;
  for (const ClaimedRow& row : rows) {
    const absl::Status check = CheckRow(row);
    if (absl::IsUnavailable(check)) {
      waiting.push_back(Retry{row.event_id, backoff::Delay(options_.backoff, row.failures + 1)});
      waiting_error = std::string(check.message());
    } else if (!check.ok()) {
      const std::string reason(check.message());
      ASSIGN_OR_RETURN(int64_t n, MarkDead(tx, row.event_id, reason));
      if (n > 0) dead.emplace_back(&row, reason);
    } else {
      publishing.push_back(&row);
    }
  }
  if (!waiting.empty()) {
    ASSIGN_OR_RETURN(const int64_t n, Reschedule(tx, waiting, waiting_error));
    result.rescheduled += static_cast<int>(n);
    transient_failures_->Increment(static_cast<double>(n));
    log::Warn(kComponent, "rows wait for a dispatcher that holds their MAC key",
              {{"error", waiting_error}, {"rows", absl::StrCat(n)}});
  }

  absl::StatusOr<std::vector<Published>> done = std::vector<Published>{};
  if (!publishing.empty()) done = Publish(redis, publishing);
  if (!done.ok()) {
    std::vector<Retry> retries;
    for (const ClaimedRow* row : publishing) {
      retries.push_back(Retry{row->event_id, backoff::Delay(options_.backoff, row->failures + 1)});
    }
    const std::string error = absl::StrCat("publish to ", stream_, ": ", done.status().ToString());
    ASSIGN_OR_RETURN(int64_t n, Reschedule(tx, retries, error));
    RETURN_IF_ERROR(tx.Commit());
    result.rescheduled += static_cast<int>(n);
    transient_failures_->Increment(static_cast<double>(n));
    log::Warn(kComponent, "publish failed; rows rescheduled",
              {{"error", error}, {"rows", absl::StrCat(n)}});
  } else {
    if (hooks_.after_publish) RETURN_IF_ERROR(hooks_.after_publish(rows));
    ASSIGN_OR_RETURN(int64_t marked, MarkPublished(tx, *done));
    RETURN_IF_ERROR(tx.Commit());
    result.published = static_cast<int>(marked);
    published_->Increment(static_cast<double>(marked));
    const absl::Time now = absl::Now();
    for (const ClaimedRow* row : publishing)
      lag_->Observe(absl::ToDoubleSeconds(now - row->created_at));
  }
  // Only now that the cycle committed.
  result.dead = static_cast<int>(dead.size());
  dead_->Increment(static_cast<double>(dead.size()));
  for (const auto& [row, reason] : dead) {
    log::Error(kComponent, "event can never be published; moved to DEAD",
               {{"event_id", row->event_id}, {"reason", reason}});
  }
  return result;
}

template <typename Requeue>
absl::StatusOr<int64_t> Dispatcher::RequeueAll(const Requeue& requeue) {
  int64_t total = 0;
  while (true) {
    ASSIGN_OR_RETURN(const int64_t n, requeue(options_.batch_size));
    total += n;
    if (n < options_.batch_size) return total;
  }
}

absl::StatusOr<int64_t> Dispatcher::SweepUnconfirmed(pg::Connection& pg, redis::Client& redis) {
  if (options_.resend_timeout <= absl::ZeroDuration()) return 0;
  ASSIGN_OR_RETURN(const absl::Time look_began, DatabaseClock(pg));
  absl::StatusOr<LossEvidence> seen = watch_.Look(redis);
  if (absl::IsPermissionDenied(seen.status())) {
    // A Redis ACL of a previous release: the owner may not look, so it goes
    // by age alone, as that release did.
    LossEvidence by_age;
    by_age.acked.last_delivered = kMaxStreamId;
    seen = std::move(by_age);
  }
  RETURN_IF_ERROR(seen.status());
  const absl::Time now = absl::Now();
  // What a lost stream's group acknowledged says nothing of the new one.
  if (seen->lost_through.has_value()) acked_.Clear();
  acked_.Record(now, seen->acked);
  int64_t lost = 0, unproved = 0;
  if (seen->LossPossible()) {
    ASSIGN_OR_RETURN(
        lost, RequeueAll([&](int limit) { return RequeueLost(pg, *seen, look_began, limit); }));
  }
  const Acked then = acked_.AsOf(now - options_.resend_timeout).value_or(Acked{});
  ASSIGN_OR_RETURN(unproved, RequeueAll([&](int limit) {
                     return RequeueUnproved(pg, then, seen->newest, options_.resend_timeout, limit);
                   }));
  if (lost + unproved > 0) {
    resends_->Increment(static_cast<double>(lost + unproved));
    log::Warn(kComponent, "publishing again what was lost or stayed unproved",
              {{"lost", absl::StrCat(lost)},
               {"unproved", absl::StrCat(unproved)},
               {"resend_timeout", absl::FormatDuration(options_.resend_timeout)}});
  }
  return lost + unproved;
}

void Dispatcher::WorkerLoop(int index) {
  redis::Client client(options_.redis);
  worker::Loop loop(waker_, options_.pg, options_.backoff, kComponent);
  // Thread 0 also runs the resend sweep, a few times per resend timeout.
  const absl::Duration sweep_every =
      std::clamp(options_.resend_timeout / 4, absl::Milliseconds(100), absl::Seconds(10));
  absl::Time next_sweep = absl::Now() + sweep_every;
  while (!waker_.stopping()) {
    pg::Connection* conn = loop.Database();
    if (conn == nullptr) continue;
    if (index == 0 && absl::Now() >= next_sweep) {
      next_sweep = absl::Now() + sweep_every;
      if (auto swept = SweepUnconfirmed(*conn, client); !swept.ok()) {
        log::Warn(kComponent, "resend sweep failed", {{"error", swept.status().ToString()}});
      }
    }
    // Taken before the cycle, so a NOTIFY that lands during it is not lost.
    const uint64_t seen = waker_.Seq();
    auto cycle = RunOnce(*conn, client);
    if (!cycle.ok()) {
      loop.Failed("cycle failed", cycle.status());
      continue;
    }
    if (cycle->rescheduled > 0 && cycle->published == 0) {
      loop.BackOff();  // the broker is failing: back off this thread too
      continue;
    }
    loop.Succeeded();
    if (cycle->claimed >= options_.batch_size) {
      waker_.Wake();  // more may be due: recruit another thread, and go on
      continue;
    }
    // Busy: let commits gather for one batch rather than a cycle per commit.
    if (cycle->claimed > 0) waker_.Sleep(options_.linger);
    waker_.WaitForWork(options_.poll_interval, seen);
  }
}

}  // namespace ulticode::outbox
