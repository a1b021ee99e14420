#include "admin/operations/operations_service.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/audit_logs/writer.h"
#include "admin/inbox/batch.h"
#include "admin/inbox/inbox_store.h"
#include "common/base/status_macros.h"
#include "common/mutation/actor.h"
#include "common/server/grpc_server.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::admin::operations {
namespace {

using google::protobuf::util::TimeUtil;

constexpr text::Rule kReasonRule{.min_chars = 1, .max_chars = 500};
constexpr size_t kIdsInRecord = 100;

// Errors are Admin's own messages; the list shows at most 4 KiB of one, so
// a page of 500 rows stays far inside the response budget.
constexpr pg::Statement kListDead{
    "ops.list_dead",
    "SELECT id, event_id::text, owner, event_type, attempts, left(coalesce(last_error, ''), 4096),"
    "   received_at, first_failed_at"
    " FROM consumer_inbox WHERE consumer = $1 AND status = 'DEAD' AND id > $2"
    " ORDER BY id LIMIT $3"};

constexpr pg::Statement kNotDead{
    "ops.not_dead",
    "SELECT t.id FROM unnest($2::bigint[]) AS t(id)"
    " LEFT JOIN consumer_inbox c ON c.id = t.id AND c.consumer = $1 AND c.status = 'DEAD'"
    " WHERE c.id IS NULL LIMIT 1"};

constexpr pg::Statement kRequeue{
    "ops.requeue",
    "UPDATE consumer_inbox SET status = 'PENDING', next_retry_at = now(), attempts = 0,"
    "   last_error = NULL, first_failed_at = NULL"
    " WHERE consumer = $1 AND status = 'DEAD'"
    "   AND (($2::bigint[] IS NOT NULL AND id = ANY($2::bigint[]))"
    "     OR ($2::bigint[] IS NULL AND ($3 = '' OR owner = $3)))"
    " RETURNING event_id::text"};

constexpr pg::Statement kWakeConsumers{"ops.wake", "SELECT pg_notify('consumer_inbox', '')"};

// A poison entry stores up to 256 KiB of an attacker's fields: a page also
// ends at a byte budget ($5, server::kMaxPageBytes), keeping the entries
// that start before it is spent (at least one). The last column says the
// budget was reached.
constexpr pg::Statement kListPoison{
    "ops.list_poison",
    "SELECT id, stream, stream_entry_id, event_id, reason, detail, received_at, fields,"
    "   page_bytes >= $5"
    " FROM (SELECT e.*, octet_length(fields) + octet_length(detail) + 256 AS row_bytes,"
    "         sum(octet_length(fields) + octet_length(detail) + 256)"
    "           OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS page_bytes"
    "       FROM (SELECT id, stream, stream_entry_id, coalesce(event_id, '') AS event_id, reason,"
    "               detail, received_at, fields::text AS fields"
    "             FROM poison_events WHERE consumer = $1 AND resolved_at IS NULL AND id > $2"
    "               AND ($3 = '' OR reason = $3)"
    "             ORDER BY id LIMIT $4) e) page"
    " WHERE page_bytes - row_bytes < $5 ORDER BY id"};

constexpr pg::Statement kNotUnresolved{
    "ops.not_unresolved",
    "SELECT t.id FROM unnest($2::bigint[]) AS t(id)"
    " LEFT JOIN poison_events p ON p.id = t.id AND p.consumer = $1 AND p.resolved_at IS NULL"
    " WHERE p.id IS NULL LIMIT 1"};

constexpr pg::Statement kResolve{"ops.resolve",
                                 "UPDATE poison_events SET resolved_at = now(), resolution = $4"
                                 " WHERE consumer = $1 AND resolved_at IS NULL"
                                 "   AND (($2::bigint[] IS NOT NULL AND id = ANY($2::bigint[]))"
                                 "     OR ($2::bigint[] IS NULL AND ($3 = '' OR reason = $3)))"
                                 " RETURNING id"};

constexpr pg::Statement kLockPoison{
    "ops.lock_poison",
    "SELECT id, stream, stream_entry_id, coalesce(event_id, ''), reason, detail, received_at,"
    "   fields::text"
    " FROM poison_events WHERE consumer = $1 AND id = ANY($2::bigint[]) AND resolved_at IS NULL"
    " ORDER BY id FOR UPDATE"};

int PageSize(int32_t requested) { return requested <= 0 ? 100 : std::min(requested, 500); }

absl::Status ValidateIds(int count, bool all, absl::string_view reason, bool allow_all = true) {
  RETURN_IF_ERROR(text::Check("reason", reason, kReasonRule));
  if (!allow_all && all) return absl::InvalidArgumentError("all: this call takes ids only");
  if ((count > 0) == all) {
    return absl::InvalidArgumentError(allow_all ? "give either ids or all: true (an empty filter "
                                                  "never means every row)"
                                                : "ids: give 1.. ids");
  }
  if (count > kMaxIds) {
    return absl::InvalidArgumentError(absl::StrCat("ids: ", count, " ids, at most ", kMaxIds));
  }
  return absl::OkStatus();
}

template <typename Ids>
std::vector<std::string> Unique(const Ids& ids) {
  std::vector<std::string> out;
  absl::flat_hash_set<int64_t> seen;
  for (int64_t id : ids) {
    if (seen.insert(id).second) out.push_back(absl::StrCat(id));
  }
  return out;
}

v1::PoisonEntry PoisonFrom(const pg::Result& r, int i) {
  v1::PoisonEntry e;
  e.set_id(r.GetInt64(i, 0));
  e.set_stream(r.GetString(i, 1));
  e.set_stream_entry_id(r.GetString(i, 2));
  e.set_event_id(r.GetString(i, 3));
  e.set_reason(r.GetString(i, 4));
  e.set_detail(r.GetString(i, 5));
  *e.mutable_received_at() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(r.GetTime(i, 6)));
  e.set_fields_json(r.GetString(i, 7));
  return e;
}

