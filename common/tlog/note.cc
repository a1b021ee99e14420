#include "common/tlog/note.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/big_endian.h"
#include "common/base/status_macros.h"

namespace ulticode::tlog {
namespace {

constexpr absl::string_view kDash = "\xe2\x80\x94 ";  // U+2014 and a space

std::string BigEndian(uint32_t v) { return base::BigEndian<4>(v); }

uint32_t ReadBigEndian(absl::string_view b) {
  return static_cast<uint32_t>(base::ReadBigEndian<4>(b));
}

absl::Status CheckNoteKeyName(absl::string_view name) {
  if (ValidKeyName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("note key name \"", name, "\": must be non-empty, without '+' or spaces"));
}

}  // namespace

std::string CheckpointText(const Checkpoint& c) {
  std::string out =
      absl::StrCat(c.origin, "\n", c.size, "\n", absl::Base64Escape(ToBytes(c.root)), "\n");
  for (const std::string& e : c.extensions) absl::StrAppend(&out, e, "\n");
  return out;
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view text) {
  if (!absl::EndsWith(text, "\n")) {
    return absl::InvalidArgumentError("checkpoint: the text must end with a newline");
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text.substr(0, text.size() - 1), '\n');
  if (lines.size() < 3) return absl::InvalidArgumentError("checkpoint: fewer than 3 lines");
  Checkpoint c;
  c.origin = std::string(lines[0]);
  if (c.origin.empty()) return absl::InvalidArgumentError("checkpoint: empty origin line");
  // Digits only, no leading zero: one text per size.
  if (lines[1].empty() || lines[1].find_first_not_of("0123456789") != absl::string_view::npos ||
      (lines[1].size() > 1 && lines[1][0] == '0') || !absl::SimpleAtoi(lines[1], &c.size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: tree size \"", lines[1], "\" is not a decimal number"));
  }
  std::string root;
  if (!absl::Base64Unescape(lines[2], &root) || absl::Base64Escape(root) != lines[2]) {
    return absl::InvalidArgumentError("checkpoint: the root hash is not standard base64");
  }
  auto hash = FromBytes(root);
  if (!hash.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: root: ", hash.status().message()));
  }
  c.root = *hash;
  for (size_t i = 3; i < lines.size(); ++i) {
    if (lines[i].empty()) return absl::InvalidArgumentError("checkpoint: empty extension line");
    c.extensions.emplace_back(lines[i]);
  }
  return c;
}

bool ValidKeyName(absl::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (c == '+' || absl::ascii_isspace(c) || c < 0x20) return false;
  }
  return true;
}

uint32_t KeyIdOf(absl::string_view name, char type, absl::string_view raw) {
  return ReadBigEndian(crypto::Sha256(absl::StrCat(name, "\n", std::string(1, type), raw)));
}

uint32_t NoteKeyId(absl::string_view name, absl::string_view raw) {
  return KeyIdOf(name, kNoteEd25519, raw);
}

std::string FormatVerifierKey(absl::string_view name, char type, absl::string_view raw) {
  return absl::StrCat(name, "+", absl::BytesToHexString(BigEndian(KeyIdOf(name, type, raw))), "+",
                      absl::Base64Escape(absl::StrCat(std::string(1, type), raw)));
}

absl::StatusOr<std::string> VerifierKeyOf(absl::string_view name, const crypto::VerifyKey& key) {
  RETURN_IF_ERROR(CheckNoteKeyName(name));
  return FormatVerifierKey(name, kNoteEd25519, key.raw());
}

absl::StatusOr<VerifierKeyParts> ParseVerifierKey(absl::string_view vkey, char type) {
  // The base64 key may itself hold '+'.
  std::vector<absl::string_view> parts = absl::StrSplit(vkey, absl::MaxSplits('+', 2));
  if (parts.size() != 3) {
    return absl::InvalidArgumentError("verifier key: want <name>+<hex key id>+<base64 key>");
  }
  if (!ValidKeyName(parts[0])) return absl::InvalidArgumentError("verifier key: bad name");
  if (parts[1].size() != 8 ||
      parts[1].find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
    return absl::InvalidArgumentError("verifier key: the key id is not 8 hex digits");
  }
  std::string key;
  if (!absl::Base64Unescape(parts[2], &key) || key.size() != 33 || key[0] != type) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "verifier key: not a key of type 0x%02x (that byte and 32 bytes of Ed25519 key)", type));
  }
  auto verify = crypto::VerifyKey::FromRaw(key.substr(1));
  if (!verify.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("verifier key: ", verify.status().message()));
  }
  const uint32_t id = ReadBigEndian(absl::HexStringToBytes(parts[1]));
  if (id != KeyIdOf(parts[0], type, key.substr(1))) {
    return absl::InvalidArgumentError("verifier key: the key id does not match name and key");
  }
  return VerifierKeyParts{std::string(parts[0]), id, *std::move(verify)};
}

