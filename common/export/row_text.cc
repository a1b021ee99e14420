#include "common/export/row_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/base/status_macros.h"
#include "common/tlog/leaf.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "ulticode/audit/v1/audit.pb.h"

namespace ulticode::exports {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using google::protobuf::util::TimeUtil;

// One exported row's fields, in column order: what the leaf proves, with
// its personal values in place.
struct Fields {
  uint64_t log_index = 0;
  audit::v1::AuditEvent event;
  std::string owner;
  std::string key_id;
  std::string personal = "[]";  // JSON: each commitment, its path and state
};

using LogValue = admin::v1::AuditLog::PersonalValue;

const char* StateName(LogValue::State state) {
  switch (state) {
    case LogValue::STATE_PRESENT:
      return "present";
    case LogValue::STATE_ERASED:
      return "erased";
    case LogValue::STATE_NOT_HELD:
      return "not_held";
    default:
      return "unspecified";
  }
}

std::string PersonalJson(const PersonalValues& personal) {
  std::vector<std::string> items;
  for (const LogValue& v : personal) {
    items.push_back(absl::StrCat(
        "{\"commitment\":", JsonString(absl::BytesToHexString(v.commitment())),
        ",\"path\":", JsonString(v.path()), ",\"state\":", JsonString(StateName(v.state())),
        ",\"subject\":", JsonString(v.subject()), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ","), "]");
}

absl::StatusOr<Fields> FieldsOf(uint64_t index, absl::string_view leaf_bytes) {
  ASSIGN_OR_RETURN(tlog::LeafV1 leaf, tlog::DecodeLeaf(leaf_bytes));
  Fields f;
  if (!f.event.ParseFromString(leaf.envelope)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leaf ", index, ": its envelope is not an AuditEvent"));
  }
  f.log_index = index;
  f.owner = std::move(leaf.owner);
  f.key_id = std::move(leaf.key_id);
  return f;
}

std::string Number(double d) {
  if (std::isnan(d)) return "\"NaN\"";
  if (std::isinf(d)) return d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  if (d == 0) return "0";  // -0 too: JSON readers (and jsonb) have one zero
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

void AppendJson(std::string& out, const Value& v);

void AppendJson(std::string& out, const Struct& s) {
  std::vector<const std::string*> keys;
  for (const auto& [k, unused] : s.fields()) keys.push_back(&k);
  std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return *a < *b; });
  out += '{';
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) out += ',';
    out += JsonString(*keys[i]);
    out += ':';
    AppendJson(out, s.fields().at(*keys[i]));
  }
  out += '}';
}

void AppendJson(std::string& out, const Value& v) {
  switch (v.kind_case()) {
    case Value::kNumberValue:
      out += Number(v.number_value());
      return;
    case Value::kStringValue:
      out += JsonString(v.string_value());
      return;
    case Value::kBoolValue:
      out += v.bool_value() ? "true" : "false";
      return;
    case Value::kStructValue:
      AppendJson(out, v.struct_value());
      return;
    case Value::kListValue: {
      out += '[';
      for (int i = 0; i < v.list_value().values_size(); ++i) {
        if (i > 0) out += ',';
        AppendJson(out, v.list_value().values(i));
      }
      out += ']';
      return;
    }
    case Value::kNullValue:
    case Value::KIND_NOT_SET:
      out += "null";
      return;
  }
}

// A Struct field of the record: its JSON, or `absent` when unset.
std::string StructOr(bool has, const Struct& s, absl::string_view absent) {
  return has ? JsonOf(s) : std::string(absent);
}

// The flat columns, in order, with their JSON values (JSON Lines) or CSV
// text.
struct Column {
  const char* name;
  std::string json;
  std::string csv;
};

