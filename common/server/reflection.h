// gRPC server reflection (grpc.reflection.v1 and v1alpha, what grpcurl and
// `buf curl` ask) on the callback API: an open reflection stream holds no
// server thread, only its memory, so idle streams cannot starve the threads
// that serve authorised calls. Reflection needs no token (it describes the
// public schema), so its streams are bounded instead: at most
// `max_streams` open at once (more are refused with RESOURCE_EXHAUSTED) and
// each is ended after `idle_timeout` without a request.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace ulticode::server {

struct ReflectionLimits {
  int max_streams = 512;
  absl::Duration idle_timeout = absl::Seconds(30);
};

class ReflectionService {
 public:
  // `services`: the fully-qualified names list_services answers.
  ReflectionService(std::vector<std::string> services, ReflectionLimits limits);
  ~ReflectionService();  // after the server that served it has shut down

  // The v1 and v1alpha services, to register with a ServerBuilder.
  std::vector<grpc::Service*> services();

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha_;
};

}  // namespace ulticode::server
