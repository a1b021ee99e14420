#include "common/tlog/leaf.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/base/big_endian.h"

namespace ulticode::tlog {
namespace {

void Field(std::string& out, absl::string_view x) {
  base::AppendBigEndian<4>(static_cast<uint32_t>(x.size()), out);
  out.append(x.data(), x.size());
}

absl::Status ReadField(absl::string_view& in, const char* name, std::string* out) {
  if (in.size() < 4)
    return absl::InvalidArgumentError(absl::StrCat("leaf: ", name, ": truncated length"));
  const auto n = static_cast<uint32_t>(base::ReadBigEndian<4>(in));
  in.remove_prefix(4);
  if (n > kMaxLeafFieldBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("leaf: ", name, ": ", n, " bytes, over ", kMaxLeafFieldBytes));
  }
  if (in.size() < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("leaf: ", name, ": ", n, " bytes announced, ", in.size(), " left"));
  }
  out->assign(in.data(), n);
  in.remove_prefix(n);
  return absl::OkStatus();
}

}  // namespace

std::string EncodeLeaf(const LeafV1& leaf) {
  std::string out(1, kLeafVersion);
  Field(out, leaf.owner);
  Field(out, leaf.event_id);
  Field(out, leaf.key_id);
  Field(out, leaf.seal);
  Field(out, leaf.envelope);
  return out;
}

absl::StatusOr<LeafV1> DecodeLeaf(absl::string_view bytes) {
  if (bytes.empty() || bytes[0] != kLeafVersion) {
    return absl::InvalidArgumentError("leaf: not a version 1 leaf");
  }
  bytes.remove_prefix(1);
  LeafV1 leaf;
  for (auto [name, field] : {std::pair{"owner", &leaf.owner}, std::pair{"event_id", &leaf.event_id},
                             std::pair{"key_id", &leaf.key_id}, std::pair{"seal", &leaf.seal},
                             std::pair{"envelope", &leaf.envelope}}) {
    if (absl::Status s = ReadField(bytes, name, field); !s.ok()) return s;
  }
  if (!bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("leaf: ", bytes.size(), " bytes after the envelope"));
  }
  return leaf;
}

}  // namespace ulticode::tlog
