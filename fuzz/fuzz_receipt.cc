// audit::DecodeReceipt on arbitrary receipt entries.
//
// Input: fuzz_support.h's field format; header bit 0 picks the stream the
// receipt is read beside (audit:app, else audit:auth). Keys:
// Keys().directory, whose "admin" key signs the seed receipts. Invariants: a
// decoded receipt's signature verifies with Admin's key over its events, its
// items are canonical ids with 32-byte hashes, and encoding them again
// decodes to the same items.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/strings/ascii.h"
#include "common/audit/receipt.h"
#include "fuzz/fuzz_support.h"

using namespace ::ulticode;  // NOLINT

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::Keys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  redis::StreamFields fields;
  const uint8_t header = fuzz::DecodeFields(data, size, &fields);
  const std::string stream = (header & 1) ? "audit:app" : "audit:auth";
  const fuzz::FixedKeys& keys = fuzz::Keys();
  (void)audit::ReceiptStreamFor(stream);
  auto items = audit::DecodeReceipt(stream, fields, keys.directory);
  if (!items.ok()) {
    const auto code = items.status().code();
    FUZZ_CHECK(
        code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kPermissionDenied,
        items.status().ToString());
    return 0;
  }
  std::optional<std::string> events, signature;
  for (const auto& [name, value] : fields) {
    if (name == "events") events = value;
    if (name == "signature") signature = value;
  }
  FUZZ_CHECK(events && signature, "decoded a receipt without events or signature");
  FUZZ_CHECK(keys.admin.public_key().Verify(
                 absl::StrCat("ulticode.receipt.v1\n", stream, "\n", *events), *signature),
             "decoded a receipt Admin's key did not sign");
  for (const audit::ReceiptItem& item : *items) {
    FUZZ_CHECK(
        ids::IsValidUuid(item.event_id) && absl::AsciiStrToLower(item.event_id) == item.event_id,
        item.event_id);
    FUZZ_CHECK(item.payload_sha256.size() == crypto::kSha256Bytes, "hash is not 32 bytes");
  }
  auto encoded = audit::EncodeReceipt(stream, *items, keys.admin);
  FUZZ_CHECK(encoded.ok(), encoded.status().ToString());
  auto again = audit::DecodeReceipt(stream, *encoded, keys.directory);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  FUZZ_CHECK(again->size() == items->size(), "re-encoded receipt has other items");
  for (size_t i = 0; i < items->size(); ++i) {
    FUZZ_CHECK((*again)[i].event_id == (*items)[i].event_id &&
                   (*again)[i].payload_sha256 == (*items)[i].payload_sha256,
               "re-encoded receipt has other items");
  }
  return 0;
}
