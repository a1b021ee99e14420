// Where a follower of the log keeps its place (client/follower.h), in a file
// written whole or not at all, also across a power loss.
//
// A verifying follower's place is a place in the log it verified: Admin's
// resume token, the log index the next leaf must have, and the checkpoint
// that proved every leaf before it. On the next start the stream must go on
// at exactly that index, in a log consistent with that checkpoint: Admin's
// opaque token is only where to ask, never what to believe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ulticode/admin/v1/audit_log.pb.h"

namespace ulticode::client {

struct Position {
  std::string token;  // Admin's resume token
  // Verified follows only: every leaf before `next_index` was handed over
  // or did not match, each proved in `checkpoint` (absent while the log
  // had no checkpoint the policy accepts: nothing was handed over yet).
  std::optional<uint64_t> next_index;
  std::optional<admin::v1::SignedCheckpoint> checkpoint;

  bool verified() const { return next_index.has_value(); }
};

// A resume token as Admin issues it: base64url, short.
bool LooksLikeToken(absl::string_view v);

// The file's text: "ulticode-position/v1", then `token T`, and for a
// verified place `next N` and `checkpoint B` (B: base64 of the
// SignedCheckpoint's protobuf encoding), a line each.
std::string PositionText(const Position& position);
// INVALID_ARGUMENT naming the line that is wrong. A file holding only a
// token (what an unverified follower wrote before this format) is a place
// without verification.
absl::StatusOr<Position> ParsePosition(absl::string_view text);

// The saved position: nullopt when there is no file yet. A file that
// cannot be read or parsed is an error (INVALID_ARGUMENT naming the file),
// never a silent start elsewhere.
absl::StatusOr<std::optional<Position>> LoadPosition(const std::string& path);

// A new file, synced, renamed over the old one, and the directory synced.
absl::Status SavePosition(const std::string& path, const Position& position);
// The same for any small text file (a sink's stop mark).
absl::Status SaveFile(const std::string& path, absl::string_view text);

}  // namespace ulticode::client
