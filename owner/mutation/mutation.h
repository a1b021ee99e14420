// The owner-side write path of a mutating RPC: ONE local transaction holds
// the business change, its audit outbox row with its MAC (outbox::Append) and the
// idempotency record of the request.
//
//   RunMutation<Resp>(pool, signer, "CreateUser", request, principal, request.request_id(),
//                     [&](pg::Transaction& tx) -> absl::StatusOr<Outcome<Resp>> {...});
//
// - With a request_id (scoped to the calling principal): a repeat of the
//   same request by the same principal returns the first
//   response without running `body`; the same id with a different request is
//   INVALID_ARGUMENT. Requests are compared by the SHA-256 of their canonical
//   form (unknown fields dropped, deterministic serialization). Concurrent
//   repeats serialize on the key.
// - Serialization failures, deadlocks, racing inserts and lost connections
//   retry the whole transaction (a few times); business errors do not.
// - A connection lost during COMMIT surfaces as UNKNOWN (outcome unknown);
//   the client resolves it by repeating the request_id.
// Thread-safe (the pool is).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/audit/event.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/mutation/actor.h"
#include "common/mutation/idempotency.h"
#include "common/pg/pool.h"
#include "common/server/grpc_status.h"
#include "common/server/principal.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "owner/outbox/outbox_store.h"

namespace ulticode::mutation {

// Test seam: runs after `body` (business change and outbox row written) and
// before COMMIT. An error aborts the transaction there.
struct MutationHooks {
  std::function<absl::Status(absl::string_view method)> before_commit;
  // Runs after a COMMIT that wrote an outbox row (the owner wakes its
  // dispatcher: outbox::Dispatcher::Wake).
  std::function<void()> after_commit;
};

namespace internal {
// Type-erased core: `body` fills `response`.
absl::Status RunMutation(pg::Pool& pool, absl::string_view method,
                         const google::protobuf::Message& request, absl::string_view principal,
                         absl::string_view request_id, google::protobuf::Message& response,
                         const std::function<absl::Status(pg::Transaction&)>& body,
                         const MutationHooks& hooks);
// Every owner_sequence number in `numbers` (one per attempt, in order) that
// did not commit: all of them when `status` is an error, all but the last
// otherwise. Each is logged (warn) with the method and why; the owner's
// NumberAttestor later tells Admin it was never committed.
void LogAbandonedNumbers(absl::string_view method, const std::vector<int64_t>& numbers,
                         const absl::Status& status);
}  // namespace internal

// What a mutating handler's body returns: the response and, when it changed
// something, the one audit event of that change.
template <typename Response>
struct Outcome {
  Response response;
  std::optional<audit::AuditEvent> event;
};

// How every mutating handler ends when it changed something: the response is
// stamped with the event id and changed=true (responses carry `event_id` and
// `changed`); RunMutation MACs and appends the event in the transaction.
template <typename Response>
Outcome<Response> Changed(audit::AuditEvent event, Response response) {
  response.set_event_id(event.event_id());
  response.set_changed(true);
  return Outcome<Response>{std::move(response), std::move(event)};
}

// A no-op: changed=false, no event.
template <typename Response>
Outcome<Response> Unchanged(Response response) {
  response.set_changed(false);
  return Outcome<Response>{std::move(response), std::nullopt};
}

template <typename Response>
absl::StatusOr<Response> RunMutation(
    pg::Pool& pool, const crypto::SigningKey& signer, absl::string_view method,
    const google::protobuf::Message& request, absl::string_view principal,
    absl::string_view request_id,
    const std::function<absl::StatusOr<Outcome<Response>>(pg::Transaction&)>& body,
    const MutationHooks& hooks = {}) {
  Response response;
  std::vector<int64_t> numbers;  // owner_sequence taken by each attempt
  const absl::Status status = internal::RunMutation(
      pool, method, request, principal, request_id, response,
      [&](pg::Transaction& tx) -> absl::Status {
        ASSIGN_OR_RETURN(Outcome<Response> outcome, body(tx));
        if (outcome.event.has_value()) {
          ASSIGN_OR_RETURN(const int64_t number, outbox::Append(tx, *outcome.event, signer));
          numbers.push_back(number);
        }
        response = std::move(outcome.response);
        return absl::OkStatus();
      },
      hooks);
  internal::LogAbandonedNumbers(method, numbers, status);
  RETURN_IF_ERROR(status);
  if (!numbers.empty() && hooks.after_commit) hooks.after_commit();
  return response;
}

// The shape every mutating handler shares, in this order: admit the caller
// (UNAUTHENTICATED, or PERMISSION_DENIED without the method's role), validate
// the request (INVALID_ARGUMENT, nothing written), run `body` with the
// verified caller as the audit actor inside RunMutation, map the outcome to
// gRPC. Thread-safe.
//
//   return mutations_.Handle(*ctx, "CreateUser", *req,
//       [&] { return ValidateCreateUser(*req); },
//       [&](pg::Transaction& tx, const audit::Actor& actor)
//           -> absl::StatusOr<mutation::Outcome<Resp>> {...},
//       resp);
class MutationHandler {
 public:
  MutationHandler(pg::Pool& pool, const server::Authorizer& authorizer,
                  const crypto::SigningKey& signer, MutationHooks hooks = {})
      : pool_(pool), authorizer_(authorizer), signer_(signer), hooks_(std::move(hooks)) {}

  // `Request` has request_id(); `validate` returns absl::Status; `body`
  // returns absl::StatusOr<Outcome<Response>>.
  template <typename Request, typename Response, typename Validate, typename Body>
  grpc::Status Handle(const grpc::ServerContextBase& ctx, absl::string_view method,
                      const Request& req, Validate&& validate, Body&& body, Response* out) const {
    absl::StatusOr<server::Principal> principal = authorizer_.Admit(ctx, method);
    if (!principal.ok()) return server::ToGrpcStatus(principal.status(), method);
    absl::StatusOr<audit::Actor> actor = ActorFromCall(*principal, ctx, req.request_id());
    if (!actor.ok()) return server::ToGrpcStatus(actor.status(), method);
    if (absl::Status s = validate(); !s.ok()) return server::ToGrpcStatus(s, method);
    absl::StatusOr<Response> result = RunMutation<Response>(
        pool_, signer_, method, req, actor->principal, req.request_id(),
        [&](pg::Transaction& tx) -> absl::StatusOr<Outcome<Response>> { return body(tx, *actor); },
        hooks_);
    if (!result.ok()) return server::ToGrpcStatus(result.status(), method);
    *out = std::move(result).value();
    return grpc::Status::OK;
  }

 private:
  pg::Pool& pool_;
  const server::Authorizer& authorizer_;
  const crypto::SigningKey& signer_;
  const MutationHooks hooks_;
};

}  // namespace ulticode::mutation
