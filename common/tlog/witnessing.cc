#include "common/tlog/witnessing.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ulticode::tlog {

std::string ProofStreamFor(absl::string_view audit_stream) {
  return absl::StrCat(audit_stream, ":proofs");
}

std::string CosignatureStreamFor(absl::string_view audit_stream) {
  return absl::StrCat(audit_stream, ":cosignatures");
}

std::string EncodeHashes(const std::vector<Hash>& hashes) {
  std::string raw;
  for (const Hash& h : hashes) raw += ToBytes(h);
  return absl::Base64Escape(raw);
}

absl::StatusOr<std::vector<Hash>> DecodeHashes(absl::string_view encoded) {
  std::string raw;
  if (!absl::Base64Unescape(encoded, &raw) || raw.size() % 32 != 0) {
    return absl::InvalidArgumentError("proof: not base64 of whole 32-byte hashes");
  }
  std::vector<Hash> hashes;
  for (size_t i = 0; i < raw.size(); i += 32) {
    hashes.push_back(*FromBytes(absl::string_view(raw).substr(i, 32)));
  }
  return hashes;
}

std::string EncodeProofs(const std::vector<LeafProof>& proofs) {
  return absl::StrJoin(proofs, ",", [](std::string* out, const LeafProof& p) {
    absl::StrAppend(out, p.event_id, ":", p.index, ":", EncodeHashes(p.hashes), ":", p.key_id, ":",
                    absl::Base64Escape(p.seal));
  });
}

absl::StatusOr<std::vector<LeafProof>> DecodeProofs(absl::string_view encoded) {
  std::vector<LeafProof> proofs;
  if (encoded.empty()) return proofs;
  for (absl::string_view item : absl::StrSplit(encoded, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    LeafProof p;
    if (parts.size() != 5 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &p.index) ||
        parts[3].empty() || !absl::Base64Unescape(parts[4], &p.seal) || p.seal.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "proofs: item ", proofs.size(), " is not <event id>:<index>:<hashes>:<key id>:<seal>"));
    }
    p.event_id = std::string(parts[0]);
    p.key_id = std::string(parts[3]);
    auto hashes = DecodeHashes(parts[2]);
    if (!hashes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("proofs: item ", proofs.size(), ": ", hashes.status().message()));
    }
    p.hashes = *std::move(hashes);
    proofs.push_back(std::move(p));
  }
  return proofs;
}

}  // namespace ulticode::tlog