std::vector<Column> Columns(const Fields& f) {
  const audit::v1::AuditRecord& r = f.event.record();
  auto text = [](const char* name, const std::string& s) { return Column{name, JsonString(s), s}; };
  auto number = [](const char* name, uint64_t n) {
    return Column{name, absl::StrCat(n), absl::StrCat(n)};
  };
  const std::string occurred = TimeUtil::ToString(f.event.occurred_at());
  return {
      number("log_index", f.log_index),
      text("event_id", f.event.event_id()),
      text("owner", f.owner),
      text("event_type", f.event.event_type()),
      number("schema_version", f.event.schema_version()),
      number("owner_sequence", f.event.owner_sequence()),
      text("occurred_at", occurred),
      text("actor", r.actor()),
      text("subject", r.subject()),
      text("action", r.action()),
      text("entity_type", r.entity_type()),
      text("entity_id", r.entity_id()),
      Column{"old_value", StructOr(r.has_old_value(), r.old_value(), "null"),
             StructOr(r.has_old_value(), r.old_value(), "")},
      Column{"new_value", StructOr(r.has_new_value(), r.new_value(), "null"),
             StructOr(r.has_new_value(), r.new_value(), "")},
      text("client_ip", r.client_ip()),
      text("user_agent", r.user_agent()),
      text("request_id", r.request_id()),
      text("trace_id", r.trace_id()),
      text("key_id", f.key_id),
      Column{"personal", f.personal, f.personal},
  };
}

std::string Jsonl(const Fields& f) {
  std::string out = "{";
  for (const Column& c : Columns(f)) {
    if (out.size() > 1) out += ',';
    absl::StrAppend(&out, JsonString(c.name), ":", c.json);
  }
  out += "}\n";
  return out;
}

std::string Csv(const Fields& f) {
  std::vector<std::string> cells;
  for (const Column& c : Columns(f)) cells.push_back(CsvField(c.csv));
  return absl::StrCat(absl::StrJoin(cells, ","), "\r\n");
}

// The OCSF class and activity of an action (docs/exporting.md, "OCSF").
struct OcsfClass {
  int category_uid;
  const char* category_name;
  int class_uid;
  const char* class_name;
  int activity_id;
  const char* activity_name;
};

OcsfClass ClassOf(absl::string_view action) {
  constexpr int kIam = 3, kApplication = 6;
  constexpr const char* kIamName = "Identity & Access Management";
  if (action == "create_user") return {kIam, kIamName, 3001, "Account Change", 1, "Create"};
  if (action == "disable_user") return {kIam, kIamName, 3001, "Account Change", 5, "Disable"};
  if (action == "assign_role") {
    return {kIam, kIamName, 3005, "User Access Management", 1, "Assign Privileges"};
  }
  if (action == "revoke_role") {
    return {kIam, kIamName, 3005, "User Access Management", 2, "Revoke Privileges"};
  }
  OcsfClass api{kApplication, "Application Activity", 6003, "API Activity", 99, "Other"};
  auto verb = [&](std::initializer_list<absl::string_view> prefixes) {
    return std::any_of(prefixes.begin(), prefixes.end(),
                       [&](absl::string_view p) { return absl::StartsWith(action, p); });
  };
  if (verb({"create_", "add_"})) {
    api.activity_id = 1, api.activity_name = "Create";
  } else if (verb({"update_", "set_", "publish_", "replay_", "requeue_"})) {
    api.activity_id = 3, api.activity_name = "Update";
  } else if (verb({"delete_", "remove_", "discard_"})) {
    api.activity_id = 4, api.activity_name = "Delete";
  }
  return api;
}

// A JSON object built in key order.
class Object {
 public:
  Object& Raw(absl::string_view key, absl::string_view json) {
    absl::StrAppend(&text_, text_.empty() ? "{" : ",", JsonString(key), ":", json);
    return *this;
  }
  Object& Str(absl::string_view key, absl::string_view s) { return Raw(key, JsonString(s)); }
  Object& Int(absl::string_view key, int64_t n) { return Raw(key, absl::StrCat(n)); }
  Object& Sub(absl::string_view key, const Object& o) { return Raw(key, o.Json()); }
  // A string member only when `s` is not empty.
  Object& StrIf(absl::string_view key, absl::string_view s) {
    return s.empty() ? *this : Str(key, s);
  }
  bool empty() const { return text_.empty(); }
  std::string Json() const { return text_.empty() ? "{}" : absl::StrCat(text_, "}"); }

 private:
  std::string text_;
};

