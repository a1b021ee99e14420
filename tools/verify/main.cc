// ulticode-verify: an auditor's tool for Admin's transparency log
// (docs/transparency-log.md). It trusts nothing Admin says that public keys
// cannot check.
//
//   ulticode-verify export --admin=HOST:PORT --token-file=F --out=DIR [--size=N]
//                   [--start=M]
//   ulticode-verify check --dir=DIR --log-keys-file=F --owner-keys-file=F
//                   [--witness-keys-file=F [--witness-quorum=N]
//                    [--witness-addresses=NAME=HOST:PORT,... --token-file=F]]
//                   [--trusted-checkpoint=F]
//     DIR is an export of the log (above) or of rows with proofs
//     (ulticode-export --with-proofs, docs/exporting.md): each row is its
//     leaf's rendering, each leaf sealed and in the export's checkpoint.
//   ulticode-verify inclusion --admin=HOST:PORT --token-file=F --log-keys-file=F
//                   --event-id=UUID [--trusted-checkpoint=F]
//   ulticode-verify vkey --name=NAME --public-key=BASE64 [--witness]
//
// Exit status: 0 when everything verifies, 1 when something does not (the
// first break is printed), 2 for a usage or I/O error, 3 when the export
// verifies but its newest leaves are not witnessed yet (check: no
// checkpoint that covers them carries a quorum of the witnesses'
// cosignatures; for rows, their checkpoint does not).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/status_macros.h"
#include "common/config/flags.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/leaf.h"
#include "common/tlog/note.h"
#include "grpcpp/grpcpp.h"
#include "tools/client/admin_channel.h"
#include "tools/verify/check.h"
#include "tools/verify/export.h"
#include "tools/verify/row_export.h"
#include "ulticode/outbox/v1/witness.grpc.pb.h"

namespace ulticode::verify {
namespace {

namespace v1 = admin::v1;

constexpr int kOk = 0, kBroken = 1, kError = 2, kUnwitnessed = 3;
constexpr auto kCallTimeout = std::chrono::seconds(60);

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "ulticode-verify: %s\n", std::string(s.message()).c_str());
  return kError;
}

using client::Channel;
using client::ReadFile;

int ExportCommand(int argc, char** argv) {
  client::AdminFlags client;
  std::string out;
  int64_t size = 0, start = 0;
  config::Flags flags("ulticode-verify export",
                      "Exports the log's checkpoints, hash tiles and leaves.");
  client.Register(flags);
  flags.String("out", &out, "directory to write (must not hold an export)");
  flags.Require("out");
  flags.Int("size", &size, "tree size to export (0: the latest checkpoint's)", 0, INT64_MAX);
  flags.Int("start", &start,
            "first leaf to export, a multiple of 256 (the stored hashes stand for the leaves "
            "before it)",
            0, INT64_MAX);
  config::ParseOrExit(flags, argc, argv);
  auto token = crypto::ReadSecretFile(client.token_file);
  if (!token.ok()) return Fail(token.status());
  auto channel = Channel(client.admin, client.cacert);
  if (!channel.ok()) return Fail(channel.status());
  auto stub = v1::AuditLogService::NewStub(*channel);
  auto summary =
      Export(*stub, {out, static_cast<uint64_t>(size), static_cast<uint64_t>(start), *token});
  if (!summary.ok()) return Fail(summary.status());
  std::printf("exported tree size %llu, %llu checkpoints, %llu leaves missing, to %s\n",
              static_cast<unsigned long long>(summary->size),
              static_cast<unsigned long long>(summary->checkpoints),
              static_cast<unsigned long long>(summary->missing), out.c_str());
  return kOk;
}

