// AdminOperations.ErasePersonalData (docs/personal-data.md): the owners
// first, each erasing its outbox values and its stream's entries that
// carry one; then Admin's store, in one transaction with the erasure's
// audit record and the request's idempotency key. Values still in flight
// when Admin erases are refused on arrival from then on (personal_erasures),
// so the order leaves none behind.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "admin/operations/operations_service.h"
#include "admin/personal/personal_store.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/ids/uuid.h"
#include "common/mutation/actor.h"
#include "common/mutation/idempotency.h"
#include "common/server/grpc_status.h"
#include "common/text/text.h"
#include "google/protobuf/util/time_util.h"
#include "tools/client/admin_channel.h"
#include "ulticode/outbox/v1/outbox.grpc.pb.h"

namespace ulticode::admin::operations {
namespace {

using google::protobuf::util::TimeUtil;

// The erasure covers events up to this long after it: an owner whose clock
// runs ahead of Admin's by less than this has no event of the subject
// committed before the erasure left out of it.
constexpr absl::Duration kClockMargin = absl::Minutes(1);
constexpr absl::Duration kOwnerDeadline = absl::Seconds(20);
constexpr char kMethod[] = "ErasePersonalData";

absl::Status ValidateErasure(const v1::ErasePersonalDataRequest& req) {
  RETURN_IF_ERROR(audit::ValidateSubject("subject", req.subject()));
  return mutation::ValidateRequestId(req.request_id());
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

absl::StatusOr<v1::OwnerErasure> AdminOperationsService::EraseAtOwner(const OwnerEndpoint& owner,
                                                                      const std::string& subject,
                                                                      absl::Time through) {
  ASSIGN_OR_RETURN(const std::string token, crypto::ReadSecretFile(options_.owner_token_file));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   client::Channel(owner.address, options_.owner_cacert));
  auto stub = outbox::v1::OutboxOperations::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kOwnerDeadline));
  outbox::v1::ErasePersonalDataRequest req;
  req.set_subject(subject);
  *req.mutable_erased_through() = TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(through));
  // A delivery repeated by the transport is one erasure; a repeat of the
  // whole request is another (and erases what arrived since).
  req.set_request_id(ids::NewUuidV7At(absl::Now()));
  outbox::v1::ErasePersonalDataResponse resp;
  RETURN_IF_ERROR(FromGrpc(stub->ErasePersonalData(&ctx, req, &resp)));
  v1::OwnerErasure out;
  out.set_owner(owner.owner);
  out.set_values_erased(resp.values_erased());
  out.set_rows_republished(resp.rows_republished());
  out.set_stream_entries_removed(resp.stream_entries_removed());
  out.set_event_id(resp.event_id());
  return out;
}

grpc::Status AdminOperationsService::ErasePersonalData(grpc::ServerContext* ctx,
                                                       const v1::ErasePersonalDataRequest* req,
                                                       v1::ErasePersonalDataResponse* resp) {
  auto actor = Admit(*ctx, kMethod, req->request_id());
  if (!actor.ok()) return server::ToGrpcStatus(actor.status(), kMethod);
  absl::Status done = ValidateErasure(*req);
  if (done.ok() && options_.owners.empty()) {
    done = absl::FailedPreconditionError(
        "no owner to erase from: Admin runs without --owner-operations");
  }
  const mutation::IdempotencyKey key(kMethod, *req, actor->principal, req->request_id());
  if (done.ok()) {
    done = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
      {
        // A repeat answers with the first report, asking no owner again.
        ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
        ASSIGN_OR_RETURN(const bool seen, key.Replay(tx, *resp));
        RETURN_IF_ERROR(tx.Commit());
        if (seen) return absl::OkStatus();
      }
      const absl::Time through = absl::Now() + kClockMargin;
      resp->set_subject(req->subject());
      *resp->mutable_erased_through() =
          TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(through));
      mutation::Values owners_erased;
      for (const OwnerEndpoint& owner : options_.owners) {
        absl::StatusOr<v1::OwnerErasure> erased = EraseAtOwner(owner, req->subject(), through);
        if (!erased.ok()) {
          // The owner's code: a refused token is not mended by repeating.
          return absl::Status(
              erased.status().code(),
              absl::StrCat("owner ", audit::OwnerName(owner.owner), " did not erase (",
                           erased.status().message(),
                           "); nothing is recorded on Admin yet: repeat the request once "
                           "that is mended"));
        }
        owners_erased.Set(audit::OwnerName(owner.owner), erased->values_erased());
        *resp->add_owners() = *std::move(erased);
      }
      ASSIGN_OR_RETURN(pg::Transaction tx, conn->Begin());
      // A concurrent repeat may have finished meanwhile: its report stands
      // (the owners erased twice, which changes nothing).
      v1::ErasePersonalDataResponse first;
      ASSIGN_OR_RETURN(const bool finished, key.Replay(tx, first));
      if (finished) {
        *resp = std::move(first);
        return tx.Commit();
      }
      // The erasure and its record go together: the database refuses to
      // commit one without the other.
      const std::string record_id = ids::NewUuidV7At(absl::Now());
      ASSIGN_OR_RETURN(const int64_t erased,
                       personal::Erase(tx, req->subject(), through, actor->principal, record_id));
      resp->set_values_erased(erased);
      mutation::Values values;
      values.Set("values_erased", erased)
          .Set("erased_through",
               absl::FormatTime(absl::RFC3339_full, through, absl::UTCTimeZone()));
      google::protobuf::Struct recorded = values.get();
      (*recorded.mutable_fields())["owners"].mutable_struct_value()->CopyFrom(owners_erased.get());
      ASSIGN_OR_RETURN(const std::string event_id,
                       Record(tx, *actor, "admin.personal_data.erased", "erase_personal_data",
                              "data_subject", recorded, req->subject(), record_id));
      resp->set_event_id(event_id);
      key.Save(tx, *resp);
      return tx.Commit();
    }();
  }
  if (!done.ok()) resp->Clear();
  return server::ToGrpcStatus(done, kMethod);
}

}  // namespace ulticode::admin::operations
