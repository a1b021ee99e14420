#include "tools/verify/export.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/tlog/tiles.h"

namespace ulticode::verify {
namespace {

namespace v1 = admin::v1;
namespace fs = std::filesystem;

constexpr int kPage = 1000;

absl::Status FromGrpc(const grpc::Status& s, absl::string_view call) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(call, ": ", s.error_message()));
}

class Exporter {
 public:
  Exporter(v1::AuditLogService::StubInterface& log, const ExportOptions& options)
      : log_(log), options_(options) {}

  absl::StatusOr<ExportSummary> Run() {
    RETURN_IF_ERROR(Prepare());
    ASSIGN_OR_RETURN(const v1::SignedCheckpoint latest, Checkpoint(options_.size));
    summary_.size = latest.tree_size();
    if (options_.start % tlog::kTileWidth != 0 || options_.start > summary_.size) {
      return absl::InvalidArgumentError(absl::StrCat("start: ", options_.start,
                                                     " is not a multiple of 256 within the tree"
                                                     " of size ",
                                                     summary_.size));
    }
    if (options_.start > 0) RETURN_IF_ERROR(Write("start", absl::StrCat(options_.start, "\n")));
    RETURN_IF_ERROR(Checkpoints());
    RETURN_IF_ERROR(Tiles());
    RETURN_IF_ERROR(Entries());
    RETURN_IF_ERROR(Write("checkpoint", Note(latest)));
    return summary_;
  }

 private:
  absl::Status Prepare() {
    std::error_code ec;
    fs::create_directories(options_.dir, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat(options_.dir, ": ", ec.message()));
    if (!fs::is_empty(options_.dir, ec) || ec) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.dir, " is not an empty directory: an export needs one"));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + options_.token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return ctx;
  }

  // The note as the log signed it with every cosignature line after it.
  static std::string Note(const v1::SignedCheckpoint& c) {
    std::string note = c.checkpoint();
    for (const std::string& line : c.cosignatures()) absl::StrAppend(&note, line, "\n");
    return note;
  }

  absl::Status Write(const std::string& relative, absl::string_view bytes) {
    const fs::path path = fs::path(options_.dir) / relative;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (ec || !out) return absl::DataLossError(absl::StrCat("cannot write ", path.string()));
    return absl::OkStatus();
  }

  // The checkpoint of `size` leaves; 0: the latest.
  absl::StatusOr<v1::SignedCheckpoint> Checkpoint(uint64_t size) {
    v1::GetCheckpointRequest req;
    if (size != 0) req.set_tree_size(size);
    v1::SignedCheckpoint resp;
    RETURN_IF_ERROR(FromGrpc(log_.GetCheckpoint(Context().get(), req, &resp), "GetCheckpoint"));
    return resp;
  }

  absl::Status Checkpoints() {
    v1::ListCheckpointsRequest req;
    req.set_page_size(kPage);
    while (true) {
      v1::ListCheckpointsResponse resp;
      RETURN_IF_ERROR(
          FromGrpc(log_.ListCheckpoints(Context().get(), req, &resp), "ListCheckpoints"));
      for (const v1::SignedCheckpoint& c : resp.checkpoints()) {
        if (c.tree_size() > summary_.size) return absl::OkStatus();
        RETURN_IF_ERROR(Write(absl::StrCat("checkpoints/", c.tree_size()), Note(c)));
        ++summary_.checkpoints;
      }
      if (resp.next_page_token().empty()) return absl::OkStatus();
      req.set_page_token(resp.next_page_token());
    }
  }

  absl::Status Tiles() {
    for (const tlog::TileRef& t : tlog::TilesOf(summary_.size)) {
      v1::GetTileRequest req;
      req.set_level(t.level);
      req.set_index(t.index);
      req.set_width(static_cast<uint32_t>(t.width));
      v1::Tile resp;
      RETURN_IF_ERROR(FromGrpc(log_.GetTile(Context().get(), req, &resp), "GetTile"));
      RETURN_IF_ERROR(Write(tlog::TilePath(t.level, t.index, t.width), resp.hashes()));
    }
    return absl::OkStatus();
  }

  // Leaves in index order, a bundle at a time; an index Admin does not
  // return is written as an empty leaf (the check calls it deleted).
  absl::Status Entries() {
    std::vector<std::string> bundle;
    uint64_t next = options_.start;
    auto add = [&](std::string leaf) -> absl::Status {
      bundle.push_back(std::move(leaf));
      ++next;
      if (bundle.size() == tlog::kTileWidth || next == summary_.size) {
        RETURN_IF_ERROR(Write(tlog::EntryBundlePath((next - 1) / tlog::kTileWidth, bundle.size()),
                              tlog::EncodeEntryBundle(bundle)));
        bundle.clear();
      }
      return absl::OkStatus();
    };
    while (next < summary_.size) {
      v1::ListLogEntriesRequest req;
      // A first page from `next` each time: an index absent from it is a
      // leaf Admin does not return.
      req.set_start_index(next);
      req.set_page_size(static_cast<int>(std::min<uint64_t>(kPage, summary_.size - next)));
      v1::ListLogEntriesResponse resp;
      RETURN_IF_ERROR(FromGrpc(log_.ListLogEntries(Context().get(), req, &resp), "ListLogEntries"));
      const uint64_t end = resp.log_entries().empty()
                               ? next + req.page_size()
                               : resp.log_entries().rbegin()->leaf_index() + 1;
      for (const v1::LogEntry& e : resp.log_entries()) {
        for (; next < e.leaf_index(); ++summary_.missing) RETURN_IF_ERROR(add(""));
        RETURN_IF_ERROR(add(e.leaf()));
      }
      for (; next < end; ++summary_.missing) RETURN_IF_ERROR(add(""));
    }
    return absl::OkStatus();
  }

  v1::AuditLogService::StubInterface& log_;
  const ExportOptions& options_;
  ExportSummary summary_;
};

}  // namespace

absl::StatusOr<ExportSummary> Export(admin::v1::AuditLogService::StubInterface& log,
                                     const ExportOptions& options) {
  return Exporter(log, options).Run();
}

}  // namespace ulticode::verify
