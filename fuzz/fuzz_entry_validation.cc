// admin::inbox::ValidateEntry on arbitrary stream entries.
//
// Input: fuzz_support.h's field format. Header bits: 0 = the app stream (else
// auth), 1 = a deleted entry, 2 = tight size limits (512-byte envelope,
// 1 KiB entry). Keys: Keys().directory, so correctly sealed seeds reach the
// envelope checks. Invariants: an accepted entry is one Admin can store and
// its seal verifies with the stream owner's key; a rejection's detail
// fits a PostgreSQL text column and its event id is canonical or empty.
#include <cstddef>
#include <cstdint>
#include <variant>

#include "absl/strings/ascii.h"
#include "admin/inbox/entry_validation.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace ::ulticode;  // NOLINT
using admin::inbox::AcceptedEntry;
using admin::inbox::Rejection;

bool IsCanonical(const std::string& id) {
  return ids::IsValidUuid(id) && absl::AsciiStrToLower(id) == id;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietProtobufLogs();
  fuzz::Keys();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  redis::StreamEntry entry;
  entry.id = "1750000000000-0";
  const uint8_t header = fuzz::DecodeFields(data, size, &entry.fields);
  const audit::Owner owner = (header & 1) ? audit::v1::OWNER_APP : audit::v1::OWNER_AUTH;
  entry.deleted = (header & 2) != 0;
  admin::inbox::ValidationLimits limits;
  if (header & 4) {
    limits.max_event_bytes = 512;
    limits.max_entry_bytes = 1024;
  }
  const fuzz::FixedKeys& keys = fuzz::Keys();
  seal::Verifier seals;
  const admin::inbox::Verdict verdict =
      admin::inbox::ValidateEntry(owner, entry, fuzz::Now(), keys.directory, seals, limits);

  if (const auto* a = std::get_if<AcceptedEntry>(&verdict)) {
    FUZZ_CHECK(!entry.deleted, "deleted entry accepted");
    FUZZ_CHECK(a->owner == owner, "accepted with another owner");
    FUZZ_CHECK(IsCanonical(a->event_id), a->event_id);
    FUZZ_CHECK(a->envelope.size() <= limits.max_event_bytes, "oversized envelope accepted");
    FUZZ_CHECK(a->key_id == keys.owner(owner).key_id(), "accepted with another party's key");
    seal::Verifier fresh;  // nothing remembered
    FUZZ_CHECK(fresh.Verify(keys.owner(owner).public_key(), a->envelope, a->seal).ok(),
               "accepted a seal that does not verify");
    FUZZ_CHECK(a->occurred_at >= limits.min_occurred_at &&
                   a->occurred_at <= fuzz::Now() + limits.max_future_skew,
               "accepted an occurred_at out of range");
    audit::AuditEvent event;
    FUZZ_CHECK(event.ParseFromString(a->envelope), "accepted envelope does not parse");
    FUZZ_CHECK(event.event_id() == a->event_id && event.record().audit_id() == a->event_id,
               "accepted envelope with another id");
    FUZZ_CHECK(event.owner() == owner && event.event_type() == a->event_type,
               "accepted envelope disagrees with the entry");
    FUZZ_CHECK(audit::Validate(event).ok(), "accepted envelope fails audit::Validate");
    fuzz::CheckStorable(event);
  } else {
    const auto& r = std::get<Rejection>(verdict);
    FUZZ_CHECK(admin::inbox::PoisonReasonName(r.reason) != "unknown", "unnamed poison reason");
    FUZZ_CHECK(r.event_id.empty() || IsCanonical(r.event_id), r.event_id);
    FUZZ_CHECK(!r.detail.empty(), "rejection without detail");
    // inbox_store writes TruncateUtf8(detail, 1000) into a text column.
    const absl::string_view stored = text::TruncateUtf8(r.detail, 1000);
    FUZZ_CHECK(text::IsValidUtf8(stored) && stored.find('\0') == absl::string_view::npos,
               absl::StrCat("poison detail is not storable text: ", absl::CHexEscape(stored)));
    if (entry.deleted) FUZZ_CHECK(r.reason == admin::inbox::PoisonReason::kDeleted, r.detail);
  }
  return 0;
}
