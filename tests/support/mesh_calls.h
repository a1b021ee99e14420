// Business changes on a running Mesh, as a test client would make them:
// each call carries a bearer token for its role and a 30 s deadline, and
// returns the event id the owner recorded (or the call's error).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/mesh.h"

namespace ulticode::testing {

// Bearer token of `subject` with `roles`, and a 30 s deadline.
void Authorize(grpc::ClientContext* ctx, const std::string& subject,
               const std::vector<std::string>& roles);

// Auth's CreateUser for `name` (name@example.com), as alice (auth.admin).
absl::StatusOr<std::string> CreateUser(Mesh& mesh, const std::string& name);
// App's CreateProblem "problem-<n>", as alice (app.editor).
absl::StatusOr<std::string> CreateProblem(Mesh& mesh, int n);

}  // namespace ulticode::testing