// The stream entry a poison row stored (inbox::FieldsJson), or why it
// cannot be rebuilt.
absl::StatusOr<redis::StreamEntry> EntryFrom(const v1::PoisonEntry& p) {
  google::protobuf::ListValue fields;
  if (!google::protobuf::util::JsonStringToMessage(p.fields_json(), &fields).ok()) {
    return absl::FailedPreconditionError("stored fields are not readable");
  }
  if (fields.values().empty()) {
    return absl::FailedPreconditionError("the entry's content is gone (nothing was stored)");
  }
  redis::StreamEntry entry{p.stream_entry_id(), {}};
  for (const auto& v : fields.values()) {
    const auto& f = v.struct_value().fields();
    auto name = f.find("name");
    if (name == f.end()) return absl::FailedPreconditionError("a stored field has no name");
    if (auto t = f.find("text"); t != f.end()) {
      entry.fields.emplace_back(name->second.string_value(), t->second.string_value());
    } else if (auto h = f.find("hex"); h != f.end()) {
      entry.fields.emplace_back(name->second.string_value(),
                                absl::HexStringToBytes(h->second.string_value()));
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "field \"", name->second.string_value(), "\" was stored by size only; cannot replay"));
    }
  }
  return entry;
}

google::protobuf::Struct Values(std::vector<std::string> ids, int64_t count, const char* filter,
                                const std::string& reason) {
  mutation::Values v;
  if (ids.size() > kIdsInRecord) ids.resize(kIdsInRecord);
  v.Set("count", count).Set("ids", ids).Set("filter", filter).Set("reason", reason);
  return v.get();
}

}  // namespace

const server::AccessTable& AccessRules() {
  static const auto* rules = new server::AccessTable{
      {"ListDeadInbox", "audit.operator"}, {"RequeueDeadInbox", "audit.operator"},
      {"ListPoison", "audit.operator"},    {"DiscardPoison", "audit.operator"},
      {"ReplayPoison", "audit.operator"},
  };
  return *rules;
}

absl::StatusOr<audit::Actor> AdminOperationsService::Admit(const grpc::ServerContext& ctx,
                                                           absl::string_view method) {
  ASSIGN_OR_RETURN(server::Principal principal, authorizer_.Admit(ctx, method));
  return mutation::ActorFromCall(principal, ctx, "");
}

