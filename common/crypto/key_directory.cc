#include "common/crypto/key_directory.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log/log.h"

namespace ulticode::crypto {
namespace {}  // namespace

absl::StatusOr<KeyDirectory> KeyDirectory::Parse(absl::string_view content) {
  KeyDirectory dir;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++line_no;
    if (auto hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> words =
        absl::StrSplit(absl::StripAsciiWhitespace(line), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) continue;
    if (words.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("key directory line ", line_no, ": want \"<party> <base64 key>\""));
    }
    auto key = VerifyKey::FromBase64(words[1]);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("key directory line ", line_no, ": ", key.status().message()));
    }
    const std::string id = key->key_id();
    if (!dir.entries_.emplace(id, Entry{std::string(words[0]), *std::move(key)}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("key directory line ", line_no, ": key ", id, " is listed twice"));
    }
  }
  return dir;
}

absl::StatusOr<KeyDirectory> KeyDirectory::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("key directory ", path, " cannot be read"));
  std::stringstream buf;
  buf << in.rdbuf();
  auto dir = Parse(buf.str());
  if (!dir.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", dir.status().message()));
  }
  return dir;
}

const KeyDirectory::Entry* KeyDirectory::Find(absl::string_view key_id) const {
  auto it = entries_.find(key_id);
  return it == entries_.end() ? nullptr : &it->second;
}

const KeyDirectory::Entry* KeyDirectory::FindOf(absl::string_view party,
                                                absl::string_view key_id) const {
  const Entry* entry = Find(key_id);
  return entry != nullptr && entry->party == party ? entry : nullptr;
}

std::vector<const KeyDirectory::Entry*> KeyDirectory::OfParty(absl::string_view party) const {
  std::vector<const Entry*> out;
  for (const auto& [id, entry] : entries_) {
    if (entry.party == party) out.push_back(&entry);
  }
  return out;
}

std::string KeyDirectory::Describe() const {
  std::vector<std::string> parts;
  for (const auto& [id, e] : entries_) parts.push_back(absl::StrCat(e.party, ":", id));
  std::sort(parts.begin(), parts.end());
  return absl::StrJoin(parts, ",");
}

}  // namespace ulticode::crypto
