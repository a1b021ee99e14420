#include "common/outbox/witness.h"

#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/log/log.h"
#include "common/pg/params.h"
#include "common/tlog/witnessing.h"

namespace ulticode::outbox {
namespace {

constexpr char kComponent[] = "outbox.witness";
// The cosignature stream holds the latest answers only.
constexpr char kCosignatureStreamLength[] = "1000";

constexpr pg::Statement kHeld{
    "witness.held", "SELECT size, root, note FROM log_witnessed WHERE origin = $1 FOR UPDATE"};

constexpr pg::Statement kAccept{
    "witness.accept",
    "INSERT INTO log_witnessed (origin, size, root, note) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (origin) DO UPDATE SET size = EXCLUDED.size, root = EXCLUDED.root,"
    " note = EXCLUDED.note, accepted_at = now()"};

std::optional<std::string> Field(const redis::StreamFields& fields, absl::string_view name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return v;
  }
  return std::nullopt;
}

// What the owner holds for a log.
struct Held {
  uint64_t size = 0;
  tlog::Hash root{};
  std::string text;  // the checkpoint body it cosigned
};

}  // namespace

absl::StatusOr<std::unique_ptr<Witness>> Witness::Create(WitnessOptions options,
                                                         prometheus::Registry& registry) {
  ASSIGN_OR_RETURN(tlog::CosignatureSigner signer,
                   tlog::CosignatureSigner::Create(audit::OwnerName(options.owner), *options.key));
  return std::unique_ptr<Witness>(new Witness(std::move(options), std::move(signer), registry));
}

Witness::Witness(WitnessOptions options, tlog::CosignatureSigner signer,
                 prometheus::Registry& registry)
    : options_(std::move(options)),
      signer_(std::move(signer)),
      outcomes_(prometheus::BuildCounter()
                    .Name("ulticode_log_witness_checkpoints_total")
                    .Help("Checkpoints of Admin's log this owner was shown, by outcome: accepted, "
                          "fork, rollback, bad_signature, malformed, stale_proof")
                    .Register(registry)),
      size_(prometheus::BuildGauge()
                .Name("ulticode_log_witness_size")
                .Help("Tree size of the newest checkpoint of Admin's log this owner accepted")
                .Register(registry)
                .Add({{"owner", audit::OwnerName(options_.owner)}})),
      accepted_at_(prometheus::BuildGauge()
                       .Name("ulticode_log_witness_accepted_timestamp_seconds")
                       .Help("When this owner last accepted a checkpoint of Admin's log")
                       .Register(registry)
                       .Add({{"owner", audit::OwnerName(options_.owner)}})) {
  for (const char* outcome :
       {"accepted", "fork", "rollback", "bad_signature", "malformed", "stale_proof"}) {
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", outcome}});
  }
}

bool Witness::IsCheckpoint(const redis::StreamFields& fields) {
  return Field(fields, tlog::kCheckpointField).has_value();
}

void Witness::Refuse(const std::string& outcome, const std::string& why) {
  outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", outcome}}).Increment();
  log::Error(kComponent, "checkpoint of Admin's log refused",
             {{"outcome", outcome}, {"reason", why}});
}

absl::Status Witness::Cosign(redis::Client& redis, uint64_t size, absl::string_view text) {
  ASSIGN_OR_RETURN(const std::string line,
                   signer_.Cosign(text, static_cast<uint64_t>(absl::ToUnixSeconds(absl::Now()))));
  return redis
      .Command({"XADD", tlog::CosignatureStreamFor(options_.audit_stream), "MAXLEN", "~",
                kCosignatureStreamLength, "*", tlog::kSizeField, absl::StrCat(size),
                tlog::kCosignatureField, line})
      .status();
}

absl::Status Witness::Observe(pg::Connection& pg, redis::Client& redis,
                              const redis::StreamFields& fields) {
  const auto note = Field(fields, tlog::kCheckpointField);
  const auto from_text = Field(fields, tlog::kFromField);
  const auto proof_text = Field(fields, tlog::kConsistencyField);
  uint64_t from = 0;
  if (!note || !from_text || !proof_text || !absl::SimpleAtoi(*from_text, &from)) {
    Refuse("malformed", "a checkpoint entry needs log_checkpoint, log_from and log_consistency");
    return absl::OkStatus();
  }
  auto text = tlog::OpenNote(*note, options_.log_keys);
  if (!text.ok()) {
    Refuse(absl::IsInvalidArgument(text.status()) ? "malformed" : "bad_signature",
           std::string(text.status().message()));
    return absl::OkStatus();
  }
  auto checkpoint = tlog::ParseCheckpoint(*text);
  auto proof = tlog::DecodeHashes(*proof_text);
  if (!checkpoint.ok() || !proof.ok()) {
    Refuse("malformed",
           std::string((checkpoint.ok() ? proof.status() : checkpoint.status()).message()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(pg::Transaction tx, pg.Begin());
  ASSIGN_OR_RETURN(pg::Result r, tx.Execute(kHeld, {pg::Text(checkpoint->origin)}));
  std::optional<Held> held;
  if (!r.empty()) {
    ASSIGN_OR_RETURN(const tlog::Hash root, tlog::FromBytes(r.GetBytes(0, 1)));
    ASSIGN_OR_RETURN(const tlog::SplitNote split, tlog::SplitNoteSignatures(r.GetString(0, 2)));
    held = Held{static_cast<uint64_t>(r.GetInt64(0, 0)), root, split.text};
  }
  const uint64_t size = checkpoint->size;
  if (held && size < held->size) {
    RETURN_IF_ERROR(tx.Commit());
    Refuse("rollback",
           absl::StrCat("shown a tree of ", size, " leaves after accepting one of ", held->size));
    return absl::OkStatus();
  }
  if (held && size == held->size) {
    RETURN_IF_ERROR(tx.Commit());
    if (checkpoint->root != held->root) {
      Refuse("fork", absl::StrCat("another root for the tree of ", size, " leaves"));
      return absl::OkStatus();
    }
    return Cosign(redis, size, held->text);  // again: Admin may have lost it
  }
  if (held && from != held->size) {
    RETURN_IF_ERROR(tx.Commit());
    outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "stale_proof"}})
        .Increment();
    return Cosign(redis, held->size, held->text);
  }
  if (held) {
    const absl::Status consistent =
        tlog::VerifyConsistency(held->size, size, held->root, checkpoint->root, *proof);
    if (!consistent.ok()) {
      RETURN_IF_ERROR(tx.Commit());
      Refuse("fork", absl::StrCat("the tree of ", size, " leaves does not extend the one of ",
                                  held->size, ": ", consistent.message()));
      return absl::OkStatus();
    }
  }
  RETURN_IF_ERROR(
      tx.Execute(kAccept, {pg::Text(checkpoint->origin), pg::Int(static_cast<int64_t>(size)),
                           pg::Bytes(tlog::ToBytes(checkpoint->root)), pg::Text(*note)})
          .status());
  RETURN_IF_ERROR(tx.Commit());
  outcomes_.Add({{"owner", audit::OwnerName(options_.owner)}, {"outcome", "accepted"}}).Increment();
  size_.Set(static_cast<double>(size));
  accepted_at_.SetToCurrentTime();
  return Cosign(redis, size, *text);
}

}  // namespace ulticode::outbox
