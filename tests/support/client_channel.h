// The channel arguments every test client uses to reach a mesh process.
#ifndef ULTICODE_TESTS_SUPPORT_CLIENT_CHANNEL_H_
#define ULTICODE_TESTS_SUPPORT_CLIENT_CHANNEL_H_

#include "grpcpp/support/channel_arguments.h"

namespace ulticode::testing {

// Replicas get killed and restarted: reconnect within a second, not after
// gRPC's default back-off of up to two minutes. GRPC_ARG_MIN_RECONNECT_
// BACKOFF_MS stays unset: gRPC also takes it as the connect timeout, and a
// TLS handshake on a loaded two-core machine can outlast a short one.
inline grpc::ChannelArguments ReconnectingChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace ulticode::testing

#endif  // ULTICODE_TESTS_SUPPORT_CLIENT_CHANNEL_H_
