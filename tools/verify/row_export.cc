#include "tools/verify/row_export.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/export/row_text.h"
#include "common/seal/seal.h"
#include "common/tlog/leaf.h"
#include "common/tlog/merkle.h"
#include "common/tlog/note.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "ulticode/admin/v1/admin.pb.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::verify {
namespace {

namespace v1 = admin::v1;

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Break Malformed(uint64_t index, std::string detail) {
  return Break{BreakKind::kMalformed, index, std::move(detail)};
}

// `json` parsed into `m`, and in its one form (exports::ProtoJson): an
// export holds no bytes that a check would not see change.
absl::Status FromJson(absl::string_view json, google::protobuf::Message* m) {
  const auto s = google::protobuf::util::JsonStringToMessage(std::string(json), m);
  if (!s.ok()) return absl::InvalidArgumentError(std::string(s.message()));
  ASSIGN_OR_RETURN(const std::string canonical, exports::ProtoJson(*m));
  if (canonical != json) {
    return absl::InvalidArgumentError("not in its canonical form (exports::ProtoJson)");
  }
  return absl::OkStatus();
}

// Whether `event` passes `filter` (AuditLogFilter's rules: every field given
// must match; occurred_at in [start_time, end_time)).
bool Matches(const v1::AuditLogFilter& filter, const audit::v1::AuditEvent& event) {
  const audit::v1::AuditRecord& r = event.record();
  using google::protobuf::util::TimeUtil;
  auto same = [](const std::string& want, const std::string& have) {
    return want.empty() || want == have;
  };
  return (filter.owner() == audit::v1::OWNER_UNSPECIFIED || filter.owner() == event.owner()) &&
         same(filter.actor(), r.actor()) && same(filter.action(), r.action()) &&
         same(filter.entity_type(), r.entity_type()) && same(filter.entity_id(), r.entity_id()) &&
         (!filter.has_start_time() || TimeUtil::TimestampToMicroseconds(event.occurred_at()) >=
                                          TimeUtil::TimestampToMicroseconds(filter.start_time())) &&
         (!filter.has_end_time() || TimeUtil::TimestampToMicroseconds(event.occurred_at()) <
                                        TimeUtil::TimestampToMicroseconds(filter.end_time()));
}

class RowExportCheck {
 public:
  RowExportCheck(const std::string& dir, const Keys& keys) : dir_(dir), keys_(keys) {}

  absl::StatusOr<RowExportReport> Run() {
    RETURN_IF_ERROR(Read());
    if (!Manifest() || !Checkpoint() || !Proofs()) return report_;
    Rows();
    return report_;
  }

 private:
  // The files, read whole: an error only for a file that cannot be read.
  absl::Status Read() {
    for (const auto& [name, out] : {std::pair{exports::kManifestFile, &manifest_text_},
                                    {exports::kCheckpointFile, &checkpoint_text_},
                                    {exports::kProofsFile, &proofs_text_}}) {
      ASSIGN_OR_RETURN(*out, Slurp(absl::StrCat(dir_, "/", name)));
    }
    return absl::OkStatus();
  }

  bool Fail(Break b) {
    report_.first_break = std::move(b);
    return false;
  }

  bool Manifest() {
    if (!absl::EndsWith(manifest_text_, "\n")) {
      return Fail(Malformed(0, absl::StrCat(exports::kManifestFile, ": no final line break")));
    }
    if (absl::Status s = FromJson(
            absl::string_view(manifest_text_).substr(0, manifest_text_.size() - 1), &header_);
        !s.ok()) {
      return Fail(Malformed(0, absl::StrCat(exports::kManifestFile, ": ", s.message())));
    }
    auto format = exports::FromProto(header_.format());
    if (!format.ok()) {
      return Fail(
          Malformed(0, absl::StrCat(exports::kManifestFile, ": ", format.status().message())));
    }
    format_ = *format;
    report_.format = std::string(exports::FormatName(format_));
    report_.rows_file = std::string(exports::RowsFileName(format_));
    report_.start_index = header_.start_index();
    report_.end_index = header_.end_index();
    if (header_.end_index() < header_.start_index()) {
      return Fail(
          Malformed(0, absl::StrCat(exports::kManifestFile, ": end_index ", header_.end_index(),
                                    " is below start_index ", header_.start_index())));
    }
    return true;
  }

