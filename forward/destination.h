// Where ulticode-forward delivers rows (docs/forwarding.md): an HTTP
// webhook or a syslog receiver. A destination delivers a batch whole or
// says whether trying again can help.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tools/client/position_file.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::forward {

// One row on its way: the served row (its fields are its sealed envelope's,
// proved before it got here) and its JSON, rendered from its leaf in the
// sink's schema (common/export/row_text.h), without a line break.
struct Row {
  admin::v1::AuditLog log;
  std::string json;
  client::Position position;  // the follower's position right after this row
};

class Destination {
 public:
  virtual ~Destination() = default;
  // Delivers `rows`, in log order. OK once the receiver has them all.
  // INVALID_ARGUMENT when the receiver refused them and would refuse them
  // again (an HTTP 4xx): the caller sends them one by one and puts the
  // ones still refused in the sink's poison file. Anything else: try the
  // same rows again later.
  virtual absl::Status Deliver(absl::Span<const Row> rows) = 0;
};

}  // namespace ulticode::forward
