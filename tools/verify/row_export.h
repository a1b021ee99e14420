// The offline check of an export of rows with proofs (`ulticode-export
// --with-proofs`, docs/exporting.md): with public keys only, that every row
// is the rendering of a leaf its owner sealed, that every leaf is in the
// export's checkpoint, that the log signed the checkpoint and a quorum of
// the witnesses cosigned it. An export with a filter proves the rows it
// holds, not that it holds every row that matches: the log export
// (check.h) proves the whole log. An export without a filter must hold
// every leaf of its index range, so a row missing from it is a break.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/export/row_text.h"
#include "tools/verify/check.h"

namespace ulticode::verify {

// Whether `dir` holds an export of rows (its manifest) rather than of the log.
bool IsRowExport(const std::string& dir);

struct RowExportReport {
  std::string format;        // "jsonl", "csv", "ocsf"
  std::string rows_file;     // e.g. "rows.csv"
  uint64_t rows = 0;         // rows checked
  uint64_t size = 0;         // the checkpoint's tree size
  uint64_t start_index = 0;  // the manifest's range
  uint64_t end_index = 0;
  bool filtered = false;    // the manifest's filter selects (else: every leaf of the range)
  size_t witness_keys = 0;  // the policy: keys.witnesses' size and the quorum applied
  size_t witness_quorum = 0;
  size_t cosigned = 0;  // distinct witness keys that cosigned the checkpoint
  // The rows' personal values (docs/personal-data.md): each present one
  // opened its commitment; erased and not-held ones left the commitment.
  exports::PersonalCounts personal;
  // The first thing wrong, naming the file, the row and its log index; the
  // break's index is the row's log index (the checkpoint's size for the
  // checkpoint, 0 for the manifest).
  std::optional<Break> first_break;
};

// An error status means only that `dir` cannot be read; everything wrong
// with its contents is the report's first_break.
absl::StatusOr<RowExportReport> CheckRowExport(const std::string& dir, const Keys& keys);

}  // namespace ulticode::verify
