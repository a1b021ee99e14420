// Opaque page tokens of Admin's numbered lists (ListDeadInbox, ListPoison,
// ListCheckpoints, ListLogEntries) and the resume tokens of WatchAuditLogs:
// a position in a list ordered by a number, bound to the request it was
// issued for.
//
// Wire form: base64url (no padding) of
//   version (1) | kind (1) | position (uint64, BE) | request fingerprint (uint64, BE)
//   | checksum (FNV-1a of everything before it, uint64, BE)
// The kind keeps a token of one list from being used on another; the
// fingerprint (of the request's filter fields) from being used with other
// filters. A watch's resume token has fingerprint 0: it is a position in
// the log, shared by every watcher's row frames. Like the audit query's token, it is not a
// signature: a forged token only moves the position within what the caller may list anyway.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ulticode::admin::query {

enum class ListKind : char {
  kDeadInbox = 'd',
  kPoison = 'p',
  kCheckpoints = 'c',
  kLogEntries = 'e',
  kWatch = 'w',
};

std::string EncodeListToken(ListKind kind, uint64_t position, uint64_t fingerprint);

// The position of a token issued by EncodeListToken(kind, ..., fingerprint).
// INVALID_ARGUMENT "<field>: malformed" for anything else, "<field>: issued
// for another request" for a token of another list or other filters.
absl::StatusOr<uint64_t> DecodeListToken(absl::string_view field, absl::string_view token,
                                         ListKind kind, uint64_t fingerprint);

}  // namespace ulticode::admin::query