absl::StatusOr<std::string> AdminOperationsService::Record(
    pg::Transaction& tx, const audit::Actor& actor, const char* event_type, const char* action,
    const char* entity_type, const google::protobuf::Struct& values) {
  audit::AuditEvent event = audit::NewEvent(audit::v1::OWNER_ADMIN, event_type, actor, absl::Now());
  auto* r = event.mutable_record();
  r->set_action(action);
  r->set_entity_type(entity_type);
  r->set_entity_id(options_.consumer);
  *r->mutable_new_value() = values;
  RETURN_IF_ERROR(audit::Validate(event));
  const std::string envelope = audit::Serialize(event);
  ASSIGN_OR_RETURN(const std::string signature, options_.signer->Sign(envelope));
  const std::string key_id = options_.signer->key_id();
  ASSIGN_OR_RETURN(int64_t written,
                   audit_logs::InsertAuditLogs(tx, {{&event, &envelope, &signature, &key_id}}));
  if (written != 1) return absl::InternalError("the operator's audit record was not written");
  return event.event_id();
}

grpc::Status AdminOperationsService::ListDeadInbox(grpc::ServerContext* ctx,
                                                   const v1::ListDeadInboxRequest* req,
                                                   v1::ListDeadInboxResponse* resp) {
  const char* method = "ListDeadInbox";
  if (auto actor = Admit(*ctx, method); !actor.ok())
    return server::ToGrpcStatus(actor.status(), method);
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), method);
  const int size = PageSize(req->page_size());
  auto r = (*conn)->Execute(kListDead,
                            {pg::Text(options_.consumer), pg::Int(req->after_id()), pg::Int(size)});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), method);
  for (int i = 0; i < r->rows(); ++i) {
    v1::DeadInboxRow* row = resp->add_rows();
    row->set_id(r->GetInt64(i, 0));
    row->set_event_id(r->GetString(i, 1));
    row->set_owner(r->GetString(i, 2));
    row->set_event_type(r->GetString(i, 3));
    row->set_attempts(static_cast<int32_t>(r->GetInt64(i, 4)));
    row->set_last_error(r->GetString(i, 5));
    *row->mutable_received_at() =
        TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(r->GetTime(i, 6)));
    if (!r->IsNull(i, 7)) {
      *row->mutable_first_failed_at() =
          TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(r->GetTime(i, 7)));
    }
  }
  if (r->rows() == size) resp->set_next_after_id(resp->rows(size - 1).id());
  return grpc::Status::OK;
}

grpc::Status AdminOperationsService::RequeueDeadInbox(grpc::ServerContext* ctx,
                                                      const v1::RequeueDeadInboxRequest* req,
                                                      v1::RequeueDeadInboxResponse* resp) {
  const char* method = "RequeueDeadInbox";
  auto actor = Admit(*ctx, method);
  if (!actor.ok()) return server::ToGrpcStatus(actor.status(), method);
  absl::Status valid = ValidateIds(req->ids_size(), req->all(), req->reason());
  if (valid.ok() && !req->owner().empty() &&
      (!req->all() || (req->owner() != "auth" && req->owner() != "app"))) {
    valid = absl::InvalidArgumentError("owner: \"auth\" or \"app\", and only with all: true");
  }
  if (!valid.ok()) return server::ToGrpcStatus(valid, method);
  const std::vector<std::string> ids = Unique(req->ids());
  absl::Status done = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
    ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
    const pg::Param id_array = req->all() ? pg::Null() : pg::TextArray(ids);
    if (!req->all()) {
      ASSIGN_OR_RETURN(pg::Result bad,
                       tx.Execute(kNotDead, {pg::Text(options_.consumer), pg::TextArray(ids)}));
      if (bad.rows() > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("ids: ", bad.GetInt64(0, 0), " is not a DEAD inbox row"));
      }
    }
    ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kRequeue, {pg::Text(options_.consumer), id_array,
                                                         pg::Text(req->owner())}));
    if (!req->all() && r.rows() != static_cast<int>(ids.size())) {
      return absl::AbortedError("some rows changed concurrently; nothing was requeued");
    }
    resp->set_requeued(r.rows());
    if (r.rows() == 0) return tx.Commit();
    std::vector<std::string> events;
    for (int i = 0; i < r.rows(); ++i) events.push_back(r.GetString(i, 0));
    ASSIGN_OR_RETURN(
        std::string event_id,
        Record(tx, *actor, "admin.inbox.requeued", "requeue_dead_inbox", "consumer_inbox",
               Values(events, r.rows(), req->all() ? "all DEAD rows" : "ids", req->reason())));
    RETURN_IF_ERROR(tx.Execute(kWakeConsumers, {}).status());
    RETURN_IF_ERROR(tx.Commit());
    resp->set_event_id(event_id);
    return absl::OkStatus();
  }();
  return server::ToGrpcStatus(done, method);
}

