#include "common/audit/personal.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/audit/event.h"
#include "common/base/big_endian.h"
#include "common/base/status_macros.h"
#include "common/crypto/crypto.h"
#include "common/text/text.h"

namespace ulticode::audit {
namespace {

constexpr char kOldValue[] = "old_value";
constexpr char kNewValue[] = "new_value";
constexpr text::Rule kSubjectRule{.min_chars = 1, .max_chars = 256, .identifier = true};
constexpr text::Rule kValueRule{
    .max_chars = kMaxEventBytes, .max_bytes = kMaxEventBytes, .multiline = true};

void AppendField(absl::string_view x, std::string& out) {
  base::AppendBigEndian<4>(x.size(), out);
  out.append(x.data(), x.size());
}

const std::vector<std::string>& PersonalKeysOf(const AuditEvent& event) {
  static const auto* const kNone = new std::vector<std::string>();
  const EventTypeContract* contract = FindEventType(event.owner(), event.event_type());
  return contract == nullptr ? *kNone : contract->personal_value_keys;
}

bool IsRecordField(absl::string_view path) {
  const auto& fields = PersonalRecordFields();
  return std::find(fields.begin(), fields.end(), path) != fields.end();
}

// Whom the value at `path` is about: the caller for the call's fields, the
// record's subject (or, without one, its entity) for the values.
std::string SubjectOf(const AuditRecord& record, absl::string_view path) {
  if (IsRecordField(path)) return record.actor();
  return record.subject().empty() ? record.entity_id() : record.subject();
}

const google::protobuf::FieldDescriptor* RecordField(absl::string_view name) {
  return AuditRecord::descriptor()->FindFieldByName(std::string(name));
}

google::protobuf::Struct* ValuesOf(AuditRecord& record, absl::string_view path, std::string* key) {
  for (const char* which : {kOldValue, kNewValue}) {
    const std::string prefix = absl::StrCat(which, ".");
    if (!absl::StartsWith(path, prefix)) continue;
    *key = std::string(path.substr(prefix.size()));
    return which == kOldValue ? record.mutable_old_value() : record.mutable_new_value();
  }
  return nullptr;
}

absl::Status MoveOut(const std::string& event_id, AuditRecord& record, const std::string& path,
                     std::string value, PersonalValues& out) {
  PersonalValue* v = out.add_values();
  v->set_path(path);
  v->set_salt(crypto::RandomBytes(kPersonalSaltBytes));
  v->set_value(std::move(value));
  PersonalCommitment* c = record.add_personal();
  c->set_path(path);
  c->set_subject(SubjectOf(record, path));
  c->set_commitment(Commitment(event_id, path, c->subject(), v->salt(), v->value()));
  return absl::OkStatus();
}

absl::Status MoveOutValues(const std::string& event_id, AuditRecord& record, const char* which,
                           google::protobuf::Struct* values, const std::vector<std::string>& keys,
                           PersonalValues& out) {
  for (const std::string& key : keys) {
    auto it = values->mutable_fields()->find(key);
    if (it == values->mutable_fields()->end()) continue;
    const std::string path = absl::StrCat(which, ".", key);
    if (it->second.kind_case() != google::protobuf::Value::kStringValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("record.", path, " is personal and must be a string"));
    }
    std::string value = std::move(*it->second.mutable_string_value());
    values->mutable_fields()->erase(it);
    RETURN_IF_ERROR(MoveOut(event_id, record, path, std::move(value), out));
  }
  return absl::OkStatus();
}

absl::Status CheckNoneEmbedded(const AuditEvent& event) {
  const AuditRecord& r = event.record();
  for (const std::string& name : PersonalRecordFields()) {
    if (!r.GetReflection()->GetString(r, RecordField(name)).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("record.", name, " is personal: schema_version ", event.schema_version(),
                       " carries its commitment, not the value"));
    }
  }
  for (const std::string& key : PersonalKeysOf(event)) {
    for (const auto& [which, values] :
         {std::pair{kOldValue, &r.old_value()}, std::pair{kNewValue, &r.new_value()}}) {
      if (values->fields().contains(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("record.", which, ".", key, " is personal: schema_version ",
                         event.schema_version(), " carries its commitment, not the value"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& PersonalRecordFields() {
  static const auto* const kFields = [] {
    auto* fields = new std::vector<std::string>();
    const auto* d = AuditRecord::descriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const auto* f = d->field(i);
      if (f->options().GetExtension(v1::personal_data)) fields->push_back(f->name());
    }
    std::sort(fields->begin(), fields->end());
    return fields;
  }();
  return *kFields;
}

std::vector<std::string> PersonalPaths(const AuditEvent& event) {
  std::vector<std::string> paths = PersonalRecordFields();
  for (const std::string& key : PersonalKeysOf(event)) {
    paths.push_back(absl::StrCat(kOldValue, ".", key));
    paths.push_back(absl::StrCat(kNewValue, ".", key));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::Status ValidateSubject(absl::string_view field, absl::string_view subject) {
  return text::Check(field, subject, kSubjectRule);
}

std::string Commitment(absl::string_view event_id, absl::string_view path,
                       absl::string_view subject, absl::string_view salt, absl::string_view value) {
  std::string message(kPersonalCommitmentDomain);
  for (absl::string_view x : {event_id, path, subject, salt, value}) AppendField(x, message);
  return crypto::Sha256(message);
}

absl::StatusOr<PersonalValues> CommitPersonalData(AuditEvent& event) {
  if (event.schema_version() != kEmbeddedPersonalDataSchemaVersion) {
    return absl::InvalidArgumentError(absl::StrCat("schema_version ", event.schema_version(),
                                                   " has no embedded personal values to commit"));
  }
  PersonalValues out;
  AuditRecord& r = *event.mutable_record();
  const std::string& id = event.event_id();
  for (const std::string& name : PersonalRecordFields()) {
    const auto* field = RecordField(name);
    std::string value = r.GetReflection()->GetString(r, field);
    if (value.empty()) continue;
    r.GetReflection()->SetString(&r, field, "");
    RETURN_IF_ERROR(MoveOut(id, r, name, std::move(value), out));
  }
  const std::vector<std::string>& keys = PersonalKeysOf(event);
  if (r.has_old_value()) {
    RETURN_IF_ERROR(MoveOutValues(id, r, kOldValue, r.mutable_old_value(), keys, out));
  }
  if (r.has_new_value()) {
    RETURN_IF_ERROR(MoveOutValues(id, r, kNewValue, r.mutable_new_value(), keys, out));
  }
  std::sort(r.mutable_personal()->begin(), r.mutable_personal()->end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  std::sort(out.mutable_values()->begin(), out.mutable_values()->end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  event.set_schema_version(kSchemaVersion);
  return out;
}

absl::Status ValidatePersonalData(const AuditEvent& event) {
  const AuditRecord& r = event.record();
  if (event.schema_version() == kEmbeddedPersonalDataSchemaVersion) {
    if (r.personal_size() == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "record.personal: schema_version 1 embeds personal values and has no commitments");
  }
  RETURN_IF_ERROR(CheckNoneEmbedded(event));
  const std::vector<std::string> paths = PersonalPaths(event);
  std::string previous;
  for (int i = 0; i < r.personal_size(); ++i) {
    const PersonalCommitment& c = r.personal(i);
    const std::string where = absl::StrCat("record.personal[", i, "]");
    if (!std::binary_search(paths.begin(), paths.end(), c.path())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"", c.path().substr(0, 64),
                                                     "\" is not a personal path of ",
                                                     event.event_type()));
    }
    if (i > 0 && c.path() <= previous) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": paths must be unique and in order"));
    }
    previous = c.path();
    RETURN_IF_ERROR(ValidateSubject(absl::StrCat(where, ".subject"), c.subject()));
    if (c.subject() != SubjectOf(r, c.path())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".subject: a value at ", c.path(), " is about ",
                       IsRecordField(c.path()) ? "the actor" : "the record's subject"));
    }
    if (c.commitment().size() != crypto::kSha256Bytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".commitment: not 32 bytes"));
    }
  }
  return absl::OkStatus();
}

