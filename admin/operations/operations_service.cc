#include "admin/operations/operations_service.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/audit_logs/writer.h"
#include "admin/inbox/batch.h"
#include "admin/inbox/inbox_store.h"
#include "admin/personal/personal_store.h"
#include "admin/query/list_token.h"
#include "admin/query/page_token.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"
#include "common/mutation/actor.h"
#include "common/mutation/idempotency.h"
#include "common/seal/seal.h"
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

// 1..500; 0 means 100.
absl::StatusOr<int> PageSize(int32_t requested) {
  if (requested < 0 || requested > 500) {
    return absl::InvalidArgumentError("page_size: must be 0..500 (0 means 100)");
  }
  return requested == 0 ? 100 : requested;
}

// The position after the previous page (0 for the first).
absl::StatusOr<int64_t> After(const std::string& token, query::ListKind kind,
                              uint64_t fingerprint) {
  if (token.empty()) return 0;
  ASSIGN_OR_RETURN(const uint64_t after,
                   query::DecodeListToken("page_token", token, kind, fingerprint));
  if (after > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError("page_token: malformed");
  }
  return static_cast<int64_t>(after);
}

// Rows named by id: 1..kMaxIds of them.
absl::Status ValidateIds(const v1::RowIds& ids) {
  if (ids.ids().empty()) return absl::InvalidArgumentError("ids.ids: give 1.. ids");
  if (ids.ids_size() > kMaxIds) {
    return absl::InvalidArgumentError(
        absl::StrCat("ids.ids: ", ids.ids_size(), " ids, at most ", kMaxIds));
  }
  return absl::OkStatus();
}

absl::Status ValidateReason(absl::string_view reason) {
  return text::Check("reason", reason, kReasonRule);
}