grpc::Status AdminOperationsService::ListPoison(grpc::ServerContext* ctx,
                                                const v1::ListPoisonRequest* req,
                                                v1::ListPoisonResponse* resp) {
  const char* method = "ListPoison";
  if (auto actor = Admit(*ctx, method); !actor.ok())
    return server::ToGrpcStatus(actor.status(), method);
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), method);
  const int size = PageSize(req->page_size());
  auto r = (*conn)->Execute(
      kListPoison, {pg::Text(options_.consumer), pg::Int(req->after_id()),
                    pg::Text(req->poison_reason()), pg::Int(size), pg::Int(server::kMaxPageBytes)});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), method);
  for (int i = 0; i < r->rows(); ++i) *resp->add_entries() = PoisonFrom(*r, i);
  const int n = r->rows();
  if (n > 0 && (n == size || r->GetBool(n - 1, 8))) {
    resp->set_next_after_id(resp->entries(n - 1).id());
  }
  return grpc::Status::OK;
}

grpc::Status AdminOperationsService::DiscardPoison(grpc::ServerContext* ctx,
                                                   const v1::DiscardPoisonRequest* req,
                                                   v1::DiscardPoisonResponse* resp) {
  const char* method = "DiscardPoison";
  auto actor = Admit(*ctx, method);
  if (!actor.ok()) return server::ToGrpcStatus(actor.status(), method);
  absl::Status valid = ValidateIds(req->ids_size(), req->all(), req->reason());
  if (valid.ok() && !req->poison_reason().empty() && !req->all()) {
    valid = absl::InvalidArgumentError("poison_reason: only with all: true");
  }
  if (!valid.ok()) return server::ToGrpcStatus(valid, method);
  const std::vector<std::string> ids = Unique(req->ids());
  absl::Status done = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
    ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
    if (!req->all()) {
      ASSIGN_OR_RETURN(pg::Result bad, tx.Execute(kNotUnresolved, {pg::Text(options_.consumer),
                                                                   pg::TextArray(ids)}));
      if (bad.rows() > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("ids: ", bad.GetInt64(0, 0), " is not an unresolved poison entry"));
      }
    }
    ASSIGN_OR_RETURN(pg::Result r,
                     tx.Execute(kResolve, {pg::Text(options_.consumer),
                                           req->all() ? pg::Null() : pg::TextArray(ids),
                                           pg::Text(req->poison_reason()), pg::Text("discarded")}));
    if (!req->all() && r.rows() != static_cast<int>(ids.size())) {
      return absl::AbortedError("some entries changed concurrently; nothing was discarded");
    }
    resp->set_discarded(r.rows());
    if (r.rows() == 0) return tx.Commit();
    std::vector<std::string> resolved;
    for (int i = 0; i < r.rows(); ++i) resolved.push_back(r.GetString(i, 0));
    ASSIGN_OR_RETURN(std::string event_id,
                     Record(tx, *actor, "admin.poison.discarded", "discard_poison", "poison_events",
                            Values(resolved, r.rows(),
                                   req->all() ? "all unresolved entries" : "ids", req->reason())));
    RETURN_IF_ERROR(tx.Commit());
    resp->set_event_id(event_id);
    return absl::OkStatus();
  }();
  return server::ToGrpcStatus(done, method);
}

