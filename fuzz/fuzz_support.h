// Shared pieces of the libFuzzer targets (and of corpus_gen, which writes
// their seed corpora with the same encoders): fixed Ed25519 keys and the key
// directory that lists them, the byte format a fuzz input is decoded from, a
// fixed clock, and FUZZ_CHECK for invariants of the code under test.
//
// The keys are derived from constant seeds (SHA-256 of a label), so they are
// the same in every run and the committed corpus holds correctly signed
// entries. They sign nothing outside fuzzing: never list them anywhere else.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/audit/event.h"
#include "common/crypto/crypto.h"
#include "common/crypto/key_directory.h"
#include "common/ids/uuid.h"
#include "common/redis/redis_client.h"
#include "common/text/text.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"

// An invariant of the code under test is broken: report and abort, which
// libFuzzer records as a crash (with the input that caused it).
#define FUZZ_CHECK(cond, what)                                                                \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                                \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

namespace ulticode::fuzz {

// Admin's clock in every target (2025-06-15T15:06:40Z): results must not
// depend on when the fuzzer runs, or a corpus entry would change meaning.
inline absl::Time Now() { return absl::FromUnixSeconds(1750000000); }

// A PKCS#8 PEM Ed25519 private key whose 32-byte seed is SHA-256(label).
inline std::string FixedPem(absl::string_view label) {
  static constexpr char kPkcs8Prefix[] =
      "\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20";
  const std::string der = absl::StrCat(absl::string_view(kPkcs8Prefix, sizeof(kPkcs8Prefix) - 1),
                                       crypto::Sha256(absl::StrCat("ulticode fuzz key: ", label)));
  return absl::StrCat("-----BEGIN PRIVATE KEY-----\n", absl::Base64Escape(der),
                      "\n-----END PRIVATE KEY-----\n");
}

struct FixedKeys {
  crypto::SigningKey auth;
  crypto::SigningKey app;
  crypto::SigningKey admin;
  crypto::KeyDirectory directory;  // "auth", "app" and "admin", one key each

