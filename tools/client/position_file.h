// Where a follower of the log keeps its place: the resume token of the last
// row it handed on (client/follower.h), in a file written whole or not at
// all, also across a power loss.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ulticode::client {

// A resume token as Admin issues it: base64url, short.
bool LooksLikeToken(absl::string_view v);

// The saved position: nullopt when there is no file yet. A file that
// cannot be read or holds no token is an error (INVALID_ARGUMENT naming
// the file), never a silent start elsewhere.
absl::StatusOr<std::optional<std::string>> LoadPosition(const std::string& path);

// A new file, synced, renamed over the old one, and the directory synced.
absl::Status SavePosition(const std::string& path, const std::string& token);

}  // namespace ulticode::client