absl::StatusOr<SplitNote> SplitNoteSignatures(absl::string_view note) {
  const size_t split = note.rfind("\n\n");
  if (split == absl::string_view::npos) {
    return absl::InvalidArgumentError("note: no empty line before the signatures");
  }
  absl::string_view sigs = note.substr(split + 2);
  if (sigs.empty() || !absl::EndsWith(sigs, "\n")) {
    return absl::InvalidArgumentError("note: no signature lines");
  }
  std::vector<std::string> lines = absl::StrSplit(sigs.substr(0, sigs.size() - 1), '\n');
  return SplitNote{std::string(note.substr(0, split + 1)), std::move(lines)};
}

absl::StatusOr<NoteSignature> ParseSignatureLine(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, kDash)) {
    return absl::InvalidArgumentError("note: a signature line does not start with U+2014");
  }
  const size_t space = line.rfind(' ');
  if (space == absl::string_view::npos) {
    return absl::InvalidArgumentError("note: a signature line has no signature");
  }
  std::string sig;
  if (!absl::Base64Unescape(line.substr(space + 1), &sig) || sig.size() < 5) {
    return absl::InvalidArgumentError("note: a signature is not base64");
  }
  return NoteSignature{std::string(line.substr(0, space)), ReadBigEndian(sig), sig.substr(4)};
}

std::string SignatureLine(absl::string_view name, uint32_t key_id, absl::string_view signature) {
  return absl::StrCat(kDash, name, " ",
                      absl::Base64Escape(absl::StrCat(BigEndian(key_id), signature)), "\n");
}

absl::StatusOr<NoteSigner> NoteSigner::Create(std::string name, const crypto::SigningKey& key) {
  RETURN_IF_ERROR(CheckNoteKeyName(name));
  const uint32_t id = NoteKeyId(name, key.public_key().raw());
  return NoteSigner(std::move(name), key, id);
}

std::string NoteSigner::VerifierKey() const {
  return FormatVerifierKey(name_, kNoteEd25519, key_->public_key().raw());
}

absl::StatusOr<std::string> NoteSigner::Sign(absl::string_view text) const {
  if (text.empty() || !absl::EndsWith(text, "\n")) {
    return absl::InvalidArgumentError("note: the text must be non-empty and end with a newline");
  }
  auto signature = key_->Sign(text);
  if (!signature.ok()) return signature.status();
  return absl::StrCat(text, "\n", SignatureLine(name_, key_id_, *signature));
}

absl::StatusOr<NoteVerifier> NoteVerifier::Parse(absl::string_view vkey) {
  auto parts = ParseVerifierKey(vkey, kNoteEd25519);
  if (!parts.ok()) return parts.status();
  return NoteVerifier(std::move(parts->name), parts->key_id, std::move(parts->key));
}

absl::StatusOr<std::string> OpenNote(absl::string_view note,
                                     const std::vector<NoteVerifier>& verifiers) {
  auto split = SplitNoteSignatures(note);
  if (!split.ok()) return split.status();
  bool verified = false;
  for (const std::string& line : split->signatures) {
    auto sig = ParseSignatureLine(line);
    if (!sig.ok()) return sig.status();
    for (const NoteVerifier& v : verifiers) {
      if (v.name() != sig->name || v.key_id() != sig->key_id) continue;
      if (!v.Verify(split->text, sig->signature)) {
        return absl::FailedPreconditionError(
            absl::StrCat("note: the signature by ", sig->name, " does not verify"));
      }
      verified = true;
    }
  }
  if (!verified) return absl::FailedPreconditionError("note: no signature by a known key");
  return std::move(split->text);
}

std::vector<std::pair<int, absl::string_view>> KeyLines(absl::string_view text) {
  std::vector<std::pair<int, absl::string_view>> lines;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line[0] != '#') lines.emplace_back(n, line);
  }
  return lines;
}

absl::StatusOr<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace ulticode::tlog