std::string Ocsf(const Fields& f) {
  const audit::v1::AuditRecord& r = f.event.record();
  const OcsfClass c = ClassOf(r.action());
  Object metadata;
  metadata.Str("version", "1.1.0")
      .Sub("product", Object()
                          .Str("name", "UltiCode Audit Mesh")
                          .Str("vendor_name", "UltiCode")
                          .Sub("feature", Object().Str("name", f.owner)))
      .Str("uid", f.event.event_id())
      .Str("log_name", "audit_logs")
      .Int("sequence", static_cast<int64_t>(f.log_index))
      .StrIf("correlation_uid", r.trace_id());
  Object out;
  out.Int("activity_id", c.activity_id)
      .Str("activity_name", c.activity_name)
      .Int("category_uid", c.category_uid)
      .Str("category_name", c.category_name)
      .Int("class_uid", c.class_uid)
      .Str("class_name", c.class_name)
      .Int("type_uid", c.class_uid * 100 + c.activity_id)
      .Str("type_name", absl::StrCat(c.class_name, ": ", c.activity_name))
      .Int("time", TimeUtil::TimestampToMilliseconds(f.event.occurred_at()))
      .Str("time_dt", TimeUtil::ToString(f.event.occurred_at()))
      .Int("severity_id", 1)
      .Str("severity", "Informational")
      .Int("status_id", 1)
      .Str("status", "Success")
      .Sub("metadata", metadata)
      .Sub("actor", Object().Sub("user", Object().Str("uid", r.actor())));
  if (!r.client_ip().empty()) out.Sub("src_endpoint", Object().Str("ip", r.client_ip()));
  if (!r.user_agent().empty()) {
    out.Sub("http_request", Object().Str("user_agent", r.user_agent()));
  }
  if (c.class_uid == 6003) {
    out.Sub("api", Object()
                       .Str("operation", r.action())
                       .Sub("service", Object().Str("name", f.owner))
                       .Sub("request", Object().Str("uid", r.request_id())));
    out.Raw("resources",
            absl::StrCat(
                "[", Object().Str("type", r.entity_type()).Str("uid", r.entity_id()).Json(), "]"));
  } else {
    out.Sub("user", Object().Str("uid", r.subject()));
  }
  if (c.class_uid == 3005) {
    // entity_id is "<user id>/<role>".
    const size_t slash = r.entity_id().rfind('/');
    const std::string role =
        slash == std::string::npos ? r.entity_id() : r.entity_id().substr(slash + 1);
    out.Raw("privileges", absl::StrCat("[", JsonString(role), "]"));
  }
  out.Sub("unmapped", Object()
                          .Str("event_type", f.event.event_type())
                          .Int("schema_version", f.event.schema_version())
                          .Int("owner_sequence", static_cast<int64_t>(f.event.owner_sequence()))
                          .Str("subject", r.subject())
                          .Str("entity_type", r.entity_type())
                          .Str("entity_id", r.entity_id())
                          .Raw("old_value", StructOr(r.has_old_value(), r.old_value(), "null"))
                          .Raw("new_value", StructOr(r.has_new_value(), r.new_value(), "null"))
                          .Str("request_id", r.request_id())
                          .Str("trace_id", r.trace_id())
                          .Str("key_id", f.key_id)
                          .Raw("personal", f.personal));
  return absl::StrCat(out.Json(), "\n");
}

}  // namespace

absl::StatusOr<Format> ParseFormat(absl::string_view name) {
  if (name == "jsonl") return Format::kJsonl;
  if (name == "csv") return Format::kCsv;
  if (name == "ocsf") return Format::kOcsf;
  return absl::InvalidArgumentError(
      absl::StrCat("format \"", name.substr(0, 32), "\": must be jsonl, csv or ocsf"));
}

absl::string_view FormatName(Format format) {
  switch (format) {
    case Format::kJsonl:
      return "jsonl";
    case Format::kCsv:
      return "csv";
    case Format::kOcsf:
      return "ocsf";
  }
  return "";
}

absl::StatusOr<Format> FromProto(admin::v1::ExportFormat format) {
  switch (format) {
    case admin::v1::EXPORT_FORMAT_JSONL:
      return Format::kJsonl;
    case admin::v1::EXPORT_FORMAT_CSV:
      return Format::kCsv;
    case admin::v1::EXPORT_FORMAT_OCSF:
      return Format::kOcsf;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("format: must be EXPORT_FORMAT_JSONL, EXPORT_FORMAT_CSV or "
                       "EXPORT_FORMAT_OCSF, not ",
                       static_cast<int>(format)));
  }
}

