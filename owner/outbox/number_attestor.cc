#include "owner/outbox/number_attestor.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "google/protobuf/struct.pb.h"
#include "owner/outbox/outbox_store.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.numbers";

// Runs listed per event; more wait for the next run.
constexpr size_t kMaxRuns = 1000;

constexpr pg::Statement kLock{
    "outbox.numbers.lock",
    "SELECT pg_try_advisory_xact_lock(hashtextextended('ulticode.outbox.numbers', 0))"};

// The last number handed out (the sequence's position).
constexpr pg::Statement kPosition{"outbox.numbers.position",
                                  "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 "
                                  "END FROM audit_outbox_sequence"};

constexpr pg::Statement kState{"outbox.numbers.state",
                               "SELECT through FROM outbox_numbers_attested FOR UPDATE"};

constexpr pg::Statement kStart{
    "outbox.numbers.start",
    "INSERT INTO outbox_numbers_attested (through, attested_at) VALUES ($1, now())"
    " ON CONFLICT (singleton) DO NOTHING"};

constexpr pg::Statement kAdvance{
    "outbox.numbers.advance",
    "UPDATE outbox_numbers_attested SET through = $1::bigint, attested_at = now()"};

constexpr pg::Statement kCommitted{
    "outbox.numbers.committed",
    "SELECT DISTINCT owner_sequence FROM audit_outbox"
    " WHERE owner_sequence > $1 AND owner_sequence <= $2 ORDER BY 1"};

using Run = std::pair<int64_t, int64_t>;

// The runs of (through, hi] missing from `committed` (ascending), at most
// kMaxRuns; `*end` is the last number they account for.
std::vector<Run> MissingRuns(int64_t through, int64_t hi, const pg::Result& committed,
                             int64_t* end) {
  std::vector<Run> runs;
  int64_t next = through + 1;
  *end = hi;
  for (int i = 0; i <= committed.rows(); ++i) {
    const int64_t present = i < committed.rows() ? committed.GetInt64(i, 0) : hi + 1;
    if (present > next) {
      if (runs.size() == kMaxRuns) {
        *end = next - 1;
        break;
      }
      runs.emplace_back(next, present - 1);
    }
    next = present + 1;
  }
  return runs;
}

audit::AuditEvent VoidedEvent(audit::Owner owner, const std::vector<Run>& runs, int64_t through) {
  const std::string name = audit::OwnerName(owner);
  audit::Actor actor;
  actor.principal = "system:outbox";
  audit::AuditEvent event =
      audit::NewEvent(owner, absl::StrCat(name, ".outbox.numbers_voided"), actor, absl::Now());
  auto* record = event.mutable_record();
  record->set_action("void_numbers");
  record->set_entity_type("audit_outbox");
  record->set_entity_id(name);
  auto& fields = *record->mutable_new_value()->mutable_fields();
  auto* list = fields["runs"].mutable_list_value();
  int64_t count = 0;
  for (const auto& [first, last] : runs) {
    auto* pair = list->add_values()->mutable_list_value();
    pair->add_values()->set_number_value(static_cast<double>(first));
    pair->add_values()->set_number_value(static_cast<double>(last));
    count += last - first + 1;
  }
  fields["numbers"].set_number_value(static_cast<double>(count));
  fields["through"].set_number_value(static_cast<double>(through));
  fields["reason"].set_string_value(
      "taken and never committed: a rollback, a process or database crash, or a failover");
  return event;
}

}  // namespace

NumberAttestor::NumberAttestor(audit::Owner owner, const crypto::SigningKey& signer,
                               AttestorOptions options, prometheus::Registry& registry)
    : owner_(owner),
      signer_(signer),
      options_(options),
      voided_(&prometheus::BuildCounter()
                   .Name("ulticode_outbox_numbers_voided_total")
                   .Help("Event numbers taken and never committed, attested to Admin")
                   .Register(registry)
                   .Add({{"owner", audit::OwnerName(owner)}})),
      lock_missed_(&prometheus::BuildGauge()
                        .Name("ulticode_outbox_numbers_lock_missed_seconds")
                        .Help("How long this replica has found the number attestor's lock taken, "
                              "run after run (0: it took the lock at its last run)")
                        .Register(registry)
                        .Add({{"owner", audit::OwnerName(owner)}})) {}

int64_t NumberAttestor::Settled(absl::Time now) {
  while (positions_.size() > 1 && positions_[1].first <= now - options_.settle) {
    positions_.pop_front();
  }
  if (positions_.empty() || positions_.front().first > now - options_.settle) return -1;
  return positions_.front().second;
}

absl::Status NumberAttestor::RunOnce(pg::Connection& conn) {
  ASSIGN_OR_RETURN(pg::Transaction tx, conn.Begin());
  ASSIGN_OR_RETURN(pg::Result locked, tx.Execute(kLock));
  const absl::Time now = absl::Now();
  if (!locked.GetBool(0, 0)) {  // another replica attests, or someone holds the lock
    if (!missed_since_) missed_since_ = now;
    lock_missed_->Set(absl::ToDoubleSeconds(now - *missed_since_));
    return tx.Commit();
  }
  missed_since_.reset();
  lock_missed_->Set(0);
  ASSIGN_OR_RETURN(pg::Result position, tx.Execute(kPosition));
  positions_.emplace_back(now, position.GetInt64(0, 0));
  const int64_t hi = Settled(now);
  if (hi < 0) return tx.Commit();
  ASSIGN_OR_RETURN(pg::Result state, tx.Execute(kState));
  if (state.empty()) {
    RETURN_IF_ERROR(tx.Execute(kStart, {pg::Int(hi)}).status());
    return tx.Commit();
  }
  const int64_t through = state.GetInt64(0, 0);
  if (hi <= through) return tx.Commit();
  ASSIGN_OR_RETURN(pg::Result committed, tx.Execute(kCommitted, {pg::Int(through), pg::Int(hi)}));
  int64_t end = hi;
  const std::vector<Run> runs = MissingRuns(through, hi, committed, &end);
  int64_t count = 0;
  for (const auto& [first, last] : runs) count += last - first + 1;
  if (!runs.empty()) {
    RETURN_IF_ERROR(Append(tx, VoidedEvent(owner_, runs, end), signer_).status());
  }
  RETURN_IF_ERROR(tx.Execute(kAdvance, {pg::Int(end)}).status());
  RETURN_IF_ERROR(tx.Commit());
  if (count > 0) {
    voided_->Increment(static_cast<double>(count));
    log::Info(kComponent, "event numbers taken and never committed, attested to Admin",
              {{"numbers", absl::StrCat(count)},
               {"first", absl::StrCat(runs.front().first)},
               {"last", absl::StrCat(runs.back().second)}});
  }
  return absl::OkStatus();
}

}  // namespace ulticode::outbox
