// ulticode-export: the rows of Admin's audit log that match a filter, over a
// time or log index range, in log order, as JSON Lines, CSV or OCSF
// (docs/exporting.md), through AdminService/ExportAuditLogs. With
// --with-proofs the export is a directory that also holds the checkpoint it
// is of and each row's inclusion proof: `ulticode-verify check --dir=DIR`
// checks it offline with public keys only.
//
//   ulticode-export --admin=HOST:PORT --token-file=F [--cacert=F]
//                   [--format=jsonl|csv|ocsf] [--out=FILE|DIR|-] [--with-proofs]
//                   [--owner=auth|app|admin] [--actor=A] [--action=A]
//                   [--entity-type=T [--entity-id=I]]
//                   [--start-time=RFC3339] [--end-time=RFC3339]
//                   [--start-index=N] [--end-index=N] [--quiet]
//
// Progress goes to stderr about once a second (not with --quiet). Exit
// status: 0 once the whole export is written, 2 for anything else (a bad
// flag, Admin's refusal, an I/O error), with nothing left under --out.
#include <csignal>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/export/row_text.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/grpcpp.h"
#include "tools/client/admin_channel.h"
#include "tools/export/export_files.h"
#include "ulticode/admin/v1/admin.grpc.pb.h"

namespace ulticode::exports {
namespace {

namespace v1 = admin::v1;

constexpr int kOk = 0, kError = 2;

struct Options {
  client::AdminFlags client;
  std::string format = "jsonl";
  std::string out = "-";
  bool with_proofs = false;
  std::string owner, actor, action, entity_type, entity_id, start_time, end_time;
  int64_t start_index = 0;
  int64_t end_index = -1;
  bool quiet = false;
};

absl::Status ValidateTime(const std::string& v) {
  absl::Time t;
  std::string error;
  if (v.empty() || absl::ParseTime(absl::RFC3339_full, v, &t, &error)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("not an RFC 3339 time: ", error));
}

google::protobuf::Timestamp TimestampOf(const std::string& rfc3339) {
  absl::Time t;
  std::string error;
  (void)absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error);  // validated by the flag
  return google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

Options ParseFlags(int argc, char** argv) {
  Options o;
  config::Flags flags("ulticode-export",
                      "Exports the audit log's rows that match a filter, in log order.");
  o.client.Register(flags);
  flags.String("format", &o.format, "jsonl, csv or ocsf",
               [](const std::string& v) { return ParseFormat(v).status(); });
  flags.String("out", &o.out,
               "file to write (- : standard output); with --with-proofs a directory. Must not "
               "exist: it appears once the export is complete");
  flags.Bool("with-proofs", &o.with_proofs,
             "also write the checkpoint and each row's inclusion proof (--out is a directory)");
  flags.String("owner", &o.owner, "only this owner's rows (auth, app or admin)",
               [](const std::string& v) -> absl::Status {
                 if (v.empty() || v == "auth" || v == "app" || v == "admin") {
                   return absl::OkStatus();
                 }
                 return absl::InvalidArgumentError("must be auth, app or admin");
               });
  flags.String("actor", &o.actor, "only rows of this actor");
  flags.String("action", &o.action, "only rows of this action");
  flags.String("entity-type", &o.entity_type, "only rows of this entity type");
  flags.String("entity-id", &o.entity_id, "only rows of this entity (with --entity-type)");
  flags.String("start-time", &o.start_time, "only rows that occurred at or after (RFC 3339)",
               ValidateTime);
  flags.String("end-time", &o.end_time, "only rows that occurred before (RFC 3339)", ValidateTime);
  flags.Int("start-index", &o.start_index, "the first log index considered", 0, INT64_MAX);
  flags.Int("end-index", &o.end_index,
            "the log index after the last one considered (-1: the checkpoint's size)", -1,
            INT64_MAX);
  flags.Bool("quiet", &o.quiet, "no progress on stderr");
  config::ParseOrExit(flags, argc, argv);
  return o;
}

v1::ExportAuditLogsRequest RequestOf(const Options& o) {
  v1::ExportAuditLogsRequest req;
  req.set_format(ToProto(ParseFormat(o.format).value()));
  req.set_with_proofs(o.with_proofs);
  req.set_start_index(static_cast<uint64_t>(o.start_index));
  if (o.end_index >= 0) req.set_end_index(static_cast<uint64_t>(o.end_index));
  v1::AuditLogFilter& f = *req.mutable_filter();
  if (o.owner == "auth") f.set_owner(audit::v1::OWNER_AUTH);
  if (o.owner == "app") f.set_owner(audit::v1::OWNER_APP);
  if (o.owner == "admin") f.set_owner(audit::v1::OWNER_ADMIN);
  f.set_actor(o.actor);
  f.set_action(o.action);
  f.set_entity_type(o.entity_type);
  f.set_entity_id(o.entity_id);
  if (!o.start_time.empty()) *f.mutable_start_time() = TimestampOf(o.start_time);
  if (!o.end_time.empty()) *f.mutable_end_time() = TimestampOf(o.end_time);
  return req;
}

// How far the export is, on stderr, about once a second and at the end.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet) {}
  void Begin(const v1::ExportHeader& h) {
    start_ = h.start_index();
    end_ = h.end_index();
  }
  void Update(uint64_t rows, uint64_t read_through, bool last) {
    const absl::Time now = absl::Now();
    if (quiet_ || (!last && now - shown_ < absl::Seconds(1))) return;
    shown_ = now;
    const double span = static_cast<double>(end_ - start_);
    const double done = span == 0 ? 1 : static_cast<double>(read_through - start_) / span;
    std::fprintf(
        stderr, "ulticode-export: %llu rows, log index %llu of [%llu, %llu) (%.0f %%)\n",
        static_cast<unsigned long long>(rows), static_cast<unsigned long long>(read_through),
        static_cast<unsigned long long>(start_), static_cast<unsigned long long>(end_), 100 * done);
  }

