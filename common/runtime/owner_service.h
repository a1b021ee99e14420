// main() of a data owner (Auth, App): config -> metrics -> database
// (service + outbox migrations) -> dispatcher + receipt reader -> gRPC ->
// SERVING; on SIGTERM: NOT_SERVING, drain gRPC, stop the workers, close the pool.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/audit/event.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/server/principal.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace ulticode::runtime {

struct OwnerServiceSpec {
  std::string program;       // "ulticode-auth"
  std::string description;   // --help text
  audit::Owner owner;
  std::string grpc_listen;   // default
  std::string metrics_listen;
  std::string database;
  std::string service_name;  // "ulticode.auth.v1.AuthService"
  const std::vector<migrations::Migration>* migrations;
  std::function<std::unique_ptr<grpc::Service>(pg::Pool&, const server::PrincipalResolver&)>
      make_service;
};

int RunOwnerService(const OwnerServiceSpec& spec, int argc, char** argv);

}  // namespace ulticode::runtime
