#include "admin/query/page_token.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/ids/uuid.h"

namespace ulticode::admin::query {
namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kUuidBytes = 16;
// version + micros + uuid + fingerprint + checksum
constexpr size_t kPayloadBytes = 1 + 8 + kUuidBytes + 8 + 8;

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// The range of google.protobuf.Timestamp (0001-01-01 .. 9999-12-31), in
// Unix microseconds: a cursor outside it did not come from a row.
constexpr int64_t kMinMicros = -62135596800LL * 1000000;
constexpr int64_t kMaxMicros = 253402300799LL * 1000000 + 999999;

absl::Status Malformed() { return absl::InvalidArgumentError("page_token: malformed"); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends a field to the canonical filter encoding: a tag, then a length
// prefix, so ("ab", "c") and ("a", "bc") never collide by concatenation.
void PutField(std::string* out, char tag, absl::string_view value) {
  out->push_back(tag);
  PutU64(out, value.size());
  out->append(value.data(), value.size());
}

void PutTime(std::string* out, char tag, const std::optional<absl::Time>& t) {
  out->push_back(tag);
  if (!t.has_value()) {
    out->push_back(0);
    return;
  }
  out->push_back(1);
  // ToUnixSeconds rounds toward the infinite past, so the remainder is >= 0.
  const int64_t seconds = absl::ToUnixSeconds(*t);
  const int64_t nanos = absl::ToInt64Nanoseconds(*t - absl::FromUnixSeconds(seconds));
  PutU64(out, static_cast<uint64_t>(seconds));
  PutU64(out, static_cast<uint64_t>(nanos));
}

}  // namespace

void PutU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t GetU64(absl::string_view in) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = kFnvOffset;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

uint64_t FilterFingerprint(const AuditFilters& f) {
  std::string canonical = "audit_logs/v1";
  PutField(&canonical, 'o', f.owner);
  PutField(&canonical, 'u', f.actor);
  PutField(&canonical, 'a', f.action);
  PutField(&canonical, 't', f.entity_type);
  PutField(&canonical, 'i', f.entity_id);
  PutTime(&canonical, 'f', f.start_time);
  PutTime(&canonical, 'e', f.end_time);
  return Fnv1a64(canonical);
}

absl::StatusOr<std::string> EncodePageToken(const PageCursor& cursor, uint64_t fingerprint) {
  if (!ids::IsValidUuid(cursor.event_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page cursor event id \"", cursor.event_id, "\" is not a UUID"));
  }
  const int64_t micros = absl::ToUnixMicros(cursor.occurred_at);
  if (micros < kMinMicros || micros > kMaxMicros) {
    return absl::InvalidArgumentError("page cursor time is out of range");
  }
  std::string payload;
  payload.reserve(kPayloadBytes);
  payload.push_back(static_cast<char>(kVersion));
  PutU64(&payload, static_cast<uint64_t>(micros));
  // A valid UUID is 32 hex digits and 4 hyphens.
  for (size_t i = 0; i < cursor.event_id.size();) {
    if (cursor.event_id[i] == '-') {
      ++i;
      continue;
    }
    payload.push_back(
        static_cast<char>(HexValue(cursor.event_id[i]) << 4 | HexValue(cursor.event_id[i + 1])));
    i += 2;
  }
  PutU64(&payload, fingerprint);
  PutU64(&payload, Fnv1a64(payload));
  return absl::WebSafeBase64Escape(payload);
}

absl::StatusOr<PageCursor> DecodePageToken(absl::string_view token, uint64_t fingerprint) {
  std::string payload;
  if (token.empty() || !absl::WebSafeBase64Unescape(token, &payload)) return Malformed();
  if (payload.size() != kPayloadBytes || static_cast<uint8_t>(payload[0]) != kVersion) {
    return Malformed();
  }
  // One spelling per token: padding or stray low bits are not ours.
  if (absl::WebSafeBase64Escape(payload) != token) return Malformed();
  const absl::string_view p(payload);
  if (GetU64(p.substr(kPayloadBytes - 8)) != Fnv1a64(p.substr(0, kPayloadBytes - 8))) {
    return Malformed();
  }
  const int64_t micros = static_cast<int64_t>(GetU64(p.substr(1)));
  if (micros < kMinMicros || micros > kMaxMicros) return Malformed();
  if (GetU64(p.substr(1 + 8 + kUuidBytes)) != fingerprint) {
    return absl::InvalidArgumentError("page_token: issued for a different filter");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  PageCursor cursor;
  cursor.occurred_at = absl::FromUnixMicros(micros);
  cursor.event_id.reserve(36);
  for (size_t i = 0; i < kUuidBytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) cursor.event_id.push_back('-');
    const auto b = static_cast<uint8_t>(p[1 + 8 + i]);
    cursor.event_id.push_back(kHex[b >> 4]);
    cursor.event_id.push_back(kHex[b & 0xf]);
  }
  return cursor;
}

}  // namespace ulticode::admin::query
