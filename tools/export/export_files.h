// Where an export goes (docs/exporting.md): standard output, a file, or,
// with proofs, a directory (common/export/row_text.h gives its layout).
// A file or directory appears under its name only once the export is
// complete: it is written beside it (NAME.partial) and renamed at the end,
// so a failed or interrupted export leaves nothing that looks finished.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::exports {

class ExportFiles {
 public:
  // `out`: "-" for standard output (not with proofs), a file name, or with
  // `with_proofs` a directory name. FAILED_PRECONDITION when `out` exists.
  static absl::StatusOr<std::unique_ptr<ExportFiles>> Open(const std::string& out,
                                                           bool with_proofs);
  ~ExportFiles();  // removes what an unfinished export wrote

  // The header frame: writes the preamble (and keeps the manifest).
  absl::Status Begin(const admin::v1::ExportHeader& header);
  absl::Status Add(const admin::v1::ExportedRow& row);
  // Flushes, syncs and renames into place.
  absl::Status Finish();

 private:
  ExportFiles(std::string out, bool with_proofs);

  const std::string out_;
  const bool with_proofs_;
  std::string partial_;  // the directory or file being written; empty for stdout
  std::FILE* rows_ = nullptr;
  std::FILE* proofs_ = nullptr;
  admin::v1::ExportHeader header_;
  bool finished_ = false;
};

}  // namespace ulticode::exports