// The selection of a request that takes ids or every row: one is required.
// An empty request never means every row.
template <typename Request>
absl::Status ValidateSelection(const Request& req) {
  RETURN_IF_ERROR(ValidateReason(req.reason()));
  if (req.selection_case() == Request::SELECTION_NOT_SET) {
    return absl::InvalidArgumentError("ids: give ids, or ask for every row");
  }
  if (req.has_ids()) RETURN_IF_ERROR(ValidateIds(req.ids()));
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
  redis::StreamEntry entry{.id = p.stream_entry_id()};
  for (const auto& v : fields.values()) {
    const auto& f = v.struct_value().fields();
    auto name = f.find("name");
    if (name == f.end()) return absl::FailedPreconditionError("a stored field has no name");
    if (auto t = f.find("text"); t != f.end()) {
      entry.fields.emplace_back(name->second.string_value(), t->second.string_value());
    } else if (auto h = f.find("hex"); h != f.end()) {
      entry.fields.emplace_back(name->second.string_value(),
                                absl::HexStringToBytes(h->second.string_value()));
    } else if (f.contains("omitted_personal_bytes")) {
      continue;  // replayed without its personal values (never stored here)
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
      {"ListDeadInbox", "audit.operator"},
      {"RequeueDeadInbox", "audit.operator"},
      {"ListPoison", "audit.operator"},
      {"DiscardPoison", "audit.operator"},
      {"ReplayPoison", "audit.operator"},
      // Not the operators': erasure is a privacy officer's decision.
      {"ErasePersonalData", "privacy.officer"},
  };
  return *rules;
}

absl::StatusOr<audit::Actor> AdminOperationsService::Admit(const grpc::ServerContext& ctx,
                                                           absl::string_view method,
                                                           absl::string_view request_id) {
  ASSIGN_OR_RETURN(server::Principal principal, authorizer_.Admit(ctx, method));
  return mutation::ActorFromCall(principal, ctx, std::string(request_id));
}

grpc::Status AdminOperationsService::Mutate(
    grpc::ServerContext* ctx, const char* method, const google::protobuf::Message& req,
    const std::string& request_id, google::protobuf::Message* resp, const absl::Status& valid,
    const std::function<absl::Status(pg::Transaction&, const audit::Actor&)>& change) {
  auto actor = Admit(*ctx, method, request_id);
  if (!actor.ok()) return server::ToGrpcStatus(actor.status(), method);
  absl::Status done = valid.ok() ? mutation::ValidateRequestId(request_id) : valid;
  if (done.ok()) {
    done = [&]() -> absl::Status {
      const mutation::IdempotencyKey key(method, req, actor->principal, request_id);
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
      ASSIGN_OR_RETURN(const bool seen, key.Replay(tx, *resp));
      if (!seen) {
        RETURN_IF_ERROR(change(tx, *actor));
        key.Save(tx, *resp);
      }
      return tx.Commit();
    }();
  }
  if (!done.ok()) resp->Clear();
  return server::ToGrpcStatus(done, method);
}

absl::StatusOr<std::string> AdminOperationsService::Record(
    pg::Transaction& tx, const audit::Actor& actor, const char* event_type, const char* action,
    const char* entity_type, const google::protobuf::Struct& values, const std::string& entity_id,
    const std::string& event_id) {
  audit::AuditEvent event = audit::NewEvent(audit::v1::OWNER_ADMIN, event_type, actor, absl::Now());
  if (!event_id.empty()) {
    event.set_event_id(event_id);
    event.mutable_record()->set_audit_id(event_id);
  }
  auto* r = event.mutable_record();
  r->set_action(action);
  r->set_entity_type(entity_type);
  r->set_entity_id(entity_id.empty() ? options_.consumer : entity_id);
  r->set_subject(entity_id);
  *r->mutable_new_value() = values;
  RETURN_IF_ERROR(audit::Validate(event));
  if (options_.personal_data_commitments) {
    ASSIGN_OR_RETURN(const audit::PersonalValues personal, audit::CommitPersonalData(event));
    const std::vector<audit::PersonalValue> values_of(personal.values().begin(),
                                                      personal.values().end());
    RETURN_IF_ERROR(personal::StoreValues(tx, {{&event, &values_of}}).status());
  }
  const std::string envelope = audit::Serialize(event);
  // A bundle of one: the seal's path is empty, its root the envelope's
  // leaf hash.
  ASSIGN_OR_RETURN(const std::vector<std::string> sealed,
                   seal::SealBundle(*options_.signer, {absl::string_view(envelope)}));
  const std::string key_id = options_.signer->key_id();
  ASSIGN_OR_RETURN(int64_t written,
                   audit_logs::InsertAuditLogs(tx, {{&event, &envelope, &sealed[0], &key_id}}));
  if (written != 1) return absl::InternalError("the operator's audit record was not written");
  return event.event_id();
}

grpc::Status AdminOperationsService::ListDeadInbox(grpc::ServerContext* ctx,
                                                   const v1::ListDeadInboxRequest* req,
                                                   v1::ListDeadInboxResponse* resp) {
  const char* method = "ListDeadInbox";
  if (auto actor = Admit(*ctx, method, ""); !actor.ok())
    return server::ToGrpcStatus(actor.status(), method);
  auto after = After(req->page_token(), query::ListKind::kDeadInbox, 0);
  if (!after.ok()) return server::ToGrpcStatus(after.status(), method);
  auto page = PageSize(req->page_size());
  if (!page.ok()) return server::ToGrpcStatus(page.status(), method);
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), method);
  const int size = *page;
  auto r =
      (*conn)->Execute(kListDead, {pg::Text(options_.consumer), pg::Int(*after), pg::Int(size)});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), method);
  for (int i = 0; i < r->rows(); ++i) {
    v1::DeadInboxRow* row = resp->add_dead_inbox_rows();
    row->set_id(r->GetInt64(i, 0));
    row->set_event_id(r->GetString(i, 1));
    row->set_owner(audit::OwnerFromName(r->GetString(i, 2)));
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
  if (r->rows() == size) {
    resp->set_next_page_token(query::EncodeListToken(query::ListKind::kDeadInbox,
                                                     resp->dead_inbox_rows(size - 1).id(), 0));
  }
  return grpc::Status::OK;
}

