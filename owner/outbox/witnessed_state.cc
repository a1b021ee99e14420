#include "owner/outbox/witnessed_state.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace ulticode::outbox {

absl::StatusOr<tlog::CosignatureVerifier> OwnCosignatureVerifier(audit::Owner owner,
                                                                 const crypto::SigningKey& key) {
  return tlog::CosignatureVerifier::Parse(tlog::FormatVerifierKey(
      audit::OwnerName(owner), tlog::kCosignatureV1Ed25519, key.public_key().raw()));
}

absl::StatusOr<std::string> OwnCheckpointText(const tlog::CosignatureVerifier& own,
                                              const WitnessedState& state) {
  const std::string what = absl::StrCat("the witnessed checkpoint of ", state.size, " leaves");
  auto split = tlog::SplitNoteSignatures(state.note);
  if (!split.ok()) {
    return absl::DataLossError(
        absl::StrCat(what, ": its note is malformed: ", split.status().message()));
  }
  if (const auto signed_at = own.Verify(split->text, state.cosignature); !signed_at.ok()) {
    return absl::DataLossError(absl::StrCat(what, " does not carry this owner's own cosignature (",
                                            signed_at.status().message(),
                                            "): written by another login, not by this witness"));
  }
  auto checkpoint = tlog::ParseCheckpoint(split->text);
  if (!checkpoint.ok() || checkpoint->size != state.size || checkpoint->root != state.root) {
    return absl::DataLossError(absl::StrCat(what, ": its size or root is not the cosigned note's"));
  }
  return std::move(split->text);
}

}  // namespace ulticode::outbox
