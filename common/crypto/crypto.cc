#include "common/crypto/crypto.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/crypto/openssl_ptr.h"

namespace ulticode::crypto {
namespace {

constexpr size_t kMaxSecretBytes = 64 * 1024;

// The reason of the oldest error on this thread's OpenSSL error queue, which
// is then cleared so a later error is not blamed on this one.
std::string TakeOpensslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no OpenSSL error recorded";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

absl::StatusOr<std::string> RawPublicKey(EVP_PKEY* key) {
  std::string raw(kEd25519PublicKeyBytes, '\0');
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1 ||
      len != kEd25519PublicKeyBytes) {
    return absl::InvalidArgumentError("not an Ed25519 key");
  }
  return raw;
}

}  // namespace

std::string HmacSha256(absl::string_view key, absl::string_view data) {
  std::string out(kSha256Bytes, '\0');
  size_t len = 0;
  // As for Sha256: fails only when OpenSSL cannot allocate.
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.data(), key.size(),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(),
                reinterpret_cast<unsigned char*>(out.data()), out.size(), &len) == nullptr ||
      len != kSha256Bytes) {
    std::abort();
  }
  return out;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::abort();
  }
  return out;
}

std::string Sha256(absl::string_view data) {
  std::string out(kSha256Bytes, '\0');
  unsigned int len = 0;
  // SHA-256 of bytes in memory fails only when OpenSSL cannot allocate: the
  // impossible, where going on with a wrong digest would be worse than stopping.
  if (EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &len,
                 EVP_sha256(), nullptr) != 1 ||
      len != kSha256Bytes) {
    std::abort();
  }
  return out;
}