// Asks each witness of `addresses` ("name=host:port,...") for the
// checkpoint it holds (ulticode.outbox.v1.LogWitness).
absl::StatusOr<std::vector<WitnessView>> AskWitnesses(const std::string& addresses,
                                                      const std::string& token_file,
                                                      const std::string& cacert) {
  std::vector<WitnessView> views;
  if (addresses.empty()) return views;
  if (token_file.empty()) {
    return absl::InvalidArgumentError("--witness-addresses: needs --token-file (audit.reader)");
  }
  ASSIGN_OR_RETURN(const std::string token, crypto::ReadSecretFile(token_file));
  for (absl::string_view item : absl::StrSplit(addresses, ',', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> name_address = absl::StrSplit(item, '=');
    const auto& [name, address] = name_address;
    if (name.empty() || !config::ValidateHostPort(address).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--witness-addresses: \"", item, "\" is not NAME=HOST:PORT (e.g. auth=auth:50051)"));
    }
    ASSIGN_OR_RETURN(auto channel, Channel(address, cacert));
    auto stub = outbox::v1::LogWitness::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    outbox::v1::WitnessedCheckpoint held;
    const grpc::Status s =
        stub->GetWitnessedCheckpoint(&ctx, outbox::v1::GetWitnessedCheckpointRequest(), &held);
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("witness ", name, " at ", address,
                                                 ": GetWitnessedCheckpoint: ", s.error_message()));
    }
    views.push_back({name, held.checkpoint()});
  }
  return views;
}

// `check` of an export of rows with proofs (ulticode-export --with-proofs).
int CheckRows(const std::string& dir, const Keys& keys) {
  auto report = CheckRowExport(dir, keys);
  if (!report.ok()) return Fail(report.status());
  if (report->first_break) {
    const Break& b = *report->first_break;
    std::printf("FIRST BREAK at index %llu: %s: %s\n", static_cast<unsigned long long>(b.index),
                std::string(BreakKindName(b.kind)).c_str(), b.detail.c_str());
    return kBroken;
  }
  const std::string rows =
      absl::StrCat(report->rows, " rows of ", report->rows_file, " (log indexes [",
                   report->start_index, ", ", report->end_index, "))");
  if (report->witness_keys > 0 && report->cosigned < report->witness_quorum) {
    std::printf(
        "UNWITNESSED: %s verify against checkpoint %llu, which %zu of the %zu witness keys "
        "cosigned (the policy needs %zu)\n",
        rows.c_str(), static_cast<unsigned long long>(report->size), report->cosigned,
        report->witness_keys, report->witness_quorum);
    return kUnwitnessed;
  }
  const std::string policy =
      report->witness_keys == 0
          ? "no witness policy (no --witness-keys-file): a history the witnesses did not sign "
            "is not caught"
          : absl::StrCat("witnessed: cosigned by ", report->cosigned, " of ", report->witness_keys,
                         " witness keys (the policy needs ", report->witness_quorum, ")");
  std::printf(
      "OK: %s are their leaves, sealed by their owners and included in checkpoint %llu; %s; "
      "%s; personal values: %lld present (each opens its commitment), %lld erased, %lld not "
      "held\n",
      rows.c_str(), static_cast<unsigned long long>(report->size), policy.c_str(),
      report->filtered ? "a filtered export proves the rows it holds, not that no matching row "
                         "is missing"
                       : "unfiltered: every leaf of the range is there",
      static_cast<long long>(report->personal.present),
      static_cast<long long>(report->personal.erased),
      static_cast<long long>(report->personal.not_held));
  return kOk;
}

