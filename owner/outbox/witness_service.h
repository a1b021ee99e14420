// ulticode.outbox.v1.LogWitness, served by each data owner that witnesses
// Admin's log (proto/ulticode/outbox/v1/witness.proto): the newest
// checkpoint the owner accepted (log_witnessed), with a cosignature made at
// the time of the call, for role audit.reader. An auditor asks the owners
// directly, not through Admin, and checks an export against their views
// (ulticode-verify check --witness-addresses).
//
// Thread-safe: handlers share only the pool and the signer.
#pragma once

#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/pg/pool.h"
#include "common/server/principal.h"
#include "common/tlog/cosignature.h"
#include "owner/outbox/witnessed_state.h"
#include "ulticode/outbox/v1/witness.grpc.pb.h"

namespace ulticode::outbox {

inline constexpr char kWitnessServiceName[] = "ulticode.outbox.v1.LogWitness";

// Every RPC: audit.reader.
const server::AccessTable& WitnessAccessRules();

class WitnessService final : public v1::LogWitness::Service {
 public:
  // INVALID_ARGUMENT when the owner's name cannot name a cosignature key.
  static absl::StatusOr<std::unique_ptr<WitnessService>> Create(
      audit::Owner owner, pg::Pool& pool, const server::Authorizer& authorizer,
      const crypto::SigningKey& key);

  grpc::Status GetWitnessedCheckpoint(grpc::ServerContext* ctx,
                                      const v1::GetWitnessedCheckpointRequest* req,
                                      v1::WitnessedCheckpoint* resp) override;

 private:
  WitnessService(pg::Pool& pool, const server::Authorizer& authorizer,
                 tlog::CosignatureSigner signer, tlog::CosignatureVerifier own)
      : pool_(pool), authorizer_(authorizer), signer_(std::move(signer)), own_(std::move(own)) {}
  absl::StatusOr<v1::WitnessedCheckpoint> Held(const std::string& origin);

  pg::Pool& pool_;
  const server::Authorizer& authorizer_;
  const tlog::CosignatureSigner signer_;
  // Only a state the witness wrote (its own cosignature) is served, and
  // cosigned again: DATA_LOSS otherwise.
  const tlog::CosignatureVerifier own_;
};

}  // namespace ulticode::outbox