grpc::Status AdminOperationsService::RequeueDeadInbox(grpc::ServerContext* ctx,
                                                      const v1::RequeueDeadInboxRequest* req,
                                                      v1::RequeueDeadInboxResponse* resp) {
  absl::Status valid = ValidateSelection(*req);
  const audit::v1::Owner owner = req->all_of_owner();
  if (valid.ok() && req->has_all_of_owner() && owner != audit::v1::OWNER_UNSPECIFIED &&
      owner != audit::v1::OWNER_AUTH && owner != audit::v1::OWNER_APP) {
    valid = absl::InvalidArgumentError(
        "all_of_owner: OWNER_AUTH, OWNER_APP, or OWNER_UNSPECIFIED for every owner");
  }
  const bool all = req->has_all_of_owner();
  const std::vector<std::string> ids = Unique(req->ids().ids());
  return Mutate(
      ctx, "RequeueDeadInbox", *req, req->request_id(), resp, valid,
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::Status {
        if (!all) {
          ASSIGN_OR_RETURN(pg::Result bad,
                           tx.Execute(kNotDead, {pg::Text(options_.consumer), pg::TextArray(ids)}));
          if (bad.rows() > 0) {
            return absl::InvalidArgumentError(
                absl::StrCat("ids.ids: ", bad.GetInt64(0, 0), " is not a DEAD inbox row"));
          }
        }
        const std::string owner_name =
            all && owner != audit::v1::OWNER_UNSPECIFIED ? audit::OwnerName(owner) : "";
        ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kRequeue, {pg::Text(options_.consumer),
                                                             all ? pg::Null() : pg::TextArray(ids),
                                                             pg::Text(owner_name)}));
        if (!all && r.rows() != static_cast<int>(ids.size())) {
          return absl::AbortedError("some rows changed concurrently; nothing was requeued");
        }
        resp->set_requeued(r.rows());
        if (r.rows() == 0) return absl::OkStatus();
        std::vector<std::string> events;
        for (int i = 0; i < r.rows(); ++i) events.push_back(r.GetString(i, 0));
        ASSIGN_OR_RETURN(
            std::string event_id,
            Record(tx, actor, "admin.inbox.requeued", "requeue_dead_inbox", "consumer_inbox",
                   Values(events, r.rows(), all ? "all DEAD rows" : "ids", req->reason())));
        RETURN_IF_ERROR(tx.Execute(kWakeConsumers, {}).status());
        resp->set_event_id(event_id);
        return absl::OkStatus();
      });
}

grpc::Status AdminOperationsService::ListPoison(grpc::ServerContext* ctx,
                                                const v1::ListPoisonRequest* req,
                                                v1::ListPoisonResponse* resp) {
  const char* method = "ListPoison";
  if (auto actor = Admit(*ctx, method, ""); !actor.ok())
    return server::ToGrpcStatus(actor.status(), method);
  const uint64_t fingerprint = query::Fnv1a64(req->poison_reason());
  auto after = After(req->page_token(), query::ListKind::kPoison, fingerprint);
  if (!after.ok()) return server::ToGrpcStatus(after.status(), method);
  auto page = PageSize(req->page_size());
  if (!page.ok()) return server::ToGrpcStatus(page.status(), method);
  auto conn = pool_.Acquire();
  if (!conn.ok()) return server::ToGrpcStatus(conn.status(), method);
  const int size = *page;
  auto r = (*conn)->Execute(
      kListPoison, {pg::Text(options_.consumer), pg::Int(*after), pg::Text(req->poison_reason()),
                    pg::Int(size), pg::Int(server::kMaxPageBytes)});
  if (!r.ok()) return server::ToGrpcStatus(r.status(), method);
  for (int i = 0; i < r->rows(); ++i) *resp->add_poison_entries() = PoisonFrom(*r, i);
  const int n = r->rows();
  if (n > 0 && (n == size || r->GetBool(n - 1, 8))) {
    resp->set_next_page_token(query::EncodeListToken(
        query::ListKind::kPoison, resp->poison_entries(n - 1).id(), fingerprint));
  }
  return grpc::Status::OK;
}

