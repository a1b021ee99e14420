#include "common/audit/receipt.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"
#include "common/ids/uuid.h"

namespace ulticode::audit {
namespace {

constexpr char kEventsField[] = "events";
constexpr char kKeyIdField[] = "key_id";
constexpr char kSignatureField[] = "signature";

std::string SignedMessage(absl::string_view audit_stream, absl::string_view events) {
  return absl::StrCat("ulticode.receipt.v1\n", audit_stream, "\n", events);
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!(absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string ReceiptStreamFor(absl::string_view audit_stream) {
  return absl::StrCat(audit_stream, ":receipts");
}

absl::StatusOr<redis::StreamFields> EncodeReceipt(absl::string_view audit_stream,
                                                  const std::vector<ReceiptItem>& items,
                                                  const crypto::SigningKey& signer) {
  std::vector<std::string> parts;
  parts.reserve(items.size());
  for (const ReceiptItem& item : items) {
    parts.push_back(absl::StrCat(item.event_id, ":", absl::BytesToHexString(item.payload_sha256)));
  }
  std::string events = absl::StrJoin(parts, ",");
  ASSIGN_OR_RETURN(std::string signature, signer.Sign(SignedMessage(audit_stream, events)));
  return redis::StreamFields{{kEventsField, std::move(events)},
                             {kKeyIdField, signer.key_id()},
                             {kSignatureField, std::move(signature)}};
}

absl::StatusOr<std::vector<ReceiptItem>> DecodeReceipt(absl::string_view audit_stream,
                                                       const redis::StreamFields& fields,
                                                       const crypto::KeyDirectory& keys) {
  std::optional<std::string> events, key_id, signature;
  for (const auto& [name, value] : fields) {
    std::optional<std::string>* slot = name == kEventsField      ? &events
                                       : name == kKeyIdField     ? &key_id
                                       : name == kSignatureField ? &signature
                                                                 : nullptr;
    if (slot == nullptr) continue;
    if (slot->has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("receipt field ", name, " appears twice"));
    }
    *slot = value;
  }
  if (!events || !key_id || !signature) {
    return absl::InvalidArgumentError(
        "receipt lacks one of the fields events, key_id, signature (unsigned receipt)");
  }
  const crypto::KeyDirectory::Entry* entry = keys.Find(*key_id);
  if (entry == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("receipt signed by unknown key \"",
                                                    absl::CHexEscape(key_id->substr(0, 32)), "\""));
  }
  if (entry->party != kReceiptSigner) {
    return absl::PermissionDeniedError(absl::StrCat("receipt signed by key ", *key_id, " of ",
                                                    entry->party, ", not of ", kReceiptSigner));
  }
  if (!entry->key.Verify(SignedMessage(audit_stream, *events), *signature)) {
    return absl::PermissionDeniedError(
        absl::StrCat("receipt signature does not verify for stream ", audit_stream));
  }
  std::vector<ReceiptItem> items;
  for (absl::string_view part : absl::StrSplit(*events, ',', absl::SkipEmpty())) {
    const size_t colon = part.find(':');
    const absl::string_view id = part.substr(0, colon);
    const absl::string_view hex =
        colon == absl::string_view::npos ? absl::string_view() : part.substr(colon + 1);
    if (!ids::IsValidUuid(id) || absl::AsciiStrToLower(id) != id ||
        hex.size() != 2 * crypto::kSha256Bytes || !IsLowerHex(hex)) {
      return absl::InvalidArgumentError(absl::StrCat("receipt item \"",
                                                     absl::CHexEscape(part.substr(0, 80)),
                                                     "\" is not <uuid>:<sha256 hex>"));
    }
    items.push_back(ReceiptItem{std::string(id), absl::HexStringToBytes(hex)});
  }
  return items;
}

}  // namespace ulticode::audit
