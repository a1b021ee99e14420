// Who is calling, and from where.
//
// Handlers never read identity from request fields: they ask the process's
// PrincipalResolver. Today the resolver trusts a request header
// (x-ulticode-principal); the security work replaces it with a verifier of
// signed tokens behind this same interface, without touching handlers.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace ulticode::server {

struct Principal {
  std::string id;  // stable principal id; the audit actor
};

class PrincipalResolver {
 public:
  virtual ~PrincipalResolver() = default;
  // UNAUTHENTICATED when the caller cannot be identified. Thread-safe.
  virtual absl::StatusOr<Principal> Resolve(const grpc::ServerContextBase& context) const = 0;
};

// Reads the principal id from the `x-ulticode-principal` metadata entry:
// 1..128 chars of [A-Za-z0-9_.:@-].
class HeaderPrincipalResolver final : public PrincipalResolver {
 public:
  static constexpr char kHeader[] = "x-ulticode-principal";
  absl::StatusOr<Principal> Resolve(const grpc::ServerContextBase& context) const override;
};

// Facts about the call that go into audit records.
struct CallInfo {
  std::string client_ip;   // from the peer address, without port
  std::string user_agent;  // the user-agent metadata
  std::string trace_id;    // from a W3C traceparent header, if any
};
// User agents longer than this are cut (at a character boundary).
inline constexpr size_t kMaxUserAgentBytes = 512;
// INVALID_ARGUMENT when user-agent or traceparent was sent more than once or
// the user agent holds a control character or invalid UTF-8.
absl::StatusOr<CallInfo> GetCallInfo(const grpc::ServerContextBase& context);

// "ipv4:10.0.0.1:5000" -> "10.0.0.1"; "ipv6:[::1]:5000" -> "::1".
std::string PeerToIp(const std::string& peer);

// The value of metadata `key`, "" when absent; INVALID_ARGUMENT naming the
// key when it was sent more than once (a repeated header is ambiguous: two
// readers could each believe a different one).
absl::StatusOr<std::string> Metadata(const grpc::ServerContextBase& context,
                                     const std::string& key);

}  // namespace ulticode::server
