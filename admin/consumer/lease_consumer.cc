#include "admin/consumer/lease_consumer.h"

#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/audit_logs/writer.h"
#include "admin/inbox/inbox_store.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/metrics/metrics.h"
#include "common/worker/instance_id.h"
#include "common/worker/loop.h"
#include "common/worker/notify_listener.h"

namespace ulticode::admin::consumer {
namespace {

constexpr char kComponent[] = "admin.lease_consumer";

HeldRow Held(const LeasedRow& row) { return HeldRow{row.id, row.fencing_token}; }

}  // namespace

LeaseConsumer::LeaseConsumer(ConsumerOptions options, prometheus::Registry& registry,
                             ConsumerHooks hooks)
    : options_(std::move(options)),
      instance_id_(options_.instance_id.empty() ? worker::DefaultInstanceId()
                                                : options_.instance_id),
      hooks_(std::move(hooks)),
      writer_metrics_(registry) {
  claimed_ = &metrics::Counter(registry, "ulticode_consumer_claimed_total",
                               "Inbox rows claimed under a lease");
  processed_ = &metrics::Counter(registry, "ulticode_consumer_processed_total",
                                 "Inbox rows marked PROCESSED");
  fenced_ =
      &metrics::Counter(registry, "ulticode_consumer_fenced_total",
                        "Rows a worker could not complete because its lease had been taken over");
  retried_ = &metrics::Counter(registry, "ulticode_consumer_retries_total",
                               "Failed attempts rescheduled with back-off");
  dead_ = &metrics::Counter(registry, "ulticode_consumer_dead_total", "Inbox rows moved to DEAD");
  renewed_ = &metrics::Counter(registry, "ulticode_consumer_lease_renewals_total",
                               "Leases renewed by the heartbeat");
  notifications_ = &metrics::Counter(registry, "ulticode_consumer_notifications_total",
                                     "NOTIFY wake-ups received from the inbox bridge");
}

LeaseConsumer::~LeaseConsumer() { Stop(); }

void LeaseConsumer::Start() {
  waker_.Reset();
  for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this, i] { WorkerLoop(i); });
  if (options_.heartbeat_interval > absl::ZeroDuration()) {
    threads_.emplace_back([this] { HeartbeatLoop(); });
  }
  if (options_.use_notify) {
    worker::NotifyListenerOptions listen{options_.pg, inbox::kNotifyChannel, kComponent,
                                         options_.loop_backoff,
                                         [this](size_t n) { notifications_->Increment(n); }};
    threads_.emplace_back([this, listen] { worker::RunNotifyListener(listen, waker_); });
  }
  log::Info(kComponent, "started",
            {{"consumer", options_.consumer},
             {"threads", absl::StrCat(options_.threads)},
             {"batch_size", absl::StrCat(options_.batch_size)},
             {"lease", absl::FormatDuration(options_.lease)},
             {"max_attempts", absl::StrCat(options_.max_attempts)}});
}

void LeaseConsumer::Stop() {
  waker_.Stop();
  for (auto& t : threads_) t.join();
  if (!threads_.empty()) log::Info(kComponent, "stopped", {{"consumer", options_.consumer}});
  threads_.clear();
}

void LeaseConsumer::Track(const std::vector<LeasedRow>& rows) {
  absl::MutexLock lock(&held_mu_);
  for (const LeasedRow& r : rows) held_[r.id] = r.fencing_token;
}

void LeaseConsumer::Untrack(const std::vector<LeasedRow>& rows) {
  absl::MutexLock lock(&held_mu_);
  for (const LeasedRow& r : rows) {
    // Only our own lease: another thread may hold the row under a newer token.
    if (auto it = held_.find(r.id); it != held_.end() && it->second == r.fencing_token)
      held_.erase(it);
  }
}