  // The log's signature, and the witnesses' cosignatures by the policy.
  bool Checkpoint() {
    auto text = tlog::OpenNote(checkpoint_text_, keys_.log);
    if (!text.ok()) {
      return Fail(Break{BreakKind::kBadSignature, 0,
                        absl::StrCat(exports::kCheckpointFile, ": ", text.status().message())});
    }
    auto checkpoint = tlog::ParseCheckpoint(*text);
    if (!checkpoint.ok()) {
      return Fail(Malformed(
          0, absl::StrCat(exports::kCheckpointFile, ": ", checkpoint.status().message())));
    }
    checkpoint_ = *std::move(checkpoint);
    report_.size = checkpoint_.size;
    if (header_.end_index() > checkpoint_.size) {
      return Fail(
          Malformed(checkpoint_.size,
                    absl::StrCat(exports::kManifestFile, ": end_index ", header_.end_index(),
                                 " is beyond the checkpoint's size ", checkpoint_.size)));
    }
    auto split = tlog::SplitNoteSignatures(checkpoint_text_);
    std::set<size_t> cosigned;
    if (split.ok()) {
      for (const std::string& line : split->signatures) {
        for (size_t w = 0; w < keys_.witnesses.size(); ++w) {
          if (keys_.witnesses[w].Verify(split->text, line).ok()) cosigned.insert(w);
        }
      }
    }
    report_.witness_keys = keys_.witnesses.size();
    report_.witness_quorum =
        keys_.witness_quorum == 0 ? keys_.witnesses.size() : keys_.witness_quorum;
    report_.cosigned = cosigned.size();
    return true;
  }

  // Every proof line: in range and ascending, a sealed leaf, included in
  // the checkpoint.
  bool Proofs() {
    if (!proofs_text_.empty() && !absl::EndsWith(proofs_text_, "\n")) {
      return Fail(Malformed(header_.start_index(),
                            absl::StrCat(exports::kProofsFile, ": no final line break")));
    }
    std::vector<absl::string_view> lines = absl::StrSplit(proofs_text_, '\n');
    lines.pop_back();  // after the final line break
    // Without a filter, the export holds every leaf of its range: a gap is
    // a deleted row.
    const bool unfiltered = header_.filter().ByteSizeLong() == 0;
    report_.filtered = !unfiltered;
    std::optional<uint64_t> previous;
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::string where = absl::StrCat(exports::kProofsFile, " line ", k + 1);
      v1::ExportedRow row;
      if (absl::Status s = FromJson(lines[k], &row); !s.ok()) {
        return Fail(Malformed(previous ? *previous + 1 : header_.start_index(),
                              absl::StrCat(where, ": ", s.message())));
      }
      const uint64_t index = row.log_index();
      const std::string at = absl::StrCat(where, " (log index ", index, ")");
      if (index < header_.start_index() || index >= header_.end_index()) {
        return Fail(Break{BreakKind::kInserted, index,
                          absl::StrCat(at, ": outside the export's range [", header_.start_index(),
                                       ", ", header_.end_index(), ")")});
      }
      if (previous && index <= *previous) {
        return Fail(Break{BreakKind::kReordered, index,
                          absl::StrCat(at, ": not after log index ", *previous)});
      }
      const uint64_t next = previous ? *previous + 1 : header_.start_index();
      if (unfiltered && index != next) {
        return Fail(Break{BreakKind::kDeleted, next,
                          absl::StrCat(at, ": the export has no filter, so log indexes ", next,
                                       " to ", index - 1, " must come before it")});
      }
      previous = index;
      auto leaf = tlog::DecodeLeaf(row.leaf());
      if (!leaf.ok()) {
        return Fail(
            Break{BreakKind::kModified, index, absl::StrCat(at, ": ", leaf.status().message())});
      }
      if (std::optional<Break> b = LeafBreak(*leaf, index, keys_.owners, seals_)) {
        b->detail = absl::StrCat(at, ": ", b->detail);
        return Fail(*std::move(b));
      }
      audit::v1::AuditEvent event;
      (void)event.ParseFromString(leaf->envelope);  // LeafBreak: it parses
      if (!Matches(header_.filter(), event)) {
        return Fail(Break{
            BreakKind::kInserted, index,
            absl::StrCat(at, ": event ", leaf->event_id, " does not match the manifest's filter")});
      }
      if (absl::Status s = Included(row); !s.ok()) {
        return Fail(Break{BreakKind::kModified, index,
                          absl::StrCat(at, ": not in the checkpoint of size ", checkpoint_.size,
                                       ": ", s.message())});
      }
      proved_.push_back(std::move(row));
    }
    const uint64_t end = previous ? *previous + 1 : header_.start_index();
    if (unfiltered && end != header_.end_index()) {
      return Fail(Break{BreakKind::kDeleted, end,
                        absl::StrCat(exports::kProofsFile,
                                     ": the export has no filter, but ends "
                                     "at log index ",
                                     end, ", before its range's end ", header_.end_index())});
    }
    return true;
  }

