// admin::query::DecodePageToken and DecodeListToken on arbitrary tokens.
//
// Input: the token itself, decoded against the fingerprint of fixed filters
// (the seeds are tokens issued for them). Invariants: a decoded cursor holds
// a canonical event id and a time EncodePageToken accepts, and re-encoding
// it decodes to the same cursor; a token is only good for its filters. A
// list token decodes only for its own list and fingerprint, and re-encodes
// to itself; every refusal is INVALID_ARGUMENT naming the field.
#include <cstddef>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "admin/query/list_token.h"
#include "admin/query/page_token.h"
#include "fuzz/fuzz_support.h"

using namespace ::ulticode;  // NOLINT

namespace {

uint64_t Fingerprint() {
  static const uint64_t fp = [] {
    admin::query::AuditFilters f;
    f.owner = "auth";
    f.action = "create_user";
    f.start_time = absl::FromUnixSeconds(1700000000);
    return admin::query::FilterFingerprint(f);
  }();
  return fp;
}

void ListToken(absl::string_view token) {
  using admin::query::ListKind;
  for (ListKind kind : {ListKind::kDeadInbox, ListKind::kPoison, ListKind::kCheckpoints,
                        ListKind::kLogEntries, ListKind::kWatch}) {
    auto position = admin::query::DecodeListToken("page_token", token, kind, 7);
    if (!position.ok()) {
      FUZZ_CHECK(position.status().code() == absl::StatusCode::kInvalidArgument &&
                     absl::StartsWith(position.status().message(), "page_token: "),
                 position.status().ToString());
      continue;
    }
    FUZZ_CHECK(admin::query::EncodeListToken(kind, *position, 7) == token,
               "a list token decodes but is not what Encode makes");
    FUZZ_CHECK(!admin::query::DecodeListToken("page_token", token, kind, 8).ok(),
               "a list token decoded for another request");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view token(reinterpret_cast<const char*>(data), size);
  ListToken(token);
  const uint64_t fp = Fingerprint();
  auto cursor = admin::query::DecodePageToken(token, fp);
  if (!cursor.ok()) {
    FUZZ_CHECK(cursor.status().code() == absl::StatusCode::kInvalidArgument,
               cursor.status().ToString());
    return 0;
  }
  FUZZ_CHECK(ids::IsValidUuid(cursor->event_id) &&
                 absl::AsciiStrToLower(cursor->event_id) == cursor->event_id,
             cursor->event_id);
  auto other = admin::query::DecodePageToken(token, fp ^ 1);
  FUZZ_CHECK(!other.ok() && absl::StrContains(other.status().message(), "different filter"),
             "token decoded for other filters");
  auto reencoded = admin::query::EncodePageToken(*cursor, fp);
  FUZZ_CHECK(reencoded.ok(), reencoded.status().ToString());
  auto again = admin::query::DecodePageToken(*reencoded, fp);
  FUZZ_CHECK(again.ok() && *again == *cursor, "re-encoded token decodes to another cursor");
  return 0;
}
