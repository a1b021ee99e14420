// A follower of Admin's audit log (AdminService/WatchAuditLogs): the rows a
// filter matches, in log order, handed to the caller one at a time, from a
// position (a resume token) on. It reconnects with back-off (reading the
// token file again) whenever a retry can fix the end of a stream: Admin
// restarting or shutting down, the stream's limits, a caller that fell
// behind, the network, or nothing heard for `idle_timeout`. With a
// verification policy it hands over a row only once the row is its own
// sealed log entry and is proved in a checkpoint that the witness policy
// accepts and that extends every checkpoint accepted before; a break ends
// it with DATA_LOSS naming the row or checkpoint. A verifying follower asks
// Admin for every leaf and applies its filter itself: a leaf it was not
// shown is one it could not prove did not match. Its place (Position) is
// the next log index and the checkpoint that proved the leaves before it,
// so a stream that does not go on at exactly that index, after a restart
// too, or a log that does not extend that checkpoint, is a break.
//
// Used by ulticode-tail (a line per row on stdout) and ulticode-forward (a
// batch per sink).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/crypto/key_directory.h"
#include "tools/client/position_file.h"
#include "tools/verify/served_row.h"
#include "ulticode/admin/v1/admin.pb.h"

namespace ulticode::client {

// What a verifying follower checks.
struct Verification {
  verify::CheckpointPolicy policy;
  std::optional<crypto::KeyDirectory> owners;  // also each row's owner seal
};

// The policy from files: the log's verifier keys (required), the
// witnesses' cosignature keys and how many must cosign (0: all), the
// owners' public keys (optional). INVALID_ARGUMENT naming the flag.
absl::StatusOr<Verification> VerificationFromFiles(const std::string& log_keys_file,
                                                   const std::string& witness_keys_file,
                                                   int64_t witness_quorum,
                                                   const std::string& owner_keys_file);

struct FollowOptions {
  std::string admin;
  std::string token_file;  // read again on each reconnect
  std::string cacert;
  admin::v1::AuditLogFilter filter;
  // Where the first stream starts: this position; else the beginning of
  // the log (from_beginning) or the head. A verifying follower needs a
  // verified position (INVALID_ARGUMENT otherwise).
  std::optional<Position> start;
  bool from_beginning = false;
  absl::Duration idle_timeout = absl::Seconds(30);
  std::optional<Verification> verification;
};

struct FollowHandlers {
  // Each row, in log order, once, with the position right after it. true:
  // go on; false: the follower stops (Run returns OK). An error stops it
  // too, and Run returns that error.
  std::function<absl::StatusOr<bool>(const admin::v1::WatchedAuditLog&, const Position& after)> row;
  // Every leaf before `position` has been handed over or did not match.
  std::function<void(const Position& position)> passed;
  // Each progress frame, as it comes (optional).
  std::function<void(const admin::v1::WatchProgress&)> progress;
  // A line about the follower's own life: reconnects, their reasons.
  std::function<void(const std::string&)> say;
};

class Follower {
 public:
  Follower(FollowOptions options, FollowHandlers handlers);
  ~Follower();

  // Follows until Stop(), a row handler's false or error, a break
  // (DATA_LOSS), or an end a retry cannot fix (a bad filter, a resume
  // token beyond the log, no permission), which it returns.
  absl::Status Run();
  // From any thread: ends the stream; Run returns OK.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ulticode::client
