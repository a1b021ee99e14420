#include "tests/support/mesh.h"

#include <signal.h>

#include "absl/strings/str_cat.h"

namespace ulticode::testing {
namespace {

const char* Binary(Service s) {
  switch (s) {
    case Service::kAuth:
      return "ulticode-auth";
    case Service::kApp:
      return "ulticode-app";
    case Service::kAdmin:
      return "ulticode-admin";
  }
  return "";
}

// Relative to the build directory.
const char* BinaryPath(Service s) {
  switch (s) {
    case Service::kAuth:
      return "auth/ulticode-auth";
    case Service::kApp:
      return "app/ulticode-app";
    case Service::kAdmin:
      return "admin/ulticode-admin";
  }
  return "";
}

}  // namespace

Mesh::Mesh(const PgEndpoint& pg, const RedisEndpoint& redis, MeshOptions options)
    : pg_(pg), redis_(redis), options_(std::move(options)) {
  auth_db_ = CreateScratchDatabase(pg_, options_.prefix + "_auth");
  app_db_ = CreateScratchDatabase(pg_, options_.prefix + "_app");
  admin_db_ = CreateScratchDatabase(pg_, options_.prefix + "_admin");
  const std::string suffix = RandomSuffix();
  auth_stream_ = absl::StrCat(options_.prefix, ":", suffix, ":audit:auth");
  app_stream_ = absl::StrCat(options_.prefix, ":", suffix, ":audit:app");
  if (options_.redis_addr.empty())
    options_.redis_addr = absl::StrCat(redis_.host, ":", redis_.port);
}

Mesh::~Mesh() {
  for (auto& list : replicas_) {
    for (auto& r : list) {
      if (r.process && r.process->Running()) r.process->Stop(SIGKILL, std::chrono::seconds(5));
    }
  }
}

Mesh::Replica& Mesh::Get(Service service, int replica) {
  auto& list = replicas_[static_cast<int>(service)];
  while (static_cast<int>(list.size()) <= replica) {
    Replica r;
    r.grpc_port = FreePort();
    r.metrics_port = FreePort();
    list.push_back(std::move(r));
  }
  return list[replica];
}

std::string Mesh::Dsn(Service service) const {
  switch (service) {
    case Service::kAuth:
      return pg_.ConnInfo(auth_db_);
    case Service::kApp:
      return pg_.ConnInfo(app_db_);
    case Service::kAdmin:
      return pg_.ConnInfo(admin_db_);
  }
  return "";
}

bool Mesh::Start(Service service, int replica, std::string* error) {
  Replica& r = Get(service, replica);
  std::vector<std::string> argv = {
      BinDir() + "/" + BinaryPath(service),
      absl::StrCat("--grpc-listen=127.0.0.1:", r.grpc_port),
      absl::StrCat("--metrics-listen=127.0.0.1:", r.metrics_port),
      "--pg-dsn=" + Dsn(service),
      "--redis-addr=" + options_.redis_addr,
      "--log-level=warn",
      "--public-keys-file=" + keys_.public_keys_file(),
  };
  const std::string name = absl::StrCat(Binary(service), "-", replica);
  const std::vector<std::string>* extra = nullptr;
  switch (service) {
    case Service::kAuth:
      argv.push_back("--dispatch-stream=" + auth_stream_);
      argv.push_back("--dispatch-instance-id=" + name);
      argv.push_back("--audit-signing-key-file=" + keys_.KeyFile("auth"));
      extra = &options_.auth_args;
      break;
    case Service::kApp:
      argv.push_back("--dispatch-stream=" + app_stream_);
      argv.push_back("--dispatch-instance-id=" + name);
      argv.push_back("--audit-signing-key-file=" + keys_.KeyFile("app"));
      extra = &options_.app_args;
      break;
    case Service::kAdmin:
      argv.push_back("--inbox-auth-stream=" + auth_stream_);
      argv.push_back("--inbox-app-stream=" + app_stream_);
      argv.push_back("--inbox-consumer-name=" + name);
      argv.push_back("--consumer-instance-id=" + name);
      argv.push_back("--receipt-signing-key-file=" + keys_.KeyFile("admin"));
      extra = &options_.admin_args;
      break;
  }
  argv.insert(argv.end(), extra->begin(), extra->end());
  r.process = std::make_unique<ChildProcess>();
  if (!r.process->Start(argv)) {
    *error = "cannot start " + name;
    return false;
  }
  const bool up = WaitFor([&] { return PortOpen(r.grpc_port) || !r.process->Running(); },
                          std::chrono::seconds(60));
  if (!up || !r.process->Running()) {
    *error = absl::StrCat(name, " did not come up:\n", r.process->Output());
    return false;
  }
  return true;
}

void Mesh::Kill(Service service, int replica) {
  Replica& r = Get(service, replica);
  if (r.process && r.process->Running()) r.process->Stop(SIGKILL, std::chrono::seconds(5));
}

int Mesh::Terminate(Service service, int replica) {
  Replica& r = Get(service, replica);
  if (!r.process || !r.process->Running()) return -1;
  return r.process->Stop(SIGTERM, std::chrono::seconds(30));
}

bool Mesh::Running(Service service, int replica) {
  Replica& r = Get(service, replica);
  return r.process && r.process->Running();
}

std::string Mesh::Output(Service service, int replica) {
  Replica& r = Get(service, replica);
  return r.process ? r.process->Output() : "";
}

std::shared_ptr<grpc::Channel> Mesh::Channel(Service service, int replica) {
  // Replicas get killed and restarted: reconnect within a second, not after
  // gRPC's default back-off of up to two minutes.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", Get(service, replica).grpc_port),
                                   grpc::InsecureChannelCredentials(), args);
}

int Mesh::grpc_port(Service service, int replica) { return Get(service, replica).grpc_port; }
int Mesh::metrics_port(Service service, int replica) { return Get(service, replica).metrics_port; }

}  // namespace ulticode::testing
