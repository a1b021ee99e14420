#include "common/audit/receipt.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/ids/uuid.h"

namespace ulticode::audit {

namespace {
constexpr char kEventIdsField[] = "event_ids";
}  // namespace

std::string ReceiptStreamFor(absl::string_view audit_stream) {
  return absl::StrCat(audit_stream, ":receipts");
}

redis::StreamFields EncodeReceipt(const std::vector<std::string>& event_ids) {
  return {{kEventIdsField, absl::StrJoin(event_ids, ",")}};
}

std::vector<std::string> DecodeReceipt(const redis::StreamFields& fields, int* rejected) {
  std::vector<std::string> ids;
  int bad = 0;
  bool found = false;
  for (const auto& [name, value] : fields) {
    if (name != kEventIdsField) continue;
    found = true;
    for (absl::string_view id : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      if (ids::IsValidUuid(id) && absl::AsciiStrToLower(id) == id) {
        ids.emplace_back(id);
      } else {
        ++bad;
      }
    }
  }
  if (!found) ++bad;
  if (rejected != nullptr) *rejected = bad;
  return ids;
}

}  // namespace ulticode::audit
