// Who holds which public key: the key directory that lets Admin verify event
// signatures (keys of "auth" and "app"), owners' cosignatures and Admin's
// own records (keys of "admin"), with several keys per party at once so
// keys rotate without downtime.
//
// File format, one key a line ('#' starts a comment, blank lines ignored):
//
//   <party> <base64 of the 32 raw bytes of an Ed25519 public key>
//
//   auth  nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=
//
// The key id is derived from the key (crypto::KeyIdOf), so it cannot disagree
// with the signer's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config/watched_file.h"
#include "common/crypto/crypto.h"

namespace ulticode::crypto {

class KeyDirectory {
 public:
  struct Entry {
    std::string party;
    VerifyKey key;
  };

  // INVALID_ARGUMENT naming the line for anything malformed or a key listed
  // twice.
  static absl::StatusOr<KeyDirectory> Parse(absl::string_view content);
  static absl::StatusOr<KeyDirectory> FromFile(const std::string& path);

  // The entry of `key_id`, or null.
  const Entry* Find(absl::string_view key_id) const;
  // The entry of `key_id` when it is `party`'s, or null.
  const Entry* FindOf(absl::string_view party, absl::string_view key_id) const;
  // Every entry of `party`.
  std::vector<const Entry*> OfParty(absl::string_view party) const;
  size_t size() const { return entries_.size(); }
  // "auth:1a2b...,app:..." for start-up logs.
  std::string Describe() const;

 private:
  absl::flat_hash_map<std::string, Entry> entries_;
};

// The key directory file, re-read when it changes (a key added or removed on
// disk takes effect without a restart).
using KeyDirectoryFile = config::WatchedFile<KeyDirectory>;

}  // namespace ulticode::crypto