namespace {

bool InOurGroups(gid_t gid) {
  if (gid == ::getegid()) return true;
  gid_t groups[256];
  const int n = ::getgroups(256, groups);
  return std::find(groups, groups + std::max(n, 0), gid) != groups + std::max(n, 0);
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("secret file ", path, " cannot be opened: ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("secret file ", path, " is not a file"));
  }
  // As PostgreSQL does for its key files: a file of root's may also be read
  // by its group, if that group is one of ours. Kubernetes mounts Secrets
  // that way (root-owned, mode 0440, the pod's fsGroup), and only root can
  // make such a file.
  const mode_t forbidden = st.st_uid == 0 && InOurGroups(st.st_gid) ? 037 : 077;
  if ((st.st_mode & forbidden) != 0) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrFormat(
        "secret file %s has mode %04o: group and others must have no access (chmod 600; a "
        "root-owned file may be group-readable, 640)",
        path, st.st_mode & 07777));
  }
  if (static_cast<size_t>(st.st_size) > kMaxSecretBytes) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("secret file ", path, " is larger than ", kMaxSecretBytes, " bytes"));
  }
  std::string content(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(
          absl::StrCat("secret file ", path, " cannot be read: ", std::strerror(err)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  content.resize(got);
  absl::string_view v = content;
  if (!absl::ConsumeSuffix(&v, "\r\n")) absl::ConsumeSuffix(&v, "\n");
  if (v.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("secret file ", path, " is empty"));
  }
  return std::string(v);
}

absl::Status WriteSecretFile(const std::string& path, absl::string_view content) {
  // Written aside and renamed over: readers never see half a secret, and a
  // link planted at `path` is replaced, not followed.
  const std::string tmp = absl::StrCat(path, ".tmp");
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  bool ok = ::fchmod(fd, 0600) == 0;
  size_t done = 0;
  while (ok && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

std::string KeyIdOf(absl::string_view raw_public_key) {
  return absl::BytesToHexString(Sha256(raw_public_key).substr(0, 8));
}

VerifyKey::VerifyKey(std::shared_ptr<EVP_PKEY> key, std::string raw)
    : key_(std::move(key)), raw_(std::move(raw)), key_id_(KeyIdOf(raw_)) {}

namespace {

// The encodings of the Ed25519 points of small order (libsodium's list; the
// sign bit is ignored): 0 and 1, the two points of order 8, and p - 1, p,
// p + 1. Such a key verifies signatures nobody made (the identity with
// R = identity, s = 0 verifies every message).
bool HasSmallOrder(absl::string_view raw) {
  static const unsigned char kBlocklist[][32] = {
      {0x00},
      {0x01},
      {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4,
       0x89, 0xf2, 0xef, 0x98, 0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6,
       0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
      {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b,
       0x76, 0x0d, 0x10, 0x67, 0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39,
       0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
      {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
      {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
      {0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
  };
  const auto* s = reinterpret_cast<const unsigned char*>(raw.data());
  for (const auto& bad : kBlocklist) {
    unsigned char diff = (s[31] & 0x7f) ^ bad[31];
    for (int j = 0; j < 31; ++j) diff |= s[j] ^ bad[j];
    if (diff == 0) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<VerifyKey> VerifyKey::FromRaw(absl::string_view raw) {
  if (raw.size() != kEd25519PublicKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an Ed25519 public key is ", kEd25519PublicKeyBytes, " bytes, not ", raw.size()));
  }
  if (HasSmallOrder(raw)) {
    return absl::InvalidArgumentError(
        "not a usable Ed25519 public key: a point of small order verifies forged signatures");
  }
  EvpPkeyPtr key(EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
  if (key == nullptr) return absl::InvalidArgumentError("not a valid Ed25519 public key");
  return VerifyKey(std::move(key), std::string(raw));
}

absl::StatusOr<VerifyKey> VerifyKey::FromBase64(absl::string_view b64) {
  std::string raw;
  if (!absl::Base64Unescape(b64, &raw)) {
    return absl::InvalidArgumentError("public key is not base64");
  }
  return FromRaw(raw);
}

bool VerifyKey::Verify(absl::string_view message, absl::string_view signature) const {
  if (signature.size() != kEd25519SignatureBytes) return false;
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr ||
      EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

SigningKey::SigningKey(std::shared_ptr<EVP_PKEY> key, VerifyKey public_key)
    : key_(std::move(key)), public_key_(std::move(public_key)) {}

absl::StatusOr<SigningKey> SigningKey::Generate() {
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (key == nullptr) return absl::InternalError("Ed25519 key generation failed");
  auto pub_raw = RawPublicKey(key.get());
  if (!pub_raw.ok()) return pub_raw.status();
  auto pub = VerifyKey::FromRaw(*pub_raw);
  if (!pub.ok()) return pub.status();
  return SigningKey(std::move(key), *std::move(pub));
}

absl::StatusOr<SigningKey> SigningKey::FromPem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  // An encrypted key is refused rather than prompting on a terminal.
  auto no_password = [](char*, int, int, void*) { return 0; };
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr));
  if (key == nullptr || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError("not a PEM Ed25519 private key");
  }
  auto pub_raw = RawPublicKey(key.get());
  if (!pub_raw.ok()) return pub_raw.status();
  auto pub = VerifyKey::FromRaw(*pub_raw);
  if (!pub.ok()) return pub.status();
  return SigningKey(std::move(key), *std::move(pub));
}

absl::StatusOr<SigningKey> SigningKey::FromFile(const std::string& path) {
  auto pem = ReadSecretFile(path);
  if (!pem.ok()) return pem.status();
  auto key = FromPem(*pem);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("key file ", path, ": ", key.status().message()));
  }
  return key;
}

absl::StatusOr<std::string> SigningKey::Sign(absl::string_view message) const {
  if (key_ == nullptr) {
    return absl::FailedPreconditionError("Ed25519 signing: the signing key is empty (moved from)");
  }
  auto failed = [&](absl::string_view call) {
    return absl::InternalError(absl::StrCat("Ed25519 signing with key ", key_id(), ": ", call,
                                            " failed: ", TakeOpensslError()));
  };
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr) return failed("EVP_MD_CTX_new");
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1) {
    return failed("EVP_DigestSignInit");
  }
  std::string sig(kEd25519SignatureBytes, '\0');
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    return failed("EVP_DigestSign");
  }
  if (len != kEd25519SignatureBytes) {
    return absl::InternalError(absl::StrCat("Ed25519 signing with key ", key_id(), ": ", len,
                                            "-byte signature, not ", kEd25519SignatureBytes));
  }
  return sig;
}

absl::StatusOr<std::string> SigningKey::DeriveSecret(absl::string_view label) const {
  if (key_ == nullptr) {
    return absl::FailedPreconditionError("key derivation: the signing key is empty (moved from)");
  }
  unsigned char seed[32];
  size_t len = sizeof(seed);
  if (EVP_PKEY_get_raw_private_key(key_.get(), seed, &len) != 1 || len != sizeof(seed)) {
    OPENSSL_cleanse(seed, sizeof(seed));
    return absl::InternalError(
        absl::StrCat("key derivation with key ", key_id(),
                     ": EVP_PKEY_get_raw_private_key failed: ", TakeOpensslError()));
  }
  std::string out = HmacSha256(absl::string_view(reinterpret_cast<char*>(seed), len), label);
  OPENSSL_cleanse(seed, sizeof(seed));
  return out;
}

absl::StatusOr<std::string> SigningKey::PrivatePem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key_.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return absl::InternalError(absl::StrCat("PEM_write_bio_PrivateKey failed for key ", key_id()));
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace ulticode::crypto