 private:
  const bool quiet_;
  uint64_t start_ = 0, end_ = 0;
  absl::Time shown_ = absl::Now();
};

absl::Status Run(const Options& o) {
  ASSIGN_OR_RETURN(std::unique_ptr<ExportFiles> files, ExportFiles::Open(o.out, o.with_proofs));
  ASSIGN_OR_RETURN(const std::string token, crypto::ReadSecretFile(o.client.token_file));
  ASSIGN_OR_RETURN(auto channel, client::Channel(o.client.admin, o.client.cacert));
  auto stub = v1::AdminService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + token);
  auto reader = stub->ExportAuditLogs(&ctx, RequestOf(o));
  Progress progress(o.quiet);
  v1::ExportAuditLogsResponse frame;
  uint64_t rows = 0, read_through = 0;
  bool begun = false;
  while (reader->Read(&frame)) {
    if (frame.has_header() != !begun) {
      ctx.TryCancel();
      return absl::InternalError("Admin sent frames out of order (the header must come first)");
    }
    if (frame.has_header()) {
      RETURN_IF_ERROR(files->Begin(frame.header()));
      progress.Begin(frame.header());
      read_through = frame.header().start_index();
      begun = true;
      continue;
    }
    for (const v1::ExportedRow& row : frame.chunk().rows()) RETURN_IF_ERROR(files->Add(row));
    rows += frame.chunk().rows_size();
    read_through = frame.chunk().read_through();
    progress.Update(rows, read_through, false);
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("Admin: ", s.error_message()));
  }
  if (!begun) return absl::InternalError("Admin ended the export without a header");
  RETURN_IF_ERROR(files->Finish());
  progress.Update(rows, read_through, true);
  return absl::OkStatus();
}

}  // namespace
}  // namespace ulticode::exports

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  const auto options = ulticode::exports::ParseFlags(argc, argv);
  const absl::Status s = ulticode::exports::Run(options);
  if (!s.ok()) {
    std::fprintf(stderr, "ulticode-export: %s\n", std::string(s.message()).c_str());
    return ulticode::exports::kError;
  }
  return ulticode::exports::kOk;
}