const PersonalCommitment* FindCommitment(const AuditEvent& event, absl::string_view path) {
  for (const PersonalCommitment& c : event.record().personal()) {
    if (c.path() == path) return &c;
  }
  return nullptr;
}

std::vector<PersonalValue> OpenCommitments(const AuditEvent& event, const PersonalValues& values,
                                           std::vector<std::string>* refused) {
  absl::flat_hash_set<std::string> seen;
  std::vector<PersonalValue> opened;
  auto refuse = [&](const PersonalValue& v, absl::string_view why) {
    if (refused != nullptr) refused->push_back(absl::StrCat(v.path().substr(0, 64), ": ", why));
  };
  for (const PersonalValue& v : values.values()) {
    const PersonalCommitment* c = FindCommitment(event, v.path());
    if (c == nullptr) {
      refuse(v, "the envelope has no commitment at this path");
    } else if (!seen.insert(v.path()).second) {
      refuse(v, "a second value for one path");
    } else if (v.salt().size() != kPersonalSaltBytes) {
      refuse(v, "the salt is not 32 bytes");
    } else if (!text::Check("value", v.value(), kValueRule).ok()) {
      refuse(v, "the value is not text a record may hold");
    } else if (!crypto::ConstantTimeEquals(
                   Commitment(event.event_id(), v.path(), c->subject(), v.salt(), v.value()),
                   c->commitment())) {
      refuse(v, "the value does not open its commitment");
    } else {
      opened.push_back(v);
    }
  }
  std::sort(opened.begin(), opened.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return opened;
}

void RestorePersonalValues(const std::vector<PersonalValue>& values, AuditRecord& record) {
  for (const PersonalValue& v : values) {
    if (const auto* field = RecordField(v.path()); field != nullptr && IsRecordField(v.path())) {
      record.GetReflection()->SetString(&record, field, v.value());
      continue;
    }
    std::string key;
    if (google::protobuf::Struct* s = ValuesOf(record, v.path(), &key); s != nullptr) {
      (*s->mutable_fields())[key].set_string_value(v.value());
    }
  }
}

}  // namespace ulticode::audit