admin::v1::ExportFormat ToProto(Format format) {
  switch (format) {
    case Format::kJsonl:
      return admin::v1::EXPORT_FORMAT_JSONL;
    case Format::kCsv:
      return admin::v1::EXPORT_FORMAT_CSV;
    case Format::kOcsf:
      return admin::v1::EXPORT_FORMAT_OCSF;
  }
  return admin::v1::EXPORT_FORMAT_UNSPECIFIED;
}

absl::string_view RowsFileName(Format format) {
  switch (format) {
    case Format::kJsonl:
      return "rows.jsonl";
    case Format::kCsv:
      return "rows.csv";
    case Format::kOcsf:
      return "rows.ocsf.jsonl";
  }
  return "";
}

std::string Preamble(Format format) {
  if (format != Format::kCsv) return "";
  std::vector<std::string> names;
  for (const Column& c : Columns(Fields{})) names.push_back(c.name);
  return absl::StrCat(absl::StrJoin(names, ","), "\r\n");
}

absl::StatusOr<audit::v1::AuditEvent> RestorePersonal(audit::v1::AuditEvent event,
                                                      const PersonalValues& personal,
                                                      PersonalCounts* counts) {
  const auto& commitments = event.record().personal();
  auto lost = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("audit log ", event.event_id(), ": ", what));
  };
  if (personal.size() != commitments.size()) {
    return lost(absl::StrCat(personal.size(), " personal values for ", commitments.size(),
                             " commitments of the envelope"));
  }
  audit::PersonalValues present;
  for (int i = 0; i < personal.size(); ++i) {
    const LogValue& v = personal[i];
    const audit::v1::PersonalCommitment& c = commitments[i];
    if (v.path() != c.path() || v.subject() != c.subject() || v.commitment() != c.commitment()) {
      return lost(
          absl::StrCat("personal value ", i, " is not the envelope's commitment at ", c.path()));
    }
    if (v.state() == LogValue::STATE_PRESENT) {
      audit::v1::PersonalValue* p = present.add_values();
      p->set_path(v.path());
      p->set_value(v.value());
      p->set_salt(v.salt());
    } else if (v.state() != LogValue::STATE_ERASED && v.state() != LogValue::STATE_NOT_HELD) {
      return lost(absl::StrCat("personal value at ", v.path(), " has no state"));
    } else if (!v.value().empty() || !v.salt().empty()) {
      return lost(absl::StrCat("personal value at ", v.path(), " is ", StateName(v.state()),
                               " but carries a value"));
    }
  }
  std::vector<std::string> refused;
  const std::vector<audit::v1::PersonalValue> opened =
      audit::OpenCommitments(event, present, &refused);
  if (!refused.empty()) return lost(absl::StrCat("personal value changed: ", refused[0]));
  if (counts != nullptr) {
    for (const LogValue& v : personal) {
      (v.state() == LogValue::STATE_PRESENT  ? counts->present
       : v.state() == LogValue::STATE_ERASED ? counts->erased
                                             : counts->not_held)++;
    }
  }
  audit::RestorePersonalValues(opened, *event.mutable_record());
  return event;
}

absl::StatusOr<std::string> RenderRow(Format format, uint64_t index, absl::string_view leaf,
                                      const PersonalValues& personal) {
  ASSIGN_OR_RETURN(Fields f, FieldsOf(index, leaf));
  ASSIGN_OR_RETURN(f.event, RestorePersonal(std::move(f.event), personal));
  f.personal = PersonalJson(personal);
  switch (format) {
    case Format::kJsonl:
      return Jsonl(f);
    case Format::kCsv:
      return Csv(f);
    case Format::kOcsf:
      return Ocsf(f);
  }
  return absl::InvalidArgumentError("unknown export format");
}

std::string JsonOf(const Value& value) {
  std::string out;
  AppendJson(out, value);
  return out;
}

std::string JsonOf(const Struct& value) {
  std::string out;
  AppendJson(out, value);
  return out;
}

absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  std::string out;
  const auto s = google::protobuf::util::MessageToJsonString(message, &out, o);
  if (!s.ok()) return absl::InternalError(std::string(s.message()));
  return out;
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string CsvField(absl::string_view field) {
  std::string value;
  if (!field.empty() && absl::string_view("=+-@\t\r").find(field[0]) != absl::string_view::npos) {
    value = "'";
  }
  value.append(field.data(), field.size());
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

}  // namespace ulticode::exports