  const crypto::SigningKey& owner(audit::Owner owner) const {
    return owner == audit::v1::OWNER_APP ? app : auth;
  }
};

// SigningKey::Sign with a fixed key, which does not fail: a failure aborts.
inline std::string MustSign(const crypto::SigningKey& key, absl::string_view message) {
  auto signature = key.Sign(message);
  FUZZ_CHECK(signature.ok(), signature.status().ToString());
  return *std::move(signature);
}

inline crypto::SigningKey MustKey(absl::string_view label) {
  auto key = crypto::SigningKey::FromPem(FixedPem(label));
  FUZZ_CHECK(key.ok(), key.status().ToString());
  return *std::move(key);
}

// Protobuf logs every string field that is not UTF-8 as it parses one to
// stderr: most fuzz inputs. Those lines say nothing a failing input would
// not, and writing them is most of a run (a stalled stderr stalls the
// fuzzer): the targets that parse protobuf drop them.
inline void QuietProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

inline const FixedKeys& Keys() {
  static const FixedKeys* keys = [] {
    crypto::SigningKey auth = MustKey("auth"), app = MustKey("app"), admin = MustKey("admin");
    auto dir = crypto::KeyDirectory::Parse(
        absl::StrCat("# fuzz-only keys\n",                                        //
                     "auth ", absl::Base64Escape(auth.public_key().raw()), "\n",  //
                     "app ", absl::Base64Escape(app.public_key().raw()), "\n",    //
                     "admin ", absl::Base64Escape(admin.public_key().raw()), "\n"));
    FUZZ_CHECK(dir.ok() && dir->size() == 3, dir.status().ToString());
    return new FixedKeys{std::move(auth), std::move(app), std::move(admin), *std::move(dir)};
  }();
  return *keys;
}

// The input format of the stream-entry targets:
//   header (1 byte), then fields { u16le name length, name, u16le value length, value }*
// A length past the end of the input takes what is left, so every byte
// string decodes to something (no input is wasted on a framing error).
inline uint8_t DecodeFields(const uint8_t* data, size_t size, redis::StreamFields* fields) {
  fields->clear();
  if (size == 0) return 0;
  const uint8_t header = data[0];
  size_t pos = 1;
  auto take = [&](std::string* out) -> bool {
    if (size - pos < 2) {
      pos = size;
      return false;
    }
    size_t len = data[pos] | (static_cast<size_t>(data[pos + 1]) << 8);
    pos += 2;
    if (len > size - pos) len = size - pos;
    out->assign(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    return true;
  };
  while (pos < size) {
    std::string name, value;
    if (!take(&name)) break;
    take(&value);
    fields->emplace_back(std::move(name), std::move(value));
  }
  return header;
}

inline std::string EncodeFields(uint8_t header, const redis::StreamFields& fields) {
  std::string out(1, static_cast<char>(header));
  auto put = [&](const std::string& s) {
    const size_t len = s.size() > 0xffff ? 0xffff : s.size();
    out.push_back(static_cast<char>(len & 0xff));
    out.push_back(static_cast<char>(len >> 8));
    out.append(s, 0, len);
  };
  for (const auto& [name, value] : fields) {
    put(name);
    put(value);
  }
  return out;
}

// True when JSON text holds the escape \u0000 (which jsonb refuses); an
// escaped backslash followed by "u0000" is text, not that escape.
inline bool HasJsonNulEscape(absl::string_view json) {
  for (size_t i = 0; i + 1 < json.size(); ++i) {
    if (json[i] != '\\') continue;
    if (json[i + 1] == 'u' && json.substr(i + 2, 4) == "0000") return true;
    ++i;  // skip the escaped character
  }
  return false;
}

// The promise of audit::Validate ("an event that validates here is always
// written by Admin"), checked on what Admin's audit_logs writer does with an
// event before it reaches PostgreSQL (admin/audit_logs/writer.cc; the
// conversion is private there and needs a transaction, so it is mirrored):
// old/new values print as JSON that jsonb accepts (no \u0000), every text
// column is valid UTF-8 without NUL, and occurred_at formats as RFC 3339.
inline void CheckStorable(const audit::AuditEvent& e) {
  const auto& r = e.record();
  for (const google::protobuf::Struct* s : {r.has_old_value() ? &r.old_value() : nullptr,
                                            r.has_new_value() ? &r.new_value() : nullptr}) {
    if (s == nullptr) continue;
    std::string json;
    const auto status = google::protobuf::util::MessageToJsonString(*s, &json);
    FUZZ_CHECK(status.ok(), absl::StrCat("validated value does not print as JSON: ",
                                         std::string(status.message())));
    FUZZ_CHECK(!HasJsonNulEscape(json), "validated value prints as JSON holding \\u0000");
    FUZZ_CHECK(text::IsValidUtf8(json), "validated value prints as invalid UTF-8");
  }
  FUZZ_CHECK(ids::IsValidUuid(e.event_id()), e.event_id());
  FUZZ_CHECK(!audit::OwnerName(e.owner()).empty(), "validated event has no owner");
  for (const std::string* s :
       {&e.event_type(), &r.actor(), &r.subject(), &r.action(), &r.entity_type(), &r.entity_id(),
        &r.client_ip(), &r.user_agent(), &r.request_id(), &r.trace_id()}) {
    FUZZ_CHECK(text::IsValidUtf8(*s) && s->find('\0') == std::string::npos,
               absl::StrCat("validated text column is not storable: ", absl::CHexEscape(*s)));
  }
  const absl::Time at =
      absl::FromUnixSeconds(e.occurred_at().seconds()) + absl::Nanoseconds(e.occurred_at().nanos());
  const std::string rfc = absl::FormatTime(absl::RFC3339_full, at, absl::UTCTimeZone());
  absl::Time back;
  std::string err;
  FUZZ_CHECK(absl::ParseTime(absl::RFC3339_full, rfc, &back, &err) && back == at,
             absl::StrCat("occurred_at does not round-trip through RFC 3339: ", rfc));
}

}  // namespace ulticode::fuzz
