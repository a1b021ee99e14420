// A name for this process among its replicas: "<hostname>-<pid>". Claim and
// lease owners, consumer-group consumer names and logs use it, so an operator
// can tell which pod holds what.
#pragma once

#include <string>

namespace ulticode::worker {

std::string DefaultInstanceId();

}  // namespace ulticode::worker
