// What every command-line client of Admin shares: the channel to Admin
// (TLS when given a CA certificate) and the flags that say where Admin is
// and who calls.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/flags.h"
#include "grpcpp/grpcpp.h"

namespace ulticode::client {

struct AdminFlags {
  std::string admin = "127.0.0.1:50053";
  std::string token_file;
  std::string cacert;
  // --admin, --token-file (required) and --cacert.
  void Register(config::Flags& flags);
};

// A channel to `address`: plaintext without `cacert`, else TLS trusting
// the PEM certificate(s) in that file (NOT_FOUND naming it when unreadable).
absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const std::string& address,
                                                       const std::string& cacert);

// The contents of `path`; NOT_FOUND naming it when unreadable.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace ulticode::client