int CheckCommand(int argc, char** argv) {
  std::string dir, log_keys, owner_keys, witness_keys, trusted_file;
  std::string witness_addresses, token_file, cacert;
  config::Flags flags("ulticode-verify check",
                      "Checks an export with public keys only; prints the first break.");
  flags.String("dir", &dir, "the export's directory");
  flags.Require("dir");
  flags.String("log-keys-file", &log_keys, "the log's verifier keys, one a line");
  flags.Require("log-keys-file");
  flags.String("owner-keys-file", &owner_keys, "the owners' public keys (key directory format)");
  flags.Require("owner-keys-file");
  flags.String("witness-keys-file", &witness_keys,
               "the witnesses' cosignature verifier keys, one a line: the witness policy's keys");
  int64_t quorum = 0;
  flags.Int("witness-quorum", &quorum,
            "how many of those keys must cosign a checkpoint for it to count as witnessed (0: "
            "every one)",
            0, 1000);
  flags.String("trusted-checkpoint", &trusted_file, "a checkpoint note the auditor already holds");
  flags.String(
      "witness-addresses", &witness_addresses,
      "NAME=HOST:PORT,...: ask each witness (the owners' gRPC ports) for the checkpoint it "
      "holds; the export must be the history they saw (a split view or a truncated log "
      "fails)");
  flags.String("token-file", &token_file,
               "file holding an audit.reader bearer token (0600), for --witness-addresses");
  flags.String("cacert", &cacert, "CA certificate (PEM) when the witnesses serve TLS");
  config::ParseOrExit(flags, argc, argv);
  Keys keys;
  auto log = tlog::VerifiersFromFile<tlog::NoteVerifier>(log_keys);
  if (!log.ok()) return Fail(log.status());
  keys.log = *std::move(log);
  auto owners = crypto::KeyDirectory::FromFile(owner_keys);
  if (!owners.ok()) return Fail(owners.status());
  keys.owners = *std::move(owners);
  if (!witness_keys.empty()) {
    auto witnesses = tlog::VerifiersFromFile<tlog::CosignatureVerifier>(witness_keys);
    if (!witnesses.ok()) return Fail(witnesses.status());
    keys.witnesses = *std::move(witnesses);
    if (static_cast<size_t>(quorum) > keys.witnesses.size()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--witness-quorum=", quorum,
                                                          ": more than the ", keys.witnesses.size(),
                                                          " keys of --witness-keys-file")));
    }
    keys.witness_quorum = static_cast<size_t>(quorum);
  } else if (quorum != 0) {
    return Fail(absl::InvalidArgumentError("--witness-quorum: needs --witness-keys-file"));
  }
  if (IsRowExport(dir)) {
    if (!trusted_file.empty() || !witness_addresses.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--trusted-checkpoint and --witness-addresses check an export of the log; " + dir +
          " is an export of rows (manifest.json)"));
    }
    return CheckRows(dir, keys);
  }
  std::optional<std::string> trusted;
  if (!trusted_file.empty()) {
    auto note = ReadFile(trusted_file);
    if (!note.ok()) return Fail(note.status());
    trusted = *std::move(note);
  }
  auto views = AskWitnesses(witness_addresses, token_file, cacert);
  if (!views.ok()) return Fail(views.status());
  if (!views->empty() && keys.witnesses.empty()) {
    return Fail(absl::InvalidArgumentError(
        "--witness-addresses: needs --witness-keys-file (the witnesses' cosignature keys)"));
  }
  auto report = CheckExport(dir, keys, trusted, *views);
  if (!report.ok()) return Fail(report.status());
  if (report->first_break) {
    const Break& b = *report->first_break;
    std::printf("FIRST BREAK at index %llu: %s: %s\n", static_cast<unsigned long long>(b.index),
                std::string(BreakKindName(b.kind)).c_str(), b.detail.c_str());
    return kBroken;
  }
  if (report->witnessed_size < report->size) {
    std::printf(
        "UNWITNESSED from index %llu: leaves [%llu, %llu) verify, but no checkpoint that covers "
        "them carries cosignatures by %zu of the %zu witness keys (the newest that does is of "
        "size %llu)\n",
        static_cast<unsigned long long>(report->witnessed_size),
        static_cast<unsigned long long>(report->witnessed_size),
        static_cast<unsigned long long>(report->size), report->witness_quorum, report->witness_keys,
        static_cast<unsigned long long>(report->witnessed_size));
    return kUnwitnessed;
  }
  const std::string from = report->start == 0 ? "" : absl::StrCat(" from leaf ", report->start);
  const std::string policy =
      report->witness_keys == 0
          ? "no witness policy (no --witness-keys-file): a history the witnesses did not sign "
            "is not caught"
          : absl::StrCat("witnessed: checkpoint ", report->size, " cosigned by at least ",
                         report->witness_quorum, " of ", report->witness_keys, " witness keys",
                         views->empty()
                             ? " (no witness asked for its own view: --witness-addresses)"
                             : absl::StrCat("; the export is the history ", report->views_checked,
                                            " witnesses hold"));
  std::printf("OK: %llu leaves%s, %llu checkpoints, %llu cosignatures verified; %s\n",
              static_cast<unsigned long long>(report->leaves_checked), from.c_str(),
              static_cast<unsigned long long>(report->checkpoints),
              static_cast<unsigned long long>(report->cosignatures), policy.c_str());
  return kOk;
}

// The checkpoint `note`, opened with the log's keys and parsed.
absl::StatusOr<tlog::Checkpoint> OpenCheckpoint(const std::string& note,
                                                const std::vector<tlog::NoteVerifier>& keys) {
  ASSIGN_OR_RETURN(const std::string text, tlog::OpenNote(note, keys));
  return tlog::ParseCheckpoint(text);
}

