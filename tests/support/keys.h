// Ed25519 keys for tests: one signing key each for auth, app and admin, and
// Admin's transparency log key ("log": KeyFile("log"), LogVerifierKey()),
// written as 0600 PEM files with a public key directory beside them in a
// fresh temporary directory (what run-local keeps under .state/secrets/).
#pragma once

#include <memory>
#include <string>

#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"

namespace ulticode::testing {

class TestKeys {
 public:
  TestKeys();
  ~TestKeys();  // removes its directory

  const crypto::SigningKey& auth() const { return auth_; }
  const crypto::SigningKey& app() const { return app_; }
  const crypto::SigningKey& admin() const { return admin_; }
  const crypto::SigningKey& log() const { return log_; }
  // The log key's c2sp.org/signed-note verifier key under kLogOrigin.
  std::string LogVerifierKey() const;
  // A file holding LogVerifierKey() (what owners and auditors are given).
  std::string LogVerifierKeyFile() const { return dir_ + "/log.vkey"; }
  static constexpr char kLogOrigin[] = "ulticode.test/audit";
  // The witnessing owners' cosignature verifier keys (auth, app), a line
  // each: what --witness-keys-file takes.
  std::string WitnessKeysFile() const { return dir_ + "/witnesses.vkey"; }
  // The signing key of an owner by name ("auth" / "app").
  const crypto::SigningKey& owner(const std::string& name) const;

  const std::string& dir() const { return dir_; }
  std::string KeyFile(const std::string& party) const { return dir_ + "/" + party + ".key"; }
  const std::string& public_keys_file() const { return public_keys_file_; }
  // The directory as loaded from public_keys_file().
  const crypto::KeyDirectory& directory() const { return directory_; }
  const crypto::KeyDirectoryFile& directory_file() const { return *directory_file_; }
  // A directory line for `key` as `party`.
  static std::string Line(const std::string& party, const crypto::SigningKey& key);

 private:
  crypto::SigningKey auth_, app_, admin_, log_;
  std::string dir_;
  std::string public_keys_file_;
  crypto::KeyDirectory directory_;
  std::unique_ptr<crypto::KeyDirectoryFile> directory_file_;
};

// One set of keys per test process (tests that do not care which).
const TestKeys& SharedTestKeys();

}  // namespace ulticode::testing