absl::StatusOr<LeaseConsumer::Committed> LeaseConsumer::Commit(pg::Connection& conn,
                                                               const std::vector<Work*>& batch) {
  std::vector<HeldRow> rows;
  for (const Work* w : batch) rows.push_back(Held(*w->row));
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(std::vector<int64_t> held, CompleteHeld(tx, rows));
  absl::flat_hash_set<int64_t> still_held(held.begin(), held.end());
  std::vector<audit_logs::AuditLogInput> logs;
  for (const Work* w : batch) {
    if (still_held.contains(w->row->id))
      logs.push_back(
          audit_logs::AuditLogInput{&w->event, &w->row->payload, &w->row->seal, &w->row->key_id});
  }
  ASSIGN_OR_RETURN(int64_t written, audit_logs::InsertAuditLogs(tx, logs));
  RETURN_IF_ERROR(tx.Commit());
  writer_metrics_.Committed(logs, written, absl::Now());
  return Committed{static_cast<int>(held.size()), static_cast<int>(written),
                   static_cast<int>(batch.size() - held.size())};
}

absl::StatusOr<ConsumerCycle> LeaseConsumer::RunOnce(pg::Connection& conn,
                                                     const std::string& lease_owner) {
  ConsumerCycle cycle;
  std::vector<int64_t> skip;
  {
    absl::MutexLock lock(&held_mu_);
    skip = left_for_newer_;
  }
  ASSIGN_OR_RETURN(std::vector<LeasedRow> rows,
                   Claim(conn, options_.consumer, lease_owner, options_.lease, options_.batch_size,
                         options_.max_attempts, skip));
  cycle.claimed = static_cast<int>(rows.size());
  if (rows.empty()) return cycle;
  claimed_->Increment(static_cast<double>(rows.size()));
  Track(rows);
  const absl::Cleanup untrack = [this, &rows] { Untrack(rows); };
  if (hooks_.after_claim) hooks_.after_claim(rows);

  std::vector<Work> work;
  std::vector<Failure> failures;
  RETURN_IF_ERROR(Triage(conn, rows, cycle, work, failures));
  RETURN_IF_ERROR(CommitWork(conn, work, cycle, failures));
  RETURN_IF_ERROR(Settle(conn, failures, cycle));
  processed_->Increment(cycle.processed);
  fenced_->Increment(cycle.fenced);
  retried_->Increment(cycle.retried);
  dead_->Increment(cycle.dead);
  if (cycle.fenced > 0) {
    log::Warn(kComponent, "leases were taken over before completing; rows left to the new holder",
              {{"rows", absl::StrCat(cycle.fenced)}});
  }
  return cycle;
}

absl::Status LeaseConsumer::Triage(pg::Connection& conn, const std::vector<LeasedRow>& rows,
                                   ConsumerCycle& cycle, std::vector<Work>& work,
                                   std::vector<Failure>& failures) {
  work.reserve(rows.size());
  for (const LeasedRow& row : rows) {
    Work w{&row, {}};
    absl::Status valid = w.event.ParseFromString(row.payload)
                             ? audit::Validate(w.event, options_.known_event_types)
                             : absl::InvalidArgumentError("payload is not a serialized AuditEvent");
    if (valid.ok() && w.event.event_id() != row.event_id) {
      valid = absl::InvalidArgumentError("payload event_id differs from the inbox row's");
    }
    if (audit::IsNewerThanKnown(valid)) {
      // Written by a newer owner release: leave it to a consumer that knows it.
      ASSIGN_OR_RETURN(int64_t n,
                       Postpone(conn, Held(row), kNewerEventDelay, std::string(valid.message())));
      cycle.postponed += static_cast<int>(n);
      {
        absl::MutexLock lock(&held_mu_);
        if (left_for_newer_.size() < kMaxLeftForNewer) left_for_newer_.push_back(row.id);
      }
      log::Warn(kComponent, "event newer than this binary; left for a newer consumer",
                {{"event_id", row.event_id}, {"reason", std::string(valid.message())}});
      continue;
    }
    if (!valid.ok()) {
      // Retrying cannot fix the bytes: DEAD at once.
      ASSIGN_OR_RETURN(int64_t n, MarkDead(conn, Held(row), std::string(valid.message())));
      cycle.dead += static_cast<int>(n);
      log::Error(kComponent, "event fails validation; moved to DEAD",
                 {{"event_id", row.event_id}, {"reason", std::string(valid.message())}});
      continue;
    }
    if (hooks_.handle) {
      if (absl::Status s = hooks_.handle(w.event); !s.ok()) {
        failures.push_back(
            Failure{Held(row), backoff::Delay(options_.retry_backoff, row.attempts), s.ToString()});
        continue;
      }
    }
    work.push_back(std::move(w));
  }
  return absl::OkStatus();
}

