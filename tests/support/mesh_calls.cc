#include "tests/support/mesh_calls.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "tests/support/tokens.h"
#include "ulticode/app/v1/app.grpc.pb.h"
#include "ulticode/auth/v1/auth.grpc.pb.h"

namespace ulticode::testing {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return s.ok() ? absl::OkStatus()
                : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

void Authorize(grpc::ClientContext* ctx, const std::string& subject,
               const std::vector<std::string>& roles) {
  TokenSpec spec;
  spec.subject = subject;
  spec.roles = roles;
  ctx->AddMetadata("authorization", "Bearer " + SharedTestTokens().Mint(spec));
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

absl::StatusOr<std::string> CreateUser(Mesh& mesh, const std::string& name) {
  grpc::ClientContext ctx;
  Authorize(&ctx, "alice", {"auth.admin"});
  auth::v1::CreateUserRequest req;
  req.set_username(name);
  req.set_email(name + "@example.com");
  auth::v1::CreateUserResponse resp;
  const grpc::Status s =
      auth::v1::AuthService::NewStub(mesh.Channel(Service::kAuth, 0))->CreateUser(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp.event_id();
}

absl::StatusOr<std::string> CreateProblem(Mesh& mesh, int n) {
  grpc::ClientContext ctx;
  Authorize(&ctx, "alice", {"app.editor"});
  app::v1::CreateProblemRequest req;
  req.set_slug(absl::StrCat("problem-", n));
  req.set_title(absl::StrCat("Problem ", n));
  req.set_statement("Add two numbers.");
  *req.mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(1000);
  req.set_memory_limit_mb(256);
  req.set_difficulty(1);
  app::v1::ProblemResponse resp;
  const grpc::Status s =
      app::v1::AppService::NewStub(mesh.Channel(Service::kApp, 0))->CreateProblem(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp.event_id();
}

}  // namespace ulticode::testing
