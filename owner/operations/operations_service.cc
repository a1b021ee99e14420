#include "owner/operations/operations_service.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"
#include "common/mutation/actor.h"
#include "common/text/text.h"
#include "owner/outbox/outbox_store.h"
#include "owner/outbox/personal_erasure.h"

namespace ulticode::operations {
namespace {

constexpr text::Rule kReasonRule{.min_chars = 1, .max_chars = 500};
// Event ids the audit record lists (with the count): the record stays small.
constexpr size_t kIdsInRecord = 100;

// The first id that is not a DEAD row (INVALID_ARGUMENT); the update's row
// count keeps the call all-or-nothing.
constexpr pg::Statement kNotDead{
    "outbox.ops.not_dead",
    "SELECT t.id::text FROM unnest($1::uuid[]) AS t(id)"
    " LEFT JOIN audit_outbox o ON o.event_id = t.id AND o.state = 'DEAD'"
    " WHERE o.event_id IS NULL LIMIT 1"};

// Rows are locked in event_id order, the order ConfirmLogged locks in: the
// two never deadlock. No proof confirms a redriven row before it is
// published again (outbox::ReplayConfirmed).
constexpr pg::Statement kRedriveIds{
    "outbox.ops.redrive_ids",
    "UPDATE audit_outbox SET state = 'PENDING', next_attempt_at = now(), failures = 0,"
    "   last_error = NULL, publication = publication + 1, publication_floor = publication + 1"
    " WHERE event_id IN (SELECT event_id FROM audit_outbox WHERE event_id = ANY($1::uuid[])"
    "   AND state = 'DEAD' ORDER BY event_id FOR UPDATE)"
    " RETURNING event_id::text"};

constexpr pg::Statement kRedriveAll{
    "outbox.ops.redrive_all",
    "UPDATE audit_outbox SET state = 'PENDING', next_attempt_at = now(), failures = 0,"
    "   last_error = NULL, publication = publication + 1, publication_floor = publication + 1"
    " WHERE event_id IN (SELECT event_id FROM audit_outbox WHERE state = 'DEAD'"
    "   ORDER BY event_id FOR UPDATE)"
    " RETURNING event_id::text"};

constexpr pg::Statement kCountRange{
    "outbox.ops.count_range",
    "SELECT count(*) FROM (SELECT 1 FROM audit_outbox WHERE state = 'CONFIRMED'"
    "   AND created_at >= $1 AND created_at < $2 LIMIT $3) s"};

const char* EventType(audit::Owner owner, bool replay) {
  if (owner == audit::v1::OWNER_AUTH)
    return replay ? "auth.outbox.replayed" : "auth.outbox.redriven";
  return replay ? "app.outbox.replayed" : "app.outbox.redriven";
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::string Utc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone());
}

}  // namespace

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"RedriveDeadOutbox", "audit.operator"},
      {"Replay", "audit.operator"},
      {"ErasePersonalData", "privacy.officer"},
  };
  return *rules;
}