grpc::Status AdminOperationsService::DiscardPoison(grpc::ServerContext* ctx,
                                                   const v1::DiscardPoisonRequest* req,
                                                   v1::DiscardPoisonResponse* resp) {
  const bool all = req->has_all();
  const std::vector<std::string> ids = Unique(req->ids().ids());
  return Mutate(
      ctx, "DiscardPoison", *req, req->request_id(), resp, ValidateSelection(*req),
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::Status {
        if (!all) {
          ASSIGN_OR_RETURN(pg::Result bad, tx.Execute(kNotUnresolved, {pg::Text(options_.consumer),
                                                                       pg::TextArray(ids)}));
          if (bad.rows() > 0) {
            return absl::InvalidArgumentError(absl::StrCat("ids.ids: ", bad.GetInt64(0, 0),
                                                           " is not an unresolved poison entry"));
          }
        }
        ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kResolve, {pg::Text(options_.consumer),
                                                             all ? pg::Null() : pg::TextArray(ids),
                                                             pg::Text(req->all().poison_reason()),
                                                             pg::Text("discarded")}));
        if (!all && r.rows() != static_cast<int>(ids.size())) {
          return absl::AbortedError("some entries changed concurrently; nothing was discarded");
        }
        resp->set_discarded(r.rows());
        if (r.rows() == 0) return absl::OkStatus();
        std::vector<std::string> resolved;
        for (int i = 0; i < r.rows(); ++i) resolved.push_back(r.GetString(i, 0));
        ASSIGN_OR_RETURN(
            std::string event_id,
            Record(
                tx, actor, "admin.poison.discarded", "discard_poison", "poison_events",
                Values(resolved, r.rows(), all ? "all unresolved entries" : "ids", req->reason())));
        resp->set_event_id(event_id);
        return absl::OkStatus();
      });
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
      inbox::PrepareBatch(items, absl::Now(), *options_.keys->Current(), seals_, options_.limits);
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
  absl::Status valid = ValidateReason(req->reason());
  if (valid.ok()) valid = ValidateIds(req->ids());
  const std::vector<std::string> ids = Unique(req->ids().ids());
  return Mutate(
      ctx, "ReplayPoison", *req, req->request_id(), resp, valid,
      [&](pg::Transaction& tx, const audit::Actor& actor) -> absl::Status {
        ASSIGN_OR_RETURN(pg::Result rows, tx.Execute(kLockPoison, {pg::Text(options_.consumer),
                                                                   pg::TextArray(ids)}));
        if (rows.rows() != static_cast<int>(ids.size())) {
          return absl::InvalidArgumentError("ids.ids: not every id is an unresolved poison entry");
        }
        std::vector<v1::PoisonEntry> chosen;
        for (int i = 0; i < rows.rows(); ++i) chosen.push_back(PoisonFrom(rows, i));
        ASSIGN_OR_RETURN(const Replayed replayed, ReplayEntries(tx, std::move(chosen), resp));
        resp->set_accepted(static_cast<int64_t>(replayed.poison_ids.size()));
        if (replayed.poison_ids.empty()) return absl::OkStatus();
        RETURN_IF_ERROR(
            tx.Execute(kResolve, {pg::Text(options_.consumer), pg::TextArray(replayed.poison_ids),
                                  pg::Text(""), pg::Text("replayed")})
                .status());
        ASSIGN_OR_RETURN(
            std::string event_id,
            Record(tx, actor, "admin.poison.replayed", "replay_poison", "poison_events",
                   Values(replayed.event_ids, static_cast<int64_t>(replayed.poison_ids.size()),
                          "ids", req->reason())));
        resp->set_event_id(event_id);
        return absl::OkStatus();
      });
}

}  // namespace ulticode::admin::operations
