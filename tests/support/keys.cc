#include "tests/support/keys.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/tlog/cosignature.h"
#include "common/tlog/note.h"

namespace ulticode::testing {
namespace {

crypto::SigningKey NewKey() {
  auto key = crypto::SigningKey::Generate();
  if (!key.ok()) std::abort();
  return *std::move(key);
}

std::string TempDir() {
  std::string templ =
      absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", "/ulticode-keys.XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) std::abort();
  return templ;
}

}  // namespace

TestKeys::TestKeys()
    : auth_(NewKey()), app_(NewKey()), admin_(NewKey()), log_(NewKey()), dir_(TempDir()) {
  for (const auto* k : {&auth_, &app_, &admin_, &log_}) {
    const std::string party = k == &auth_  ? "auth"
                              : k == &app_ ? "app"
                              : k == &log_ ? "log"
                                           : "admin";
    if (!crypto::WriteSecretFile(KeyFile(party), k->PrivatePem().value()).ok()) std::abort();
  }
  std::ofstream(LogVerifierKeyFile()) << LogVerifierKey() << "\n";
  std::ofstream(WitnessKeysFile())
      << tlog::FormatVerifierKey("auth", tlog::kCosignatureV1Ed25519, auth_.public_key().raw())
      << "\n"
      << tlog::FormatVerifierKey("app", tlog::kCosignatureV1Ed25519, app_.public_key().raw())
      << "\n";
  public_keys_file_ = dir_ + "/public-keys";
  std::ofstream(public_keys_file_)
      << "# test keys\n"
      << Line("auth", auth_) << Line("app", app_) << Line("admin", admin_);
  auto dir = crypto::KeyDirectory::FromFile(public_keys_file_);
  auto file = crypto::KeyDirectoryFile::Open(public_keys_file_);
  if (!dir.ok() || !file.ok()) std::abort();
  directory_ = *std::move(dir);
  directory_file_ = *std::move(file);
}

TestKeys::~TestKeys() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

const crypto::SigningKey& TestKeys::owner(const std::string& name) const {
  if (name == "admin") return admin_;
  return name == "app" ? app_ : auth_;
}

std::string TestKeys::Line(const std::string& party, const crypto::SigningKey& key) {
  return absl::StrCat(party, " ", absl::Base64Escape(key.public_key().raw()), "\n");
}

std::string TestKeys::LogVerifierKey() const {
  auto signer = tlog::NoteSigner::Create(kLogOrigin, log_);
  if (!signer.ok()) std::abort();
  return signer->VerifierKey();
}

const TestKeys& SharedTestKeys() {
  static const auto* keys = new TestKeys;
  return *keys;
}

}  // namespace ulticode::testing
