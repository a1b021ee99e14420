#include "tools/export/export_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/export/row_text.h"

namespace ulticode::exports {
namespace {

namespace fs = std::filesystem;

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status WriteAll(std::FILE* f, absl::string_view bytes, const std::string& name) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    return Errno(absl::StrCat("write ", name));
  }
  return absl::OkStatus();
}

// Flushes, fsyncs and closes `f`.
absl::Status Close(std::FILE*& f, const std::string& name) {
  if (f == nullptr) return absl::OkStatus();
  const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const bool closed = std::fclose(f) == 0;
  f = nullptr;
  if (!ok || !closed) return Errno(absl::StrCat("write ", name));
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("open ", dir));
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : Errno(absl::StrCat("fsync ", dir));
}

absl::StatusOr<std::FILE*> Create(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wx");
  if (f == nullptr) return Errno(absl::StrCat("create ", path));
  return f;
}

}  // namespace

ExportFiles::ExportFiles(std::string out, bool with_proofs)
    : out_(std::move(out)), with_proofs_(with_proofs) {}

absl::StatusOr<std::unique_ptr<ExportFiles>> ExportFiles::Open(const std::string& out,
                                                               bool with_proofs) {
  if (out.empty()) return absl::InvalidArgumentError("--out: must not be empty");
  if (out == "-" && with_proofs) {
    return absl::InvalidArgumentError(
        "--out: an export with proofs is a directory; name one (not \"-\")");
  }
  std::unique_ptr<ExportFiles> files(new ExportFiles(out, with_proofs));
  if (out == "-") {
    files->rows_ = stdout;
    return files;
  }
  std::error_code ec;
  if (fs::exists(out, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out: ", out, " exists; an export never overwrites"));
  }
  const std::string partial = absl::StrCat(out, ".partial");
  fs::remove_all(partial, ec);  // an earlier export that did not finish
  files->partial_ = partial;
  if (!with_proofs) {
    ASSIGN_OR_RETURN(files->rows_, Create(partial));
    return files;
  }
  if (!fs::create_directory(partial, ec)) {
    return absl::InternalError(absl::StrCat("create ", partial, ": ", ec.message()));
  }
  return files;
}

ExportFiles::~ExportFiles() {
  if (rows_ != nullptr && rows_ != stdout) std::fclose(rows_);
  if (proofs_ != nullptr) std::fclose(proofs_);
  if (!finished_ && !partial_.empty()) {
    std::error_code ec;
    fs::remove_all(partial_, ec);
  }
}

absl::Status ExportFiles::Begin(const admin::v1::ExportHeader& header) {
  header_ = header;
  if (with_proofs_) {
    ASSIGN_OR_RETURN(const Format format, FromProto(header.format()));
    ASSIGN_OR_RETURN(rows_, Create(absl::StrCat(partial_, "/", RowsFileName(format))));
    ASSIGN_OR_RETURN(proofs_, Create(absl::StrCat(partial_, "/", kProofsFile)));
  }
  return WriteAll(rows_, header.preamble(), "the rows");
}

absl::Status ExportFiles::Add(const admin::v1::ExportedRow& row) {
  RETURN_IF_ERROR(WriteAll(rows_, row.text(), "the rows"));
  if (!with_proofs_) return absl::OkStatus();
  admin::v1::ExportedRow proof = row;
  proof.clear_text();
  ASSIGN_OR_RETURN(const std::string line, ProtoJson(proof));
  return WriteAll(proofs_, absl::StrCat(line, "\n"), kProofsFile);
}

absl::Status ExportFiles::Finish() {
  if (partial_.empty()) {
    if (std::fflush(rows_) != 0) return Errno("write standard output");
    finished_ = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Close(rows_, "the rows"));
  if (with_proofs_) {
    RETURN_IF_ERROR(Close(proofs_, kProofsFile));
    admin::v1::ExportHeader manifest = header_;
    manifest.clear_checkpoint();
    manifest.clear_preamble();
    ASSIGN_OR_RETURN(const std::string json, ProtoJson(manifest));
    std::string checkpoint = header_.checkpoint().checkpoint();
    for (const std::string& line : header_.checkpoint().cosignatures()) {
      absl::StrAppend(&checkpoint, line, "\n");
    }
    for (const auto& [name, text] :
         {std::pair{kManifestFile, absl::StrCat(json, "\n")}, {kCheckpointFile, checkpoint}}) {
      const std::string path = absl::StrCat(partial_, "/", name);
      ASSIGN_OR_RETURN(std::FILE * f, Create(path));
      const absl::Status written = WriteAll(f, text, name);
      RETURN_IF_ERROR(Close(f, name));
      RETURN_IF_ERROR(written);
    }
    RETURN_IF_ERROR(SyncDirectory(partial_));
  }
  std::error_code ec;
  fs::rename(partial_, out_, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename to ", out_, ": ", ec.message()));
  finished_ = true;
  const std::string parent = fs::path(out_).parent_path().string();
  return SyncDirectory(parent.empty() ? "." : parent);
}

}  // namespace ulticode::exports
