// main() of a data owner (Auth, App): config -> secrets and keys -> metrics
// -> database (service + outbox migrations as the migration role, then grants
// to the runtime role) -> dispatcher + receipt reader -> gRPC ->
// SERVING; on SIGTERM: NOT_SERVING, drain gRPC, stop the workers, close the pool.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/migrations/migrations.h"
#include "common/pg/pool.h"
#include "common/server/principal.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace ulticode::runtime {

struct OwnerServiceSpec {
  std::string program;      // "ulticode-auth"
  std::string description;  // --help text
  audit::Owner owner;
  std::string grpc_listen;  // default
  std::string metrics_listen;
  std::string database;
  std::string service_name;  // "ulticode.auth.v1.AuthService"
  const std::vector<migrations::Migration>* migrations;
  // The DML the runtime role needs on the service's own tables.
  const std::vector<std::string>* runtime_grants;
  // Who may call which method.
  const server::AccessTable* access_rules;
  std::function<std::unique_ptr<grpc::Service>(pg::Pool&, const server::Authorizer&,
                                               const crypto::SigningKey&)>
      make_service;
};

int RunOwnerService(const OwnerServiceSpec& spec, int argc, char** argv);

}  // namespace ulticode::runtime
