#include "tools/client/admin_channel.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::client {

void AdminFlags::Register(config::Flags& flags) {
  flags.String("admin", &admin, "Admin's gRPC address", config::ValidateHostPort);
  flags.String("token-file", &token_file, "file holding an audit.reader bearer token (0600)");
  flags.Require("token-file");
  flags.String("cacert", &cacert, "CA certificate (PEM) when Admin serves TLS");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const std::string& address,
                                                       const std::string& cacert) {
  if (cacert.empty()) return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions ssl;
  ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(cacert));
  return grpc::CreateChannel(address, grpc::SslCredentials(ssl));
}

}  // namespace ulticode::client
