// --sinks-file of ulticode-forward (ulticode.forward.v1.ForwarderConfig as
// protobuf JSON), validated in full: INVALID_ARGUMENT naming the sink and
// the field, before anything starts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/export/row_text.h"
#include "forward/destination.h"
#include "ulticode/forward/v1/config.pb.h"

namespace ulticode::forward {

struct SinkPlan {
  std::string name;
  admin::v1::AuditLogFilter filter;
  exports::Format schema = exports::Format::kJsonl;
  size_t max_batch_rows = 100;
  size_t max_batch_bytes = 1 << 20;
  std::unique_ptr<Destination> destination;
};

absl::StatusOr<std::vector<SinkPlan>> LoadSinks(const std::string& path);
// The same from the file's text (tests).
absl::StatusOr<std::vector<SinkPlan>> SinksOf(const std::string& json);

}  // namespace ulticode::forward
