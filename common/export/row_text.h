// How one log entry reads in each export format (docs/exporting.md): JSON
// Lines, CSV (RFC 4180) and OCSF 1.1.0. A row is rendered from its leaf and
// log index alone, deterministically, so Admin (ExportAuditLogs) and an
// auditor (`ulticode-verify check` of an export) render the same bytes, and
// an exported row is proved by the leaf it was rendered from.
//
// Pure functions, no I/O; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::exports {

enum class Format { kJsonl, kCsv, kOcsf };

// "jsonl", "csv", "ocsf"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<Format> ParseFormat(absl::string_view name);
absl::string_view FormatName(Format format);
// EXPORT_FORMAT_JSONL, _CSV, _OCSF; INVALID_ARGUMENT ("format: ...") otherwise.
absl::StatusOr<Format> FromProto(admin::v1::ExportFormat format);
admin::v1::ExportFormat ToProto(Format format);
// An export with proofs is a directory (docs/exporting.md, "With proofs"):
//   manifest.json   ulticode.admin.v1.ExportHeader (ProtoJson), without its
//                   checkpoint and preamble: the format, filter and range
//   checkpoint      the checkpoint note with the witnesses' cosignature lines
//   rows.<format>   the preamble, then the rows in log order
//   proofs.jsonl    per row, in the same order, ulticode.admin.v1.ExportedRow
//                   (ProtoJson) without its text: the log index, the leaf
//                   and the inclusion proof
inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kCheckpointFile[] = "checkpoint";
inline constexpr char kProofsFile[] = "proofs.jsonl";
// The rows' file: rows.jsonl, rows.csv, rows.ocsf.jsonl.
absl::string_view RowsFileName(Format format);

// The text before the first row: CSV's header record; empty otherwise.
std::string Preamble(Format format);

// A served row's personal values (AuditLog.personal_values): one per
// commitment of its envelope (docs/personal-data.md).
using PersonalValues = google::protobuf::RepeatedPtrField<admin::v1::AuditLog::PersonalValue>;

// How many of a row's personal values are present, erased, not held.
struct PersonalCounts {
  int64_t present = 0;
  int64_t erased = 0;
  int64_t not_held = 0;
};

// `event` (a leaf's envelope) with each present value of `personal` put
// back where it belongs, after checking that `personal` lists exactly the
// envelope's commitments, in order, each present value opening its own,
// erased and not-held ones carrying no value. DATA_LOSS naming the event
// and the path otherwise: "changed" for a value that does not open its
// commitment. Adds to `counts` when given.
absl::StatusOr<audit::v1::AuditEvent> RestorePersonal(audit::v1::AuditEvent event,
                                                      const PersonalValues& personal,
                                                      PersonalCounts* counts = nullptr);

// The row of leaf `leaf` at log index `index`, with its personal values
// (RestorePersonal; none for an envelope that commits to none): one line
// (CSV: one record) ending in a line break ("\n"; CSV "\r\n"). A present
// value is in its place; the `personal` column lists each commitment with
// its path, subject and state. INVALID_ARGUMENT when the leaf or its
// envelope does not decode; DATA_LOSS as RestorePersonal.
absl::StatusOr<std::string> RenderRow(Format format, uint64_t index, absl::string_view leaf,
                                      const PersonalValues& personal = {});

// JSON text of `value` with object keys sorted, no whitespace, numbers in
// their shortest round-trip form (-0 as 0; NaN and infinities as the
// strings "NaN", "Infinity", "-Infinity").
std::string JsonOf(const google::protobuf::Value& value);
std::string JsonOf(const google::protobuf::Struct& value);
// The one JSON form of `message` in an export's manifest.json and
// proofs.jsonl lines: protobuf JSON with the proto field names, no spaces.
absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& message);
// `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);
// `field` as an RFC 4180 field: quoted (quotes doubled) when it holds a
// comma, a quote, CR or LF; a field a spreadsheet would run as a formula
// (starting with =, +, -, @, TAB or CR) starts with a ' first.
std::string CsvField(absl::string_view field);

}  // namespace ulticode::exports
