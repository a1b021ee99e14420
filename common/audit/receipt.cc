#include "common/audit/receipt.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
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

// A canonical positive decimal int64 ("1", never "01", "+1" or " 1": the
// round trip refuses every other spelling).
bool ParsePublication(absl::string_view s, int64_t* out) {
  return absl::SimpleAtoi(s, out) && *out > 0 && absl::StrCat(*out) == s;
}

}  // namespace

int64_t PublicationOf(const redis::StreamFields& fields) {
  int64_t publication = 0;
  int seen = 0;
  for (const auto& [name, value] : fields) {
    if (name != kPublicationField) continue;
    if (++seen > 1 || !ParsePublication(value, &publication)) return 0;
  }
  return publication;
}

size_t MaxReceiptBytes(int events) {
  // "<36-char id>:<64 hex>:<up to 19 digits>," per item; the field names, a
  // key id (43 base64url characters) and a 64-byte signature.
  constexpr size_t kItem = 36 + 1 + 64 + 1 + 19 + 1;
  constexpr size_t kFixed = 6 + 6 + 9 + 64 + 64;
  return kFixed + kItem * static_cast<size_t>(std::max(events, 0));
}

std::string ReceiptStreamFor(absl::string_view audit_stream) {
  return absl::StrCat(audit_stream, ":receipts");
}

absl::StatusOr<redis::StreamFields> EncodeReceipt(absl::string_view audit_stream,
                                                  const std::vector<ReceiptItem>& items,
                                                  const crypto::SigningKey& signer) {
  std::vector<std::string> parts;
  parts.reserve(items.size());
  for (const ReceiptItem& item : items) {
    std::string part =
        absl::StrCat(item.event_id, ":", absl::BytesToHexString(item.payload_sha256));
    if (item.publication > 0) absl::StrAppend(&part, ":", item.publication);
    parts.push_back(std::move(part));
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
    std::vector<absl::string_view> f = absl::StrSplit(part, absl::MaxSplits(':', 2));
    int64_t publication = 0;
    if (f.size() < 2 || !ids::IsValidUuid(f[0]) || absl::AsciiStrToLower(f[0]) != f[0] ||
        f[1].size() != 2 * crypto::kSha256Bytes || !IsLowerHex(f[1]) ||
        (f.size() == 3 && !ParsePublication(f[2], &publication))) {
      return absl::InvalidArgumentError(
          absl::StrCat("receipt item \"", absl::CHexEscape(part.substr(0, 100)),
                       "\" is not <uuid>:<sha256 hex>[:<publication>]"));
    }
    items.push_back(ReceiptItem{std::string(f[0]), absl::HexStringToBytes(f[1]), publication});
  }
  return items;
}

}  // namespace ulticode::audit