// Checks that `latest` extends `trusted` (a consistency proof from Admin).
absl::Status CheckExtends(v1::AuditLogService::Stub& stub, const std::string& token,
                          const tlog::Checkpoint& trusted, const tlog::Checkpoint& latest) {
  if (trusted.origin != latest.origin) {
    return absl::FailedPreconditionError(
        "forked checkpoint: the trusted checkpoint is of another log");
  }
  if (trusted.size > latest.size) {
    return absl::FailedPreconditionError(
        absl::StrCat("rolled back: the log's latest checkpoint has size ", latest.size,
                     ", the trusted one ", trusted.size));
  }
  if (trusted.size == latest.size || trusted.size == 0) {
    if (trusted.size == latest.size && trusted.root != latest.root) {
      return absl::FailedPreconditionError("forked checkpoint: same size, another root");
    }
    return absl::OkStatus();
  }
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + token);
  ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  v1::GetConsistencyProofRequest req;
  req.set_first_tree_size(trusted.size);
  req.set_second_tree_size(latest.size);
  v1::ConsistencyProof resp;
  const grpc::Status s = stub.GetConsistencyProof(&ctx, req, &resp);
  if (!s.ok())
    return absl::UnavailableError(absl::StrCat("GetConsistencyProof: ", s.error_message()));
  std::vector<tlog::Hash> proof;
  for (const std::string& h : resp.hashes()) {
    ASSIGN_OR_RETURN(tlog::Hash hash, tlog::FromBytes(h));
    proof.push_back(hash);
  }
  const absl::Status consistent =
      tlog::VerifyConsistency(trusted.size, latest.size, trusted.root, latest.root, proof);
  if (!consistent.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("forked checkpoint: the latest checkpoint does not extend the trusted one: ",
                     consistent.message()));
  }
  return absl::OkStatus();
}

int InclusionCommand(int argc, char** argv) {
  client::AdminFlags client;
  std::string log_keys, event_id, trusted_file;
  config::Flags flags("ulticode-verify inclusion",
                      "Proves one event is in the log, against a checkpoint the log's keys "
                      "signed (and, given one, that it extends a checkpoint you hold).");
  client.Register(flags);
  flags.String("log-keys-file", &log_keys, "the log's verifier keys, one a line");
  flags.Require("log-keys-file");
  flags.String("event-id", &event_id, "the audit event to prove");
  flags.Require("event-id");
  flags.String("trusted-checkpoint", &trusted_file, "a checkpoint note you already hold");
  config::ParseOrExit(flags, argc, argv);
  auto keys = tlog::VerifiersFromFile<tlog::NoteVerifier>(log_keys);
  if (!keys.ok()) return Fail(keys.status());
  auto token = crypto::ReadSecretFile(client.token_file);
  if (!token.ok()) return Fail(token.status());
  auto channel = Channel(client.admin, client.cacert);
  if (!channel.ok()) return Fail(channel.status());
  auto stub = v1::AuditLogService::NewStub(*channel);
  auto call = [&](auto method, const auto& req, auto* resp, const char* name) -> absl::Status {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + *token);
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    const grpc::Status s = ((*stub).*method)(&ctx, req, resp);
    if (s.ok()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(name, ": ", s.error_message()));
  };
  v1::SignedCheckpoint signed_checkpoint;
  if (auto s = call(&v1::AuditLogService::Stub::GetCheckpoint, v1::GetCheckpointRequest(),
                    &signed_checkpoint, "GetCheckpoint");
      !s.ok()) {
    return Fail(s);
  }
  auto checkpoint = OpenCheckpoint(signed_checkpoint.checkpoint(), *keys);
  if (!checkpoint.ok()) {
    std::printf("BROKEN: the latest checkpoint: %s\n",
                std::string(checkpoint.status().message()).c_str());
    return kBroken;
  }
  if (!trusted_file.empty()) {
    auto note = ReadFile(trusted_file);
    if (!note.ok()) return Fail(note.status());
    auto trusted = OpenCheckpoint(*note, *keys);
    if (!trusted.ok()) return Fail(trusted.status());
    if (auto s = CheckExtends(*stub, *token, *trusted, *checkpoint); !s.ok()) {
      if (absl::IsUnavailable(s)) return Fail(s);
      std::printf("BROKEN: %s\n", std::string(s.message()).c_str());
      return kBroken;
    }
  }
  v1::GetInclusionProofRequest proof_req;
  proof_req.set_event_id(event_id);
  proof_req.set_tree_size(checkpoint->size);
  v1::InclusionProof proof;
  if (auto s = call(&v1::AuditLogService::Stub::GetInclusionProof, proof_req, &proof,
                    "GetInclusionProof");
      !s.ok()) {
    return Fail(s);
  }
  v1::ListLogEntriesRequest leaf_req;
  leaf_req.set_start_index(proof.leaf_index());
  leaf_req.set_page_size(1);
  v1::ListLogEntriesResponse leaves;
  if (auto s =
          call(&v1::AuditLogService::Stub::ListLogEntries, leaf_req, &leaves, "ListLogEntries");
      !s.ok()) {
    return Fail(s);
  }
  const auto verdict = [&]() -> absl::Status {
    if (leaves.log_entries_size() != 1 ||
        leaves.log_entries(0).leaf_index() != proof.leaf_index()) {
      return absl::NotFoundError(absl::StrCat("Admin returned no leaf ", proof.leaf_index()));
    }
    ASSIGN_OR_RETURN(const tlog::LeafV1 leaf, tlog::DecodeLeaf(leaves.log_entries(0).leaf()));
    if (leaf.event_id != event_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("leaf ", proof.leaf_index(), " is event ", leaf.event_id));
    }
    std::vector<tlog::Hash> hashes;
    for (const std::string& h : proof.hashes()) {
      ASSIGN_OR_RETURN(tlog::Hash hash, tlog::FromBytes(h));
      hashes.push_back(hash);
    }
    return tlog::VerifyInclusion(proof.leaf_index(), checkpoint->size,
                                 tlog::LeafHash(leaves.log_entries(0).leaf()), hashes,
                                 checkpoint->root);
  }();
  if (!verdict.ok()) {
    std::printf("BROKEN: event %s: %s\n", event_id.c_str(), std::string(verdict.message()).c_str());
    return kBroken;
  }
  std::printf("OK: event %s is leaf %llu of the tree of size %llu signed by the log%s\n",
              event_id.c_str(), static_cast<unsigned long long>(proof.leaf_index()),
              static_cast<unsigned long long>(checkpoint->size),
              trusted_file.empty() ? "" : ", which extends the trusted checkpoint");
  return kOk;
}

