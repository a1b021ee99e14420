// Redis stream ids ("<ms>-<seq>"): compared as numbers, part by part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace ulticode::redis {

// (ms, seq), or nullopt when `id` is not "<ms>-<seq>".
std::optional<std::pair<uint64_t, uint64_t>> ParseStreamId(absl::string_view id);
// a < b as stream ids; false when either is malformed.
bool StreamIdLess(absl::string_view a, absl::string_view b);
// The id right after `id` ("5-3" -> "5-4"); `id` itself when malformed.
std::string NextStreamId(absl::string_view id);
// The id right before `id` ("5-3" -> "5-2", "5-0" -> "4-18446744073709551615",
// "0-0" stays); `id` itself when malformed.
std::string PreviousStreamId(absl::string_view id);

}  // namespace ulticode::redis
