#include "common/tlog/witnessing.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ulticode::tlog {

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

}  // namespace ulticode::tlog
