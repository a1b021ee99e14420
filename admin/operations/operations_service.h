// ulticode.admin.v1.AdminOperations: operators repair stuck events on Admin's
// side (role "audit.operator"): DEAD inbox rows are listed and requeued;
// poison entries are listed, discarded or validated again and taken in. Each
// change commits together with its own audit record in audit_logs (owner
// "admin", event types admin.*, the verified caller as the actor, sealed
// with Admin's key), so an operator's repair is as visible as what it
// repaired. Lists are reads and leave no record. ErasePersonalData (role
// "privacy.officer", erasure.cc) erases a data subject's personal values
// at the owners and here (docs/personal-data.md).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "admin/inbox/entry_validation.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/pg/pool.h"
#include "common/seal/seal.h"
#include "common/server/principal.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::admin::operations {

inline constexpr char kServiceName[] = "ulticode.admin.v1.AdminOperations";
inline constexpr int kMaxIds = 1000;

const server::AccessTable& AccessRules();

// An owner's OutboxOperations, for ErasePersonalData.
struct OwnerEndpoint {
  audit::Owner owner = audit::v1::OWNER_UNSPECIFIED;
  std::string address;  // host:port
};

struct OperationsOptions {
  std::string consumer = "audit_logs";  // consumer_inbox.consumer
  // Owner of each stream, to validate a poison entry again.
  std::vector<std::pair<audit::Owner, std::string>> streams;
  inbox::ValidationLimits limits;
  const crypto::KeyDirectoryFile* keys = nullptr;  // the owners' public keys
  const crypto::SigningKey* signer = nullptr;      // Admin's: seals its records
  // Where ErasePersonalData reaches the owners (--owner-operations), with
  // a bearer token with role "privacy.officer" (--owner-token-file, read at
  // each call) over TLS trusting --owner-cacert (plaintext without it).
  std::vector<OwnerEndpoint> owners;
  std::string owner_token_file;
  std::string owner_cacert;
  // Admin's own records commit to their personal values (the caller's
  // address and agent) like the owners' (--personal-data-commitments).
  bool personal_data_commitments = true;
};

class AdminOperationsService final : public admin::v1::AdminOperations::Service {
 public:
  AdminOperationsService(pg::Pool& pool, const server::Authorizer& authorizer,
                         OperationsOptions options)
      : pool_(pool), authorizer_(authorizer), options_(std::move(options)) {}

  grpc::Status ListDeadInbox(grpc::ServerContext* ctx, const v1::ListDeadInboxRequest* req,
                             v1::ListDeadInboxResponse* resp) override;
  grpc::Status RequeueDeadInbox(grpc::ServerContext* ctx, const v1::RequeueDeadInboxRequest* req,
                                v1::RequeueDeadInboxResponse* resp) override;
  grpc::Status ListPoison(grpc::ServerContext* ctx, const v1::ListPoisonRequest* req,
                          v1::ListPoisonResponse* resp) override;
  grpc::Status DiscardPoison(grpc::ServerContext* ctx, const v1::DiscardPoisonRequest* req,
                             v1::DiscardPoisonResponse* resp) override;
  grpc::Status ReplayPoison(grpc::ServerContext* ctx, const v1::ReplayPoisonRequest* req,
                            v1::ReplayPoisonResponse* resp) override;
  // erasure.cc.
  grpc::Status ErasePersonalData(grpc::ServerContext* ctx, const v1::ErasePersonalDataRequest* req,
                                 v1::ErasePersonalDataResponse* resp) override;

 private:
  // Admits the caller and returns its actor (for the audit record).
  absl::StatusOr<audit::Actor> Admit(const grpc::ServerContext& ctx, absl::string_view method,
                                     absl::string_view request_id);
  // A mutation: admits the caller and, when `valid` and the request id are,
  // runs `change` in one transaction with the request's idempotency key
  // (a repeat answers with the first `resp`), then commits.
  grpc::Status Mutate(
      grpc::ServerContext* ctx, const char* method, const google::protobuf::Message& req,
      const std::string& request_id, google::protobuf::Message* resp, const absl::Status& valid,
      const std::function<absl::Status(pg::Transaction&, const audit::Actor&)>& change);
  // Inserts Admin's own audit record of an action inside `tx`; returns its
  // id (`event_id` when given, else a new one). The entity is this
  // consumer's unless `entity_id` is given, which is then the record's
  // subject too.
  absl::StatusOr<std::string> Record(pg::Transaction& tx, const audit::Actor& actor,
                                     const char* event_type, const char* action,
                                     const char* entity_type,
                                     const google::protobuf::Struct& values,
                                     const std::string& entity_id = "",
                                     const std::string& event_id = "");
  // ErasePersonalData at one owner (erasure.cc).
  absl::StatusOr<v1::OwnerErasure> EraseAtOwner(const OwnerEndpoint& owner,
                                                const std::string& subject, absl::Time through);
  struct Replayed {
    std::vector<std::string> poison_ids;  // resolved as replayed
    std::vector<std::string> event_ids;   // now in the inbox (with their audit rows)
  };
  // Takes the chosen entries that now validate into the inbox with their
  // audit rows, by the bridge's batch rules (inbox/batch.h); adds the others
  // to `resp->still_poison` with the reason.
  absl::StatusOr<Replayed> ReplayEntries(pg::Transaction& tx, std::vector<v1::PoisonEntry> chosen,
                                         v1::ReplayPoisonResponse* resp) const;

  pg::Pool& pool_;
  const server::Authorizer& authorizer_;
  const OperationsOptions options_;
  // Replayed entries' bundle signatures (thread-safe; a cache, so mutable).
  mutable seal::Verifier seals_;
};

}  // namespace ulticode::admin::operations
