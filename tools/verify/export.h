// Writes an export of Admin's transparency log (docs/transparency-log.md,
// "Export") through AuditLogService: the checkpoints, the stored hash tiles
// and the leaves of the tree of one signed size, from leaf 0 or from a
// multiple of 256 (the stored hashes stand for the leaves before). The export
// copies what Admin serves and judges nothing: `ulticode-verify check`
// does, with public keys only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ulticode/admin/v1/audit_log.grpc.pb.h"

namespace ulticode::verify {

struct ExportOptions {
  std::string dir;     // created if absent; must be empty
  uint64_t size = 0;   // 0: the latest checkpoint's size
  uint64_t start = 0;  // the first leaf exported: a multiple of 256
  std::string token;   // bearer token of an audit.reader
};

struct ExportSummary {
  uint64_t size = 0;
  uint64_t checkpoints = 0;
  uint64_t missing = 0;  // leaves Admin did not return (written empty)
};

absl::StatusOr<ExportSummary> Export(admin::v1::AuditLogService::StubInterface& log,
                                     const ExportOptions& options);

}  // namespace ulticode::verify