absl::Status ValidateRedrive(const v1::RedriveDeadOutboxRequest& req) {
  RETURN_IF_ERROR(text::Check("reason", req.reason(), kReasonRule));
  RETURN_IF_ERROR(mutation::ValidateRequestId(req.request_id()));
  // One selection is required: an empty request never means every row.
  if (req.selection_case() == v1::RedriveDeadOutboxRequest::SELECTION_NOT_SET) {
    return absl::InvalidArgumentError("ids: give event ids, or ask for every DEAD row");
  }
  const auto& ids = req.ids().event_ids();
  if (req.has_ids() && ids.empty()) {
    return absl::InvalidArgumentError("ids.event_ids: give 1.. ids");
  }
  if (ids.size() > kMaxRedriveIds) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids.event_ids: ", ids.size(), " ids, at most ", kMaxRedriveIds));
  }
  for (int i = 0; i < ids.size(); ++i) {
    if (!ids::IsValidUuid(ids[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ids.event_ids[", i, "]: \"", ids[i].substr(0, 64), "\" is not a lowercase UUID"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateErasure(const v1::ErasePersonalDataRequest& req) {
  RETURN_IF_ERROR(audit::ValidateSubject("subject", req.subject()));
  RETURN_IF_ERROR(mutation::ValidateRequestId(req.request_id()));
  if (!req.has_erased_through()) return absl::InvalidArgumentError("erased_through: required");
  const auto& t = req.erased_through();
  if (t.seconds() < 0 || t.seconds() > audit::kMaxOccurredAtSeconds || t.nanos() < 0 ||
      t.nanos() > 999999999) {
    return absl::InvalidArgumentError("erased_through: not a valid time");
  }
  return absl::OkStatus();
}

absl::Status ValidateReplay(const v1::ReplayRequest& req) {
  RETURN_IF_ERROR(text::Check("reason", req.reason(), kReasonRule));
  RETURN_IF_ERROR(mutation::ValidateRequestId(req.request_id()));
  // Both are required: an empty range is not "all".
  if (!req.has_start_time()) return absl::InvalidArgumentError("start_time: required");
  if (!req.has_end_time()) return absl::InvalidArgumentError("end_time: required");
  for (const auto& [field, t] :
       {std::pair{"start_time", &req.start_time()}, std::pair{"end_time", &req.end_time()}}) {
    // timestamptz's range and a valid nanos field.
    if (t->seconds() < -210866803200 || t->seconds() > 253402300799 || t->nanos() < 0 ||
        t->nanos() > 999999999) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": not a valid timestamp"));
    }
  }
  if (ToTime(req.start_time()) >= ToTime(req.end_time())) {
    return absl::InvalidArgumentError("start_time: must be before end_time");
  }
  return absl::OkStatus();
}

grpc::Status OutboxOperationsService::RedriveDeadOutbox(grpc::ServerContext* ctx,
                                                        const v1::RedriveDeadOutboxRequest* req,
                                                        v1::RedriveDeadOutboxResponse* resp) {
  using Resp = v1::RedriveDeadOutboxResponse;
  return mutations_.Handle(
      *ctx, "RedriveDeadOutbox", *req, [&] { return ValidateRedrive(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<Resp>> {
        std::vector<std::string> wanted;
        absl::flat_hash_set<std::string> seen;
        const bool all = req->has_all();
        for (const auto& id : req->ids().event_ids()) {
          if (seen.insert(id).second) wanted.push_back(id);
        }
        if (!all) {
          ASSIGN_OR_RETURN(pg::Result bad, tx.Execute(kNotDead, {pg::TextArray(wanted)}));
          if (bad.rows() > 0) {
            return absl::InvalidArgumentError(absl::StrCat("ids.event_ids: ", bad.GetString(0, 0),
                                                           " is not a DEAD row of this outbox"));
          }
        }
        ASSIGN_OR_RETURN(pg::Result r, all ? tx.Execute(kRedriveAll, {})
                                           : tx.Execute(kRedriveIds, {pg::TextArray(wanted)}));
        Resp out;
        out.set_redriven(r.rows());
        if (r.rows() == 0) return mutation::Unchanged(std::move(out));
        if (!all && r.rows() != static_cast<int>(wanted.size())) {
          // Another operator redrove some of them meanwhile: do all or nothing.
          return absl::AbortedError("some rows changed concurrently; nothing was redriven");
        }
        std::vector<std::string> listed;
        for (int i = 0; i < r.rows() && listed.size() < kIdsInRecord; ++i) {
          listed.push_back(r.GetString(i, 0));
        }
        mutation::Values values;
        values.Set("redriven", static_cast<int64_t>(r.rows()))
            .Set("event_ids", listed)
            .Set("filter", all ? "all DEAD rows" : "event_ids")
            .Set("reason", req->reason());
        return mutation::Changed(
            mutation::BuildEvent(
                owner_, actor,
                {EventType(owner_, false), "redrive_dead_outbox", "", "audit_outbox",
                 audit::OwnerName(owner_), std::nullopt, std::move(values)}),
            std::move(out));
      },
      resp);
}

grpc::Status OutboxOperationsService::Replay(grpc::ServerContext* ctx, const v1::ReplayRequest* req,
                                             v1::ReplayResponse* resp) {
  using Resp = v1::ReplayResponse;
  return mutations_.Handle(
      *ctx, "Replay", *req, [&] { return ValidateReplay(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<Resp>> {
        const absl::Time from = ToTime(req->start_time()), to = ToTime(req->end_time());
        ASSIGN_OR_RETURN(pg::Result count, tx.Execute(kCountRange, {pg::Time(from), pg::Time(to),
                                                                    pg::Int(kMaxReplayRows + 1)}));
        if (count.GetInt64(0, 0) > kMaxReplayRows) {
          return absl::FailedPreconditionError(
              absl::StrCat("the range holds more than ", kMaxReplayRows,
                           " CONFIRMED rows; replay it in smaller ranges"));
        }
        ASSIGN_OR_RETURN(const int64_t replayed, outbox::ReplayConfirmed(tx, from, to));
        Resp out;
        out.set_replayed(replayed);
        if (replayed == 0) return mutation::Unchanged(std::move(out));
        mutation::Values values;
        values.Set("replayed", replayed)
            .Set("from", Utc(from))
            .Set("to", Utc(to))
            .Set("reason", req->reason());
        return mutation::Changed(
            mutation::BuildEvent(owner_, actor,
                                 {EventType(owner_, true), "replay_outbox", "", "audit_outbox",
                                  audit::OwnerName(owner_), std::nullopt, std::move(values)}),
            std::move(out));
      },
      resp);
}

grpc::Status OutboxOperationsService::ErasePersonalData(grpc::ServerContext* ctx,
                                                        const v1::ErasePersonalDataRequest* req,
                                                        v1::ErasePersonalDataResponse* resp) {
  using Resp = v1::ErasePersonalDataResponse;
  const grpc::Status done = mutations_.Handle(
      *ctx, "ErasePersonalData", *req, [&] { return ValidateErasure(*req); },
      [&](pg::Transaction& tx,
          const audit::Actor& actor) -> absl::StatusOr<mutation::Outcome<Resp>> {
        const absl::Time through = ToTime(req->erased_through());
        ASSIGN_OR_RETURN(const outbox::Erased erased,
                         outbox::ErasePersonalData(tx, req->subject(), through, actor.principal));
        Resp out;
        out.set_values_erased(erased.values);
        out.set_rows_republished(erased.republished);
        mutation::Values values;
        values.Set("values_erased", erased.values)
            .Set("rows_republished", erased.republished)
            .Set("erased_through", Utc(through));
        // Recorded even when nothing was left to erase: the request was made.
        return mutation::Changed(
            mutation::BuildEvent(owner_, actor,
                                 {owner_ == audit::v1::OWNER_AUTH ? "auth.personal_data.erased"
                                                                  : "app.personal_data.erased",
                                  "erase_personal_data", req->subject(), "data_subject",
                                  req->subject(), std::nullopt, std::move(values)}),
            std::move(out));
      },
      resp);
  if (!done.ok()) return done;
  // After the commit, and again on a repeat: the stream holds no entry of
  // the subject's values once this returns.
  redis::Client redis(redis_);
  absl::StatusOr<int64_t> removed =
      outbox::ScrubStream(redis, stream_, req->subject(), ToTime(req->erased_through()));
  if (!removed.ok()) {
    return server::ToGrpcStatus(
        absl::UnavailableError(absl::StrCat("values erased from the outbox, but not yet from the "
                                            "stream (",
                                            removed.status().message(), "); repeat the request")),
        "ErasePersonalData");
  }
  resp->set_stream_entries_removed(*removed);
  return grpc::Status::OK;
}

}  // namespace ulticode::operations