int VkeyCommand(int argc, char** argv) {
  std::string name, public_key;
  bool witness = false;
  config::Flags flags("ulticode-verify vkey",
                      "Prints the c2sp.org/signed-note verifier key of an Ed25519 public key.");
  flags.String("name", &name, "the key's name (the log's origin, or a witness: auth, app)");
  flags.Require("name");
  flags.String("public-key", &public_key, "base64 of the 32 raw bytes of the public key");
  flags.Require("public-key");
  flags.Bool("witness", &witness,
             "a witness's cosignature/v1 key (an owner's key), for --witness-keys-file");
  config::ParseOrExit(flags, argc, argv);
  auto key = crypto::VerifyKey::FromBase64(public_key);
  if (!key.ok()) return Fail(key.status());
  if (witness) {
    auto cosigner = tlog::CosignatureVerifier::Parse(
        tlog::FormatVerifierKey(name, tlog::kCosignatureV1Ed25519, key->raw()));
    if (!cosigner.ok()) return Fail(cosigner.status());
    std::printf("%s\n",
                tlog::FormatVerifierKey(name, tlog::kCosignatureV1Ed25519, key->raw()).c_str());
    return kOk;
  }
  auto vkey = tlog::VerifierKeyOf(name, *key);
  if (!vkey.ok()) return Fail(vkey.status());
  std::printf("%s\n", vkey->c_str());
  return kOk;
}

}  // namespace
}  // namespace ulticode::verify

int main(int argc, char** argv) {
  using namespace ulticode::verify;
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "export") return ExportCommand(argc - 1, argv + 1);
  if (command == "check") return CheckCommand(argc - 1, argv + 1);
  if (command == "inclusion") return InclusionCommand(argc - 1, argv + 1);
  if (command == "vkey") return VkeyCommand(argc - 1, argv + 1);
  std::fprintf(stderr,
               "usage: ulticode-verify export|check|inclusion|vkey [flags] (--help for each)\n");
  return kError;
}
