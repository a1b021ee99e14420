// Who is calling, what they may do, and from where.
//
// Handlers never read identity from request fields: they ask the process's
// Authorizer, which resolves the caller (server::BearerTokenResolver verifies an
// `authorization: Bearer <JWT>` header) and checks the role the method needs
// in the service's access table.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/server/call_limiter.h"
#include "grpcpp/server_context.h"

namespace ulticode::server {

struct Principal {
  std::string id;                  // stable principal id (the token's sub); the audit actor
  std::vector<std::string> roles;  // the token's roles claim
};

class PrincipalResolver {
 public:
  virtual ~PrincipalResolver() = default;
  // UNAUTHENTICATED when the caller cannot be identified. Thread-safe.
  virtual absl::StatusOr<Principal> Resolve(const grpc::ServerContextBase& context) const = 0;
};

// Method name (as in the .proto, e.g. "CreateUser") -> the role it needs.
using AccessTable = absl::flat_hash_map<std::string, std::string>;

// Resolves the caller and checks the role a method needs. A method without a
// rule is refused (deny by default). Thread-safe.
class Authorizer {
 public:
  // `limiter`: the process's per-principal read limits (null: none).
  Authorizer(const PrincipalResolver& resolver, AccessTable table, CallLimiter* limiter = nullptr)
      : resolver_(resolver), table_(std::move(table)), limiter_(limiter) {}

  // UNAUTHENTICATED when the caller cannot be identified; PERMISSION_DENIED
  // naming the role `method` needs when the caller lacks it.
  absl::StatusOr<Principal> Admit(const grpc::ServerContextBase& context,
                                  absl::string_view method) const;
  const PrincipalResolver& resolver() const { return resolver_; }
  const AccessTable& table() const { return table_; }

  // One more read for `principal`, held until the slot goes;
  // RESOURCE_EXHAUSTED when it already has its limit (call_limiter.h).
  absl::StatusOr<CallLimiter::Slot> EnterRead(const Principal& principal) const {
    if (limiter_ == nullptr) return CallLimiter::Slot();
    return limiter_->Enter(principal.id);
  }

 private:
  const PrincipalResolver& resolver_;
  const AccessTable table_;
  CallLimiter* const limiter_;
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
