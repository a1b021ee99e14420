// UUID generation and validation.
//
// NewUuidV7() gives RFC 9562 version 7 UUIDs: 48-bit Unix milliseconds then
// random bits, so ids created later sort later and B-tree inserts stay local.
// Within one process ids are strictly increasing even within a millisecond
// (the 12-bit rand_a field is used as a counter). Thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ulticode::ids {

// Lowercase, hyphenated, 36 chars.
std::string NewUuidV7();
std::string NewUuidV7At(absl::Time now);

// True for a canonical 8-4-4-4-12 hex UUID (either case) of any version.
bool IsValidUuid(absl::string_view s);

// The millisecond timestamp of a v7 UUID; nullopt-like: returns false when
// `s` is not a valid v7 UUID.
bool UuidV7Time(absl::string_view s, absl::Time* out);

}  // namespace ulticode::ids
