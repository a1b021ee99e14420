// Opaque keyset page tokens for QueryAuditLogs.
//
// A token carries the position after the last row of a page, (occurred_at,
// event_id) in the query's newest-first order, and a fingerprint of the
// filters the page was read with, so a token cannot be replayed against
// another query (its position would be meaningless there).
//
// Wire form: base64url (no padding) of
//   version (1 byte) | occurred_at Unix micros (int64, big-endian)
//   | event_id (16 bytes) | filter fingerprint (uint64, BE) | checksum (uint64, BE)
// The checksum (FNV-1a of everything before it) catches truncated, mangled
// or hand-edited tokens; it is not a signature. A forged token can only move
// the cursor within the same filters, which grants nothing a caller could not
// read by paging anyway.
//
// The fingerprint is FNV-1a over a canonical, length-prefixed encoding of the
// filters: stable across processes and releases (never absl::Hash, which is
// seeded per process), so a token issued by one replica works on another.
//
// Pure functions, no I/O; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "admin/query/audit_rows.h"

namespace ulticode::admin::query {

// Position in (occurred_at DESC, event_id DESC) order: the last row returned.
struct PageCursor {
  absl::Time occurred_at;  // microsecond precision
  std::string event_id;    // lowercase, hyphenated UUID

  bool operator==(const PageCursor&) const = default;
};

// Stable 64-bit FNV-1a fingerprint of `filters`.
uint64_t FilterFingerprint(const AuditFilters& filters);

// 64-bit FNV-1a of `bytes` (exposed for tests and list tokens).
uint64_t Fnv1a64(absl::string_view bytes);

// A uint64 as 8 big-endian bytes in a token, and back (`in` has at least 8).
void PutU64(std::string* out, uint64_t v);
uint64_t GetU64(absl::string_view in);

// Encodes `cursor` for queries with `fingerprint`. InvalidArgument when the
// cursor's event id is not a UUID (a bug in the caller: ids come from rows).
absl::StatusOr<std::string> EncodePageToken(const PageCursor& cursor, uint64_t fingerprint);

// Decodes a token from a request. InvalidArgument "page_token: malformed"
// for anything that is not a token this code issued (bad base64, wrong length,
// unknown version, checksum mismatch, out-of-range time, a second spelling),
// and "page_token: issued for a different filter" when its fingerprint is not
// `fingerprint`.
absl::StatusOr<PageCursor> DecodePageToken(absl::string_view token, uint64_t fingerprint);

}  // namespace ulticode::admin::query