absl::StatusOr<AdminOperationsService::Replayed> AdminOperationsService::ReplayEntries(
    pg::Transaction& tx, std::vector<v1::PoisonEntry> chosen,
    v1::ReplayPoisonResponse* resp) const {
  std::vector<redis::StreamEntry> entries;
  entries.reserve(chosen.size());  // items point into it
  std::vector<inbox::BatchItem> items;
  std::vector<size_t> chosen_of_item;
  for (size_t i = 0; i < chosen.size(); ++i) {
    v1::PoisonEntry& p = chosen[i];
    auto owner = std::find_if(options_.streams.begin(), options_.streams.end(),
                              [&](const auto& s) { return s.second == p.stream(); });
    absl::StatusOr<redis::StreamEntry> entry = EntryFrom(p);
    if (owner == options_.streams.end()) {
      entry = absl::FailedPreconditionError("the stream is not one Admin reads");
    }
    if (!entry.ok()) {
      p.set_detail(std::string(entry.status().message()));
      *resp->add_still_poison() = std::move(p);
      continue;
    }
    entries.push_back(*std::move(entry));
    items.push_back({owner->first, p.stream(), &entries.back()});
    chosen_of_item.push_back(i);
  }
  const inbox::PreparedBatch batch =
      inbox::PrepareBatch(items, absl::Now(), *options_.keys->Current(), options_.limits);
  ASSIGN_OR_RETURN(const inbox::InsertedBatch inserted,
                   inbox::InsertBatch(tx, options_.consumer, batch, inbox::InsertAs::kProcessed));
  for (const inbox::Refusal& r : inserted.refused) {
    v1::PoisonEntry& p = chosen[chosen_of_item[r.item]];
    p.set_reason(std::string(inbox::PoisonReasonName(r.reason)));
    p.set_detail(r.detail);
    *resp->add_still_poison() = std::move(p);
  }
  Replayed out;
  for (const inbox::InsertedBatch::TakenItem& t : inserted.taken_items) {
    out.poison_ids.push_back(absl::StrCat(chosen[chosen_of_item[t.item]].id()));
  }
  for (const inbox::Arrival* a : inserted.taken) out.event_ids.push_back(a->entry.event_id);
  return out;
}

grpc::Status AdminOperationsService::ReplayPoison(grpc::ServerContext* ctx,
                                                  const v1::ReplayPoisonRequest* req,
                                                  v1::ReplayPoisonResponse* resp) {
  const char* method = "ReplayPoison";
  auto actor = Admit(*ctx, method);
  if (!actor.ok()) return server::ToGrpcStatus(actor.status(), method);
  if (absl::Status s = ValidateIds(req->ids_size(), false, req->reason(), false); !s.ok()) {
    return server::ToGrpcStatus(s, method);
  }
  const std::vector<std::string> ids = Unique(req->ids());
  absl::Status done = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
    ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
    ASSIGN_OR_RETURN(pg::Result rows,
                     tx.Execute(kLockPoison, {pg::Text(options_.consumer), pg::TextArray(ids)}));
    if (rows.rows() != static_cast<int>(ids.size())) {
      return absl::InvalidArgumentError("ids: not every id is an unresolved poison entry");
    }
    std::vector<v1::PoisonEntry> chosen;
    for (int i = 0; i < rows.rows(); ++i) chosen.push_back(PoisonFrom(rows, i));
    ASSIGN_OR_RETURN(const Replayed replayed, ReplayEntries(tx, std::move(chosen), resp));
    resp->set_accepted(static_cast<int64_t>(replayed.poison_ids.size()));
    if (replayed.poison_ids.empty()) return tx.Commit();
    RETURN_IF_ERROR(
        tx.Execute(kResolve, {pg::Text(options_.consumer), pg::TextArray(replayed.poison_ids),
                              pg::Text(""), pg::Text("replayed")})
            .status());
    ASSIGN_OR_RETURN(
        std::string event_id,
        Record(tx, *actor, "admin.poison.replayed", "replay_poison", "poison_events",
               Values(replayed.event_ids, static_cast<int64_t>(replayed.poison_ids.size()), "ids",
                      req->reason())));
    RETURN_IF_ERROR(tx.Commit());
    resp->set_event_id(event_id);
    return absl::OkStatus();
  }();
  return server::ToGrpcStatus(done, method);
}

}  // namespace ulticode::admin::operations
