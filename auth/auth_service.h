// Auth's gRPC service: users, roles and the login policy. Every mutating RPC
// validates first, then commits its change, its audit outbox row and its
// idempotency record in one transaction (mutation::RunMutation). Thread-safe.
#pragma once

#include "common/pg/pool.h"
#include "common/server/call_executor.h"
#include "common/server/principal.h"
#include "owner/mutation/mutation.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::auth {

// CreateUser's business change inside the mutation's transaction (the
// benchmark's cost model runs it too): the user, or ALREADY_EXISTS naming
// the username or email that is taken.
absl::StatusOr<mutation::Outcome<v1::CreateUserResponse>> CreateUserIn(
    pg::Transaction& tx, const audit::Actor& actor, const v1::CreateUserRequest& req);

class AuthServiceImpl final : public v1::AuthService::CallbackService {
 public:
  // Calls run on `calls` (one thread per pooled connection of `pool`).
  AuthServiceImpl(server::CallExecutor& calls, pg::Pool& pool, const server::Authorizer& authorizer,
                  const crypto::SigningKey& signer, mutation::MutationHooks hooks = {})
      : calls_(calls),
        pool_(pool),
        authorizer_(authorizer),
        mutations_(pool, authorizer, signer, std::move(hooks)) {}

  grpc::ServerUnaryReactor* CreateUser(grpc::CallbackServerContext* ctx,
                                       const v1::CreateUserRequest* req,
                                       v1::CreateUserResponse* resp) override;
  grpc::ServerUnaryReactor* DisableUser(grpc::CallbackServerContext* ctx,
                                        const v1::DisableUserRequest* req,
                                        v1::DisableUserResponse* resp) override;
  grpc::ServerUnaryReactor* AssignRole(grpc::CallbackServerContext* ctx,
                                       const v1::AssignRoleRequest* req,
                                       v1::AssignRoleResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeRole(grpc::CallbackServerContext* ctx,
                                       const v1::RevokeRoleRequest* req,
                                       v1::RevokeRoleResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateLoginPolicy(grpc::CallbackServerContext* ctx,
                                              const v1::UpdateLoginPolicyRequest* req,
                                              v1::UpdateLoginPolicyResponse* resp) override;
  grpc::ServerUnaryReactor* GetUser(grpc::CallbackServerContext* ctx, const v1::GetUserRequest* req,
                                    v1::User* resp) override;
  grpc::ServerUnaryReactor* GetUserRoles(grpc::CallbackServerContext* ctx,
                                         const v1::GetUserRolesRequest* req,
                                         v1::UserRoles* resp) override;
  grpc::ServerUnaryReactor* GetLoginPolicy(grpc::CallbackServerContext* ctx,
                                           const v1::GetLoginPolicyRequest* req,
                                           v1::LoginPolicy* resp) override;

 private:
  server::CallExecutor& calls_;
  pg::Pool& pool_;  // read RPCs
  const server::Authorizer& authorizer_;
  const mutation::MutationHandler mutations_;
};

// Request validation, exposed for unit tests. INVALID_ARGUMENT names the field.
absl::Status ValidateCreateUser(const v1::CreateUserRequest& req);
absl::Status ValidateLoginPolicy(const v1::LoginPolicy& policy,
                                 const std::vector<std::string>& paths);
absl::Status ValidateDisableUser(const v1::DisableUserRequest& req);
absl::Status ValidateRoleChange(const std::string& user_id, const std::string& role);
absl::Status ValidateUpdateLoginPolicy(const v1::UpdateLoginPolicyRequest& req);

// Who may call what: method -> role (every method of the service has one).
const server::AccessTable& AccessRules();

// The DML the runtime role needs on auth's own tables (UPDATE where rows
// are locked FOR UPDATE); granted after migrations (migrations::GrantRuntime).
const std::vector<std::string>& RuntimeGrants();

}  // namespace ulticode::auth
