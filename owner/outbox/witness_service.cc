#include "owner/outbox/witness_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/server/grpc_status.h"
#include "common/tlog/note.h"
#include "google/protobuf/util/time_util.h"

namespace ulticode::outbox {
namespace {

// Below the RPC pool's patience (pg::PoolOptions::acquire_timeout, 5 s):
// a slow read never makes another caller wait out its turn for a connection.
constexpr absl::Duration kReadTimeout = absl::Seconds(4);

// $1: the origin, or '' for every log held (the caller refuses several).
constexpr pg::Statement kHeld{
    "witness.served",
    "SELECT origin, size, note, (extract(epoch FROM accepted_at) * 1000000)::bigint, root,"
    "  cosignature"
    " FROM log_witnessed WHERE $1 = '' OR origin = $1 ORDER BY origin LIMIT 2",
    kReadTimeout};

}  // namespace

absl::StatusOr<std::unique_ptr<WitnessService>> WitnessService::Create(
    audit::Owner owner, pg::Pool& pool, const server::Authorizer& authorizer,
    const crypto::SigningKey& key) {
  ASSIGN_OR_RETURN(tlog::CosignatureSigner signer,
                   tlog::CosignatureSigner::Create(audit::OwnerName(owner), key));
  ASSIGN_OR_RETURN(tlog::CosignatureVerifier own, OwnCosignatureVerifier(owner, key));
  return std::unique_ptr<WitnessService>(
      new WitnessService(pool, authorizer, std::move(signer), std::move(own)));
}

absl::StatusOr<v1::WitnessedCheckpoint> WitnessService::Held(const std::string& origin) {
  if (origin.size() > 256 || origin.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("origin: at most 256 bytes, without NUL");
  }
  ASSIGN_OR_RETURN(pg::PooledConnection conn, pool_.Acquire());
  ASSIGN_OR_RETURN(pg::Result r, conn->Execute(kHeld, {pg::Text(origin)}));
  if (r.empty()) {
    return absl::NotFoundError(
        origin.empty() ? "this owner holds no checkpoint: it does not witness Admin's log "
                         "(no --log-keys-file) or has accepted none yet"
                       : absl::StrCat("this owner holds no checkpoint of ", origin));
  }
  if (r.rows() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("origin: required, this owner witnesses several logs (", r.GetString(0, 0),
                     ", ", r.GetString(1, 0), ")"));
  }
  const std::string note = r.GetString(0, 2);
  ASSIGN_OR_RETURN(const tlog::Hash root, tlog::FromBytes(r.GetBytes(0, 4)));
  const WitnessedState state{static_cast<uint64_t>(r.GetInt64(0, 1)), root, note,
                             r.GetString(0, 5)};
  ASSIGN_OR_RETURN(const std::string text, OwnCheckpointText(own_, state));
  ASSIGN_OR_RETURN(const std::string line,
                   signer_.Cosign(text, static_cast<uint64_t>(absl::ToUnixSeconds(absl::Now()))));
  v1::WitnessedCheckpoint out;
  out.set_checkpoint(note + line);
  out.set_tree_size(static_cast<uint64_t>(r.GetInt64(0, 1)));
  *out.mutable_accepted_at() =
      google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(r.GetInt64(0, 3));
  return out;
}

grpc::Status WitnessService::GetWitnessedCheckpoint(grpc::ServerContext* ctx,
                                                    const v1::GetWitnessedCheckpointRequest* req,
                                                    v1::WitnessedCheckpoint* resp) {
  constexpr char kMethod[] = "GetWitnessedCheckpoint";
  auto principal = authorizer_.Admit(*ctx, kMethod);
  if (!principal.ok()) return server::ToGrpcStatus(principal.status(), kMethod);
  auto slot = authorizer_.EnterRead(*principal);
  if (!slot.ok()) return server::ToGrpcStatus(slot.status(), kMethod);
  log::Info("audit_read", kMethod, {{"principal", principal->id}});
  auto held = Held(req->origin());
  if (!held.ok()) return server::ToGrpcStatus(held.status(), kMethod);
  *resp = *std::move(held);
  return grpc::Status::OK;
}

const server::AccessTable& WitnessAccessRules() {
  static const auto* rules = new server::AccessTable{{"GetWitnessedCheckpoint", "audit.reader"}};
  return *rules;
}

}  // namespace ulticode::outbox
