// The whole mesh as real processes for end-to-end and chaos tests: Auth, App
// and Admin binaries (any number of replicas each) against the test
// PostgreSQL (one scratch database per service) and Redis (streams named for
// this test alone, so tests never see each other's entries), deployed with
// least privilege as run-local does: per service a migration role, a runtime
// role and a Redis ACL user (tools/bootstrap), passwords and signing keys in
// 0600 files.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tests/support/keys.h"
#include "tests/support/process.h"
#include "tests/support/test_env.h"

namespace ulticode::testing {

enum class Service { kAuth, kApp, kAdmin };

struct MeshOptions {
  std::string prefix = "mesh";
  // Extra "--flag=value" arguments per service, e.g. shorter intervals.
  std::vector<std::string> auth_args, app_args, admin_args;
  // Redis to point the services at (default: the test Redis).
  std::string redis_addr;
  // Per-service database roles and Redis ACL users (the default). Off runs
  // every service as the test superusers.
  bool least_privilege = true;
  // gRPC over TLS (a private CA made for this mesh), health in plaintext on
  // its own port; Channel() then speaks TLS.
  bool tls = false;
  // As deploy/k8s runs it (with least_privilege): an init step
  // `--migrate=only` as the migration role, given nothing else, then the
  // server with `--migrate=verify` and no migration credentials at all.
  bool migrate_step = false;
  // Admin's database on its own server (default: the one the owners use).
  std::optional<PgEndpoint> admin_pg;
};

class Mesh {
 public:
  Mesh(const PgEndpoint& pg, const RedisEndpoint& redis, MeshOptions options);
  ~Mesh();

  // Starts replica `replica` of `service` (ports are kept across restarts)
  // and waits until it accepts gRPC connections. False with the process
  // output in `error` if it died or did not come up.
  bool Start(Service service, int replica, std::string* error);
  // Start without the init step of MeshOptions::migrate_step.
  bool StartServer(Service service, int replica, std::string* error);
  // The init step of MeshOptions::migrate_step on its own: its exit code
  // and output.
  CommandResult MigrateOnly(Service service);
  // More "--flag=value" arguments for `service`'s next starts (e.g. another
  // replica's port, known once the mesh exists).
  void AppendArgs(Service service, const std::vector<std::string>& args);
  // SIGKILL, no goodbye.
  void Kill(Service service, int replica);
  // SIGTERM and wait; returns the exit status (0 on a clean exit).
  int Terminate(Service service, int replica);
  bool Running(Service service, int replica);
  // The replica's process id (to freeze it with SIGSTOP), -1 if not started.
  pid_t Pid(Service service, int replica);
  std::string Output(Service service, int replica);

  std::shared_ptr<grpc::Channel> Channel(Service service, int replica);
  int grpc_port(Service service, int replica);
  int metrics_port(Service service, int replica);

  // libpq conninfo of each service's database, as the test's superuser.
  std::string Dsn(Service service) const;
  // The service's runtime role and its password (what the service runs as).
  std::string RuntimeRole(Service service) const;
  std::string RuntimePassword(Service service) const;
  // The service's Redis ACL user and its password.
  std::string RedisUser(Service service) const;
  std::string RedisPassword(Service service) const;
  // Every password and private key the mesh was given (for leak checks).
  std::vector<std::string> Secrets() const;
  const std::string& auth_stream() const { return auth_stream_; }
  const std::string& app_stream() const { return app_stream_; }
  // The signing keys every replica runs with, and their directory.
  const TestKeys& keys() const { return keys_; }

 private:
  struct Replica {
    int grpc_port = 0;
    int metrics_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  Replica& Get(Service service, int replica);
  const PgEndpoint& PgOf(Service service) const;

  PgEndpoint pg_;
  RedisEndpoint redis_;
  MeshOptions options_;
  std::string auth_db_, app_db_, admin_db_;
  // Per service: migrator and runtime passwords, Redis user name and password.
  struct Credentials {
    std::string migrator_password, runtime_password, redis_user, redis_password;
  };
  Credentials creds_[3];
  std::string Secret(const std::string& name, const std::string& value) const;
  const std::string& DbName(Service service) const;
  std::string auth_stream_, app_stream_;
  TestKeys keys_;
  std::vector<Replica> replicas_[3];
};

}  // namespace ulticode::testing