absl::Status LeaseConsumer::CommitWork(pg::Connection& conn, std::vector<Work>& work,
                                       ConsumerCycle& cycle, std::vector<Failure>& failures) {
  auto add = [&cycle](const Committed& c) {
    cycle.processed += c.processed;
    cycle.written += c.written;
    cycle.fenced += c.fenced;
  };
  std::vector<Work*> batch;
  for (Work& w : work) batch.push_back(&w);
  if (batch.empty()) return absl::OkStatus();
  auto done = Commit(conn, batch);
  if (done.ok()) {
    add(*done);
    return absl::OkStatus();
  }
  // Outcome unknown or connection lost: the rows come back when their lease
  // ends; the audit insert is idempotent.
  if (conn.broken()) return done.status();
  // Find the row(s) that break the batch; the rest still go through.
  log::Warn(kComponent, "batch failed; retrying rows one by one",
            {{"rows", absl::StrCat(batch.size())}, {"error", done.status().ToString()}});
  for (Work* w : batch) {
    auto one = Commit(conn, {w});
    if (one.ok()) {
      add(*one);
    } else if (conn.broken()) {
      return one.status();
    } else {
      failures.push_back(Failure{Held(*w->row),
                                 backoff::Delay(options_.retry_backoff, w->row->attempts),
                                 one.status().ToString()});
    }
  }
  return absl::OkStatus();
}

absl::Status LeaseConsumer::Settle(pg::Connection& conn, const std::vector<Failure>& failures,
                                   ConsumerCycle& cycle) {
  if (failures.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto settled, Fail(conn, failures, options_.max_attempts));
  cycle.retried += static_cast<int>(settled.first);
  cycle.dead += static_cast<int>(settled.second);
  log::Warn(kComponent, "events failed; rescheduled or DEAD",
            {{"rescheduled", absl::StrCat(settled.first)},
             {"dead", absl::StrCat(settled.second)},
             {"first_error", failures[0].error}});
  return absl::OkStatus();
}

void LeaseConsumer::WorkerLoop(int index) {
  const std::string lease_owner = absl::StrCat(instance_id_, "/", index);
  worker::Loop loop(waker_, options_.pg, options_.loop_backoff, kComponent);
  while (!waker_.stopping()) {
    pg::Connection* conn = loop.Database();
    if (conn == nullptr) continue;
    const uint64_t seen = waker_.Seq();
    auto cycle = RunOnce(*conn, lease_owner);
    if (!cycle.ok()) {
      loop.Failed("cycle failed", cycle.status());
      continue;
    }
    loop.Succeeded();
    if (cycle->claimed >= options_.batch_size) {
      waker_.Wake();  // more may be due: recruit another thread, and go on
      continue;
    }
    waker_.WaitForWork(options_.poll_interval, seen);
  }
}

void LeaseConsumer::HeartbeatLoop() {
  std::unique_ptr<pg::Connection> conn;
  while (!waker_.stopping()) {
    waker_.WaitForWork(options_.heartbeat_interval, std::nullopt);
    std::vector<HeldRow> rows;
    {
      absl::MutexLock lock(&held_mu_);
      for (const auto& [id, token] : held_) rows.push_back(HeldRow{id, token});
    }
    if (rows.empty() || waker_.stopping()) continue;
    if (conn == nullptr || conn->broken()) {
      auto dialled = pg::Connection::Connect(options_.pg);
      if (!dialled.ok()) {
        log::Warn(kComponent, "heartbeat cannot reach the database; leases may lapse",
                  {{"error", dialled.status().ToString()}});
        continue;
      }
      conn = std::move(dialled).value();
    }
    auto renewed = Renew(*conn, rows, options_.lease);
    if (!renewed.ok()) {
      log::Warn(kComponent, "heartbeat failed", {{"error", renewed.status().ToString()}});
      continue;
    }
    renewed_->Increment(static_cast<double>(*renewed));
  }
}

}  // namespace ulticode::admin::consumer
