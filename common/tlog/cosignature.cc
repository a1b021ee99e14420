#include "common/tlog/cosignature.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/base/big_endian.h"
#include "common/base/status_macros.h"
#include "common/tlog/note.h"

namespace ulticode::tlog {
namespace {

constexpr size_t kTimeBytes = 8;

absl::Status CheckText(absl::string_view checkpoint_text) {
  if (checkpoint_text.empty() || !absl::EndsWith(checkpoint_text, "\n")) {
    return absl::InvalidArgumentError(
        "cosignature: the checkpoint text must be non-empty and end with a newline");
  }
  return absl::OkStatus();
}

std::string SignedMessage(absl::string_view checkpoint_text, uint64_t time) {
  return absl::StrCat("cosignature/v1\ntime ", time, "\n", checkpoint_text);
}

}  // namespace

absl::StatusOr<CosignatureSigner> CosignatureSigner::Create(std::string name,
                                                            const crypto::SigningKey& key) {
  if (!ValidKeyName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("witness key name \"", name, "\": must be non-empty, without '+' or spaces"));
  }
  const uint32_t id = KeyIdOf(name, kCosignatureV1Ed25519, key.public_key().raw());
  return CosignatureSigner(std::move(name), key, id);
}

std::string CosignatureSigner::VerifierKey() const {
  return FormatVerifierKey(name_, kCosignatureV1Ed25519, key_->public_key().raw());
}

absl::StatusOr<std::string> CosignatureSigner::Cosign(absl::string_view checkpoint_text,
                                                      uint64_t time) const {
  RETURN_IF_ERROR(CheckText(checkpoint_text));
  ASSIGN_OR_RETURN(const std::string signature, key_->Sign(SignedMessage(checkpoint_text, time)));
  return SignatureLine(name_, key_id_, base::BigEndian<kTimeBytes>(time) + signature);
}

absl::StatusOr<CosignatureVerifier> CosignatureVerifier::Parse(absl::string_view vkey) {
  ASSIGN_OR_RETURN(VerifierKeyParts parts, ParseVerifierKey(vkey, kCosignatureV1Ed25519));
  return CosignatureVerifier(std::move(parts.name), parts.key_id, std::move(parts.key));
}

absl::StatusOr<uint64_t> CosignatureVerifier::Verify(absl::string_view checkpoint_text,
                                                     absl::string_view signature_line) const {
  RETURN_IF_ERROR(CheckText(checkpoint_text));
  absl::ConsumeSuffix(&signature_line, "\n");
  ASSIGN_OR_RETURN(const NoteSignature sig, ParseSignatureLine(signature_line));
  if (sig.name != name_ || sig.key_id != key_id_) {
    return absl::NotFoundError(
        absl::StrCat("cosignature: the line is by ", sig.name, ", not by the witness key ", name_));
  }
  if (sig.signature.size() != kTimeBytes + crypto::kEd25519SignatureBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cosignature by ", name_, ": ", sig.signature.size(),
                     " bytes after the key id, not an 8-byte time and a 64-byte signature"));
  }
  const uint64_t time = base::ReadBigEndian<kTimeBytes>(sig.signature);
  if (!key_.Verify(SignedMessage(checkpoint_text, time), sig.signature.substr(kTimeBytes))) {
    return absl::FailedPreconditionError(
        absl::StrCat("cosignature by ", name_, " at time ", time, " does not verify"));
  }
  return time;
}

}  // namespace ulticode::tlog