  absl::Status Included(const v1::ExportedRow& row) const {
    std::vector<tlog::Hash> proof;
    for (const std::string& h : row.hashes()) {
      ASSIGN_OR_RETURN(tlog::Hash hash, tlog::FromBytes(h));
      proof.push_back(hash);
    }
    return tlog::VerifyInclusion(row.log_index(), checkpoint_.size, tlog::LeafHash(row.leaf()),
                                 proof, checkpoint_.root);
  }

  // The report's count of each state of the rows' personal values.
  void CountPersonal(const exports::PersonalValues& personal) {
    for (const auto& v : personal) {
      (v.state() == admin::v1::AuditLog::PersonalValue::STATE_PRESENT ? report_.personal.present
       : v.state() == admin::v1::AuditLog::PersonalValue::STATE_ERASED
           ? report_.personal.erased
           : report_.personal.not_held)++;
    }
  }

  // The rows' file is the preamble, then each proved leaf rendered, and
  // nothing else.
  void Rows() {
    auto text = Slurp(absl::StrCat(dir_, "/", report_.rows_file));
    if (!text.ok()) {
      (void)Fail(Malformed(header_.start_index(), std::string(text.status().message())));
      return;
    }
    const std::string preamble = exports::Preamble(format_);
    if (absl::string_view(*text).substr(0, preamble.size()) != preamble) {
      (void)Fail(Malformed(
          header_.start_index(),
          absl::StrCat(report_.rows_file, ": the header differs from ", report_.format, "'s")));
      return;
    }
    size_t at = preamble.size();
    for (size_t k = 0; k < proved_.size(); ++k) {
      const v1::ExportedRow& row = proved_[k];
      absl::StatusOr<std::string> rendered =
          exports::RenderRow(format_, row.log_index(), row.leaf(), row.personal_values());
      if (rendered.ok()) CountPersonal(row.personal_values());
      if (absl::IsDataLoss(rendered.status())) {
        // A personal value changed instead of erased: tampering, named.
        (void)Fail(Break{BreakKind::kModified, row.log_index(),
                         absl::StrCat(report_.rows_file, " row ", k + 1, " (log index ",
                                      row.log_index(), "): ", rendered.status().message())});
        return;
      }
      const std::string expected = rendered.value_or("");
      const std::string where =
          absl::StrCat(report_.rows_file, " row ", k + 1, " (log index ", row.log_index(), ")");
      if (absl::string_view(*text).substr(at, expected.size()) != expected) {
        (void)Fail(
            Break{BreakKind::kModified, row.log_index(),
                  absl::StrCat(where,
                               ": is not what its leaf holds (first difference at "
                               "byte ",
                               FirstDifference(absl::string_view(*text).substr(at), expected),
                               " of the row)")});
        return;
      }
      at += expected.size();
      ++report_.rows;
    }
    if (at != text->size()) {
      (void)Fail(Break{BreakKind::kInserted, header_.end_index(),
                       absl::StrCat(report_.rows_file, ": ", text->size() - at, " bytes after row ",
                                    proved_.size(), ", the last one proofs.jsonl proves")});
    }
  }

  static size_t FirstDifference(absl::string_view a, absl::string_view b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
  }

  const std::string dir_;
  const Keys& keys_;
  std::string manifest_text_, checkpoint_text_, proofs_text_;
  v1::ExportHeader header_;
  exports::Format format_ = exports::Format::kJsonl;
  tlog::Checkpoint checkpoint_;
  std::vector<v1::ExportedRow> proved_;
  seal::Verifier seals_;
  RowExportReport report_;
};

}  // namespace

bool IsRowExport(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(absl::StrCat(dir, "/", exports::kManifestFile), ec);
}

absl::StatusOr<RowExportReport> CheckRowExport(const std::string& dir, const Keys& keys) {
  return RowExportCheck(dir, keys).Run();
}

}  // namespace ulticode::verify
