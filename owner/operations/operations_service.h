// ulticode.outbox.v1.OutboxOperations, served by each data owner: operator
// repairs of the outbox (role "audit.operator"), each one committed together
// with its own audit event through this outbox (MutationHandler), so the
// operator's action reaches audit_logs like any business change.
//  - RedriveDeadOutbox: DEAD rows back to PENDING (by ids, or all).
//  - Replay: CONFIRMED rows of a creation-time range published again, to
//    rebuild a lost or restored Admin database (docs/guarantees.md).
//  - ErasePersonalData (role "privacy.officer"): a data subject's personal
//    values out of the outbox and the stream (docs/personal-data.md).
#pragma once

#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/pool.h"
#include "common/redis/redis_client.h"
#include "common/server/principal.h"
#include "owner/mutation/mutation.h"
#include "ulticode/outbox/v1/outbox.grpc.pb.h"

namespace ulticode::operations {

namespace v1 = ::ulticode::outbox::v1;

inline constexpr char kServiceName[] = "ulticode.outbox.v1.OutboxOperations";
// Ids per RedriveDeadOutbox call; rows per Replay call.
inline constexpr int kMaxRedriveIds = 1000;
inline constexpr int64_t kMaxReplayRows = 1000000;

// Who may call which method of OutboxOperations.
const server::AccessTable& AccessRules();

absl::Status ValidateRedrive(const v1::RedriveDeadOutboxRequest& req);
absl::Status ValidateReplay(const v1::ReplayRequest& req);
absl::Status ValidateErasure(const v1::ErasePersonalDataRequest& req);

class OutboxOperationsService final : public v1::OutboxOperations::Service {
 public:
  // `redis` and `stream`: the owner's stream, scrubbed by ErasePersonalData.
  OutboxOperationsService(audit::Owner owner, pg::Pool& pool, const server::Authorizer& authorizer,
                          const crypto::SigningKey& signer, redis::Options redis,
                          std::string stream)
      : owner_(owner),
        mutations_(pool, authorizer, signer),
        redis_(std::move(redis)),
        stream_(std::move(stream)) {}

  grpc::Status RedriveDeadOutbox(grpc::ServerContext* ctx, const v1::RedriveDeadOutboxRequest* req,
                                 v1::RedriveDeadOutboxResponse* resp) override;
  grpc::Status Replay(grpc::ServerContext* ctx, const v1::ReplayRequest* req,
                      v1::ReplayResponse* resp) override;
  grpc::Status ErasePersonalData(grpc::ServerContext* ctx, const v1::ErasePersonalDataRequest* req,
                                 v1::ErasePersonalDataResponse* resp) override;

 private:
  const audit::Owner owner_;
  const mutation::MutationHandler mutations_;
  const redis::Options redis_;
  const std::string stream_;
};

}  // namespace ulticode::operations
