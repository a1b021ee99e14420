// App's gRPC service: problems, contests and the problems a contest holds.
// Every mutating RPC resolves the caller, validates, then commits its change,
// its audit outbox row and its idempotency record in one transaction
// (mutation::RunMutation). A call that would change nothing succeeds with
// changed=false and writes no audit row. Thread-safe.
//
// Errors: INVALID_ARGUMENT names the field and the rule; NOT_FOUND for a
// missing problem or contest; ALREADY_EXISTS for a taken slug or label;
// FAILED_PRECONDITION when the contest's state forbids the change.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/pg/pool.h"
#include "common/server/call_executor.h"
#include "common/server/principal.h"
#include "owner/mutation/mutation.h"
#include "ulticode/app/v1/app.grpc.pb.h"

namespace ulticode::app {

class AppServiceImpl final : public v1::AppService::CallbackService {
 public:
  // Calls run on `calls` (one thread per pooled connection of `pool`).
  AppServiceImpl(server::CallExecutor& calls, pg::Pool& pool, const server::Authorizer& authorizer,
                 const crypto::SigningKey& signer, mutation::MutationHooks hooks = {})
      : calls_(calls),
        pool_(pool),
        authorizer_(authorizer),
        mutations_(pool, authorizer, signer, std::move(hooks)) {}

  grpc::ServerUnaryReactor* CreateProblem(grpc::CallbackServerContext* ctx,
                                          const v1::CreateProblemRequest* req,
                                          v1::ProblemResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateProblem(grpc::CallbackServerContext* ctx,
                                          const v1::UpdateProblemRequest* req,
                                          v1::ProblemResponse* resp) override;
  grpc::ServerUnaryReactor* CreateContest(grpc::CallbackServerContext* ctx,
                                          const v1::CreateContestRequest* req,
                                          v1::ContestResponse* resp) override;
  grpc::ServerUnaryReactor* AddProblemToContest(grpc::CallbackServerContext* ctx,
                                                const v1::AddProblemToContestRequest* req,
                                                v1::ContestResponse* resp) override;
  grpc::ServerUnaryReactor* RemoveProblemFromContest(grpc::CallbackServerContext* ctx,
                                                     const v1::RemoveProblemFromContestRequest* req,
                                                     v1::ContestResponse* resp) override;
  grpc::ServerUnaryReactor* PublishContest(grpc::CallbackServerContext* ctx,
                                           const v1::PublishContestRequest* req,
                                           v1::ContestResponse* resp) override;
  grpc::ServerUnaryReactor* GetProblem(grpc::CallbackServerContext* ctx,
                                       const v1::GetProblemRequest* req,
                                       v1::Problem* resp) override;
  grpc::ServerUnaryReactor* GetContest(grpc::CallbackServerContext* ctx,
                                       const v1::GetContestRequest* req,
                                       v1::Contest* resp) override;

 private:
  server::CallExecutor& calls_;
  pg::Pool& pool_;  // read RPCs
  const server::Authorizer& authorizer_;
  const mutation::MutationHandler mutations_;
};

// Request validation, exposed for unit tests. INVALID_ARGUMENT names the
// field and the rule; the ranges are those documented in app.proto. The
// request_id is checked by mutation::RunMutation, not here.
absl::Status ValidateSlug(const std::string& slug);
absl::Status ValidateLabel(const std::string& label);
// `field` names the id in the message ("problem_id", "contest_id").
absl::Status ValidateId(const char* field, const std::string& id);
absl::Status ValidateCreateProblem(const v1::CreateProblemRequest& req);
// Checks the mask (known paths, at least one) and only the masked values.
absl::Status ValidateUpdateProblem(const v1::UpdateProblemRequest& req);
absl::Status ValidateCreateContest(const v1::CreateContestRequest& req);
absl::Status ValidateAddProblemToContest(const v1::AddProblemToContestRequest& req);
absl::Status ValidateRemoveProblemFromContest(const v1::RemoveProblemFromContestRequest& req);
absl::Status ValidatePublishContest(const v1::PublishContestRequest& req);

// Who may call what: method -> role (every method of the service has one).
const server::AccessTable& AccessRules();

// The DML the runtime role needs on app's own tables (UPDATE where rows
// are locked FOR UPDATE); granted after migrations (migrations::GrantRuntime).
const std::vector<std::string>& RuntimeGrants();

}  // namespace ulticode::app
