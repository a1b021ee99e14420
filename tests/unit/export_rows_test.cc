// The export formats (common/export/row_text.h), against independent
// readers: every generated value survives RFC 4180 CSV and JSON, every
// generated event renders in each format to exactly its fields, and the
// rendering is a function of the leaf alone. Seeded: ULTICODE_EXPORT_SEED
// replays a failure.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/audit/event.h"
#include "common/audit/personal.h"
#include "common/export/row_text.h"
#include "common/tlog/leaf.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace ulticode::exports {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr int kTrials = 2000;

// Strings made of the characters that break formats: separators, quotes,
// line breaks, controls, a formula's first characters, multi-byte UTF-8.
std::string RandomText(std::mt19937& rng, size_t max_len = 24) {
  static const std::vector<std::string> kPieces = {
      "a",  "Z", "0",    " ",    ",",    "\"", "'",  "\r", "\n",     "\r\n",
      "\t", "=", "+",    "-",    "@",    "\\", "/",  "{",  "}",      "[",
      "]",  ":", "\x01", "\x1f", "\x7f", "é",  "漢", "😀",  "\u2028", "null"};
  std::string s;
  const size_t n = std::uniform_int_distribution<size_t>(0, max_len)(rng);
  for (size_t i = 0; i < n; ++i) s += kPieces[rng() % kPieces.size()];
  return s;
}

Value RandomValue(std::mt19937& rng, int depth);

Struct RandomStruct(std::mt19937& rng, int depth) {
  Struct s;
  const int n = std::uniform_int_distribution<int>(0, 4)(rng);
  for (int i = 0; i < n; ++i)
    (*s.mutable_fields())[RandomText(rng, 6)] = RandomValue(rng, depth + 1);
  return s;
}

Value RandomValue(std::mt19937& rng, int depth) {
  Value v;
  switch (rng() % (depth > 3 ? 4 : 6)) {
    case 0:
      v.set_null_value(google::protobuf::NULL_VALUE);
      break;
    case 1: {
      // Integers, fractions, tiny and huge magnitudes.
      const double kinds[] = {static_cast<double>(static_cast<int32_t>(rng())),
                              std::uniform_real_distribution<double>(-1e6, 1e6)(rng),
                              std::ldexp(static_cast<double>(rng()), -60),
                              std::ldexp(static_cast<double>(rng()), 60),
                              0.1,
                              -0.0};
      v.set_number_value(kinds[rng() % 6]);
      break;
    }
    case 2:
      v.set_string_value(RandomText(rng));
      break;
    case 3:
      v.set_bool_value(rng() % 2 == 0);
      break;
    case 4:
      *v.mutable_struct_value() = RandomStruct(rng, depth);
      break;
    default: {
      const int n = std::uniform_int_distribution<int>(0, 3)(rng);
      for (int i = 0; i < n; ++i)
        *v.mutable_list_value()->add_values() = RandomValue(rng, depth + 1);
    }
  }
  return v;
}

// A reader of RFC 4180 written from the RFC, not from the writer: records
// of fields, CRLF between records, quoted fields with doubled quotes.
std::vector<std::vector<std::string>> ReadCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records(1);
  std::string field;
  bool quoted = false, in_quotes = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        field += c;
      }
    } else if (c == '"' && field.empty() && !quoted) {
      in_quotes = quoted = true;
    } else if (c == ',') {
      records.back().push_back(field);
      field.clear();
      quoted = false;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      records.back().push_back(field);
      field.clear();
      quoted = false;
      records.emplace_back();
      ++i;
    } else {
      EXPECT_NE(c, '"') << "a bare quote in an unquoted field";
      EXPECT_NE(c, '\n') << "a bare line break in an unquoted field";
      field += c;
    }
  }
  EXPECT_TRUE(field.empty() && records.back().empty()) << "the text must end with CRLF";
  records.pop_back();
  return records;
}

Value ParseJson(const std::string& json) {
  Value v;
  const auto s = google::protobuf::util::JsonStringToMessage(json, &v);
  EXPECT_TRUE(s.ok()) << s.message() << " in " << json;
  return v;
}

// Equal as JSON values: a reader's null may be an unset Value.
bool SameValue(const Value& a, const Value& b) { return JsonOf(a) == JsonOf(b); }

// A random event as an owner writes it, and its leaf.
struct Sample {
  audit::AuditEvent event;
  std::string leaf;
  std::string key_id;
};

Sample RandomSample(std::mt19937& rng) {
  static const char* kActions[] = {"create_user",
                                   "disable_user",
                                   "assign_role",
                                   "revoke_role",
                                   "create_problem",
                                   "update_problem",
                                   "remove_contest_problem",
                                   "requeue_dead_inbox",
                                   "frobnicate"};
  Sample s;
  const audit::Owner owner = rng() % 2 ? audit::v1::OWNER_AUTH : audit::v1::OWNER_APP;
  s.event = audit::NewEvent(
      owner, owner == audit::v1::OWNER_AUTH ? "auth.x.y" : "app.x.y",
      {RandomText(rng), RandomText(rng), RandomText(rng), RandomText(rng), RandomText(rng)},
      absl::FromUnixMicros(1700000000000000 + (rng() % 1000000000)));
  audit::v1::AuditRecord& r = *s.event.mutable_record();
  r.set_action(kActions[rng() % 9]);
  r.set_entity_type(RandomText(rng));
  r.set_entity_id(absl::StrCat(RandomText(rng), "/", RandomText(rng)));
  r.set_subject(RandomText(rng));
  if (rng() % 2) *r.mutable_old_value() = RandomStruct(rng, 0);
  if (rng() % 2) *r.mutable_new_value() = RandomStruct(rng, 0);
  s.event.set_owner_sequence(rng());
  s.key_id = absl::StrCat("key-", rng() % 100);
  s.leaf = tlog::EncodeLeaf({audit::OwnerName(owner), s.event.event_id(), s.key_id,
                             std::string(73, '\x01'), audit::Serialize(s.event)});
  return s;
}

// The columns of a row, as the event says them (the JSON values of
// JSON Lines; CSV holds the same as text).
std::vector<std::pair<std::string, Value>> ExpectedColumns(const Sample& s, uint64_t index) {
  const audit::v1::AuditRecord& r = s.event.record();
  auto str = [](const std::string& v) {
    Value x;
    x.set_string_value(v);
    return x;
  };
  auto num = [](double v) {
    Value x;
    x.set_number_value(v);
    return x;
  };
  auto object = [](bool has, const Struct& st) {
    Value x;
    if (has) {
      *x.mutable_struct_value() = st;
    } else {
      x.set_null_value(google::protobuf::NULL_VALUE);
    }
    return x;
  };
  return {{"log_index", num(static_cast<double>(index))},
          {"event_id", str(s.event.event_id())},
          {"owner", str(audit::OwnerName(s.event.owner()))},
          {"event_type", str(s.event.event_type())},
          {"schema_version", num(s.event.schema_version())},
          {"owner_sequence", num(static_cast<double>(s.event.owner_sequence()))},
          {"occurred_at", str(google::protobuf::util::TimeUtil::ToString(s.event.occurred_at()))},
          {"actor", str(r.actor())},
          {"subject", str(r.subject())},
          {"action", str(r.action())},
          {"entity_type", str(r.entity_type())},
          {"entity_id", str(r.entity_id())},
          {"old_value", object(r.has_old_value(), r.old_value())},
          {"new_value", object(r.has_new_value(), r.new_value())},
          {"client_ip", str(r.client_ip())},
          {"user_agent", str(r.user_agent())},
          {"request_id", str(r.request_id())},
          {"trace_id", str(r.trace_id())},
          {"key_id", str(s.key_id)},
          {"personal", ParseJson("[]")}};
}

class ExportRowsTest : public ::testing::Test {
 protected:
  std::mt19937 rng_{testing::SeedFromEnv("ULTICODE_EXPORT_SEED", "export rows")};
};

TEST_F(ExportRowsTest, EveryGeneratedFieldSurvivesCsvAndAFormulaNeverStartsACell) {
  for (int t = 0; t < kTrials; ++t) {
    std::vector<std::string> fields;
    for (int i = 0; i < 4; ++i) fields.push_back(RandomText(rng_));
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) {
      absl::StrAppend(&line, i ? "," : "", CsvField(fields[i]));
    }
    line += "\r\n";
    const auto records = ReadCsv(line);
    ASSERT_EQ(records.size(), 1u) << line;
    ASSERT_EQ(records[0].size(), fields.size()) << line;
    for (size_t i = 0; i < fields.size(); ++i) {
      const std::string& f = fields[i];
      const bool formula = !f.empty() && std::string("=+-@\t\r").find(f[0]) != std::string::npos;
      EXPECT_EQ(records[0][i], formula ? "'" + f : f) << line;
    }
  }
}

TEST_F(ExportRowsTest, EveryGeneratedValueReadsBackFromItsJson) {
  for (int t = 0; t < kTrials; ++t) {
    const Value v = RandomValue(rng_, 0);
    const std::string json = JsonOf(v);
    EXPECT_TRUE(SameValue(ParseJson(json), v)) << json;
    EXPECT_EQ(json.find_first_of("\n\r"), std::string::npos) << "one line: " << json;
  }
}

TEST_F(ExportRowsTest, JsonObjectsHaveSortedKeysSoEqualValuesRenderEqually) {
  Struct a, b;
  (*a.mutable_fields())["b"].set_number_value(1);
  (*a.mutable_fields())["a"].set_string_value("x");
  (*b.mutable_fields())["a"].set_string_value("x");
  (*b.mutable_fields())["b"].set_number_value(1);
  EXPECT_EQ(JsonOf(a), R"({"a":"x","b":1})");
  EXPECT_EQ(JsonOf(a), JsonOf(b));
}

TEST_F(ExportRowsTest, EveryGeneratedEventRendersToExactlyItsFieldsInJsonLines) {
  for (int t = 0; t < kTrials / 4; ++t) {
    const Sample s = RandomSample(rng_);
    const uint64_t index = rng_() % 100000;
    const std::string line = RenderRow(Format::kJsonl, index, s.leaf).value();
    ASSERT_EQ(line.back(), '\n');
    ASSERT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
    const Value parsed = ParseJson(line);
    const auto& fields = parsed.struct_value().fields();
    const auto expected = ExpectedColumns(s, index);
    EXPECT_EQ(static_cast<size_t>(fields.size()), expected.size());
    for (const auto& [name, value] : expected) {
      ASSERT_TRUE(fields.contains(name)) << name;
      EXPECT_TRUE(SameValue(fields.at(name), value)) << name << " in " << line;
    }
  }
}

TEST_F(ExportRowsTest, EveryGeneratedEventRendersToExactlyItsFieldsInCsv) {
  const auto header = ReadCsv(Preamble(Format::kCsv));
  ASSERT_EQ(header.size(), 1u);
  for (int t = 0; t < kTrials / 4; ++t) {
    const Sample s = RandomSample(rng_);
    const uint64_t index = rng_() % 100000;
    const std::string record = RenderRow(Format::kCsv, index, s.leaf).value();
    const auto records = ReadCsv(record);
    ASSERT_EQ(records.size(), 1u) << record;
    const auto expected = ExpectedColumns(s, index);
    ASSERT_EQ(records[0].size(), expected.size()) << record;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(header[0][i], expected[i].first);
      const Value& want = expected[i].second;
      std::string cell = records[0][i];
      if (want.has_string_value()) {
        const std::string& w = want.string_value();
        const bool formula = !w.empty() && std::string("=+-@\t\r").find(w[0]) != std::string::npos;
        EXPECT_EQ(cell, formula ? "'" + w : w) << expected[i].first;
      } else if (want.has_null_value()) {
        EXPECT_EQ(cell, "") << expected[i].first;
      } else {
        EXPECT_TRUE(SameValue(ParseJson(cell), want)) << expected[i].first << ": " << cell;
      }
    }
  }
}

// Personal values (docs/personal-data.md): a committed event renders each
// present value in its place and lists every commitment with its state; an
// erased or not-held value is absent; a value changed, a salt changed, an
// entry dropped or one given for an erased value is DATA_LOSS naming it.
TEST_F(ExportRowsTest, PersonalValuesRenderInPlaceAndAChangedOneIsRefused) {
  using LogValue = admin::v1::AuditLog::PersonalValue;
  auto text = [&] {  // what a record may hold
    static const std::vector<std::string> kPieces = {"a", "Z", "0", "@", ".", " ", "é", "漢"};
    std::string t = "v";
    for (size_t n = rng_() % 12; n > 0; --n) t += kPieces[rng_() % kPieces.size()];
    return t;
  };
  for (int t = 0; t < kTrials / 10; ++t) {
    audit::AuditEvent event = audit::NewEvent(audit::v1::OWNER_AUTH, "auth.user.created",
                                              {"alice", text(), text(), "", ""}, absl::Now());
    audit::v1::AuditRecord& r = *event.mutable_record();
    r.set_action("create_user");
    r.set_entity_type("user");
    r.set_entity_id("u-1");
    r.set_subject("u-1");
    (*r.mutable_new_value()->mutable_fields())["email"].set_string_value(text());
    (*r.mutable_new_value()->mutable_fields())["username"].set_string_value(text());
    (*r.mutable_new_value()->mutable_fields())["status"].set_string_value("ACTIVE");
    const audit::AuditEvent built = event;
    const audit::PersonalValues values = audit::CommitPersonalData(event).value();
    const std::string leaf = tlog::EncodeLeaf(
        {"auth", event.event_id(), "k", std::string(73, '\x01'), audit::Serialize(event)});
    PersonalValues personal;
    for (int i = 0; i < event.record().personal_size(); ++i) {
      const auto& c = event.record().personal(i);
      LogValue* v = personal.Add();
      v->set_path(c.path());
      v->set_subject(c.subject());
      v->set_commitment(c.commitment());
      const int state = rng_() % 3;
      v->set_state(state == 0   ? LogValue::STATE_PRESENT
                   : state == 1 ? LogValue::STATE_ERASED
                                : LogValue::STATE_NOT_HELD);
      if (state == 0) {
        v->set_value(values.values(i).value());
        v->set_salt(values.values(i).salt());
      }
    }
    const Value row = ParseJson(RenderRow(Format::kJsonl, 1, leaf, personal).value());
    const auto& fields = row.struct_value().fields();
    for (const LogValue& v : personal) {
      SCOPED_TRACE(v.path());
      const bool in_values = absl::StartsWith(v.path(), "new_value.");
      const std::string key = in_values ? v.path().substr(10) : v.path();
      const auto& where = in_values ? fields.at("new_value").struct_value().fields() : fields;
      const std::string original =
          in_values
              ? built.record().new_value().fields().at(key).string_value()
              : (key == "client_ip" ? built.record().client_ip() : built.record().user_agent());
      if (v.state() == LogValue::STATE_PRESENT) {
        EXPECT_EQ(where.at(key).string_value(), original);
      } else if (in_values) {
        EXPECT_FALSE(where.contains(key));
      } else {
        EXPECT_EQ(where.at(key).string_value(), "");
      }
    }
    EXPECT_EQ(fields.at("personal").list_value().values_size(), personal.size());
    // Tampered: each way refused, naming the event.
    PersonalValues bad = personal;
    const int victim = static_cast<int>(rng_() % bad.size());
    LogValue& v = bad[victim];
    if (v.state() == LogValue::STATE_PRESENT) {
      if (rng_() % 2) {
        v.mutable_value()->append("x");
      } else {
        (*v.mutable_salt())[0] ^= 1;
      }
    } else if (rng_() % 2) {
      v.set_value("smuggled");
    } else {
      bad.RemoveLast();
    }
    for (Format f : {Format::kJsonl, Format::kCsv, Format::kOcsf}) {
      auto refused = RenderRow(f, 1, leaf, bad);
      EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
      EXPECT_TRUE(absl::StrContains(refused.status().message(), event.event_id()));
    }
  }
}

TEST_F(ExportRowsTest, EveryGeneratedEventRendersAsOcsfOfItsActionsClass) {
  for (int t = 0; t < kTrials / 4; ++t) {
    const Sample s = RandomSample(rng_);
    const uint64_t index = rng_() % 100000;
    const std::string line = RenderRow(Format::kOcsf, index, s.leaf).value();
    ASSERT_EQ(line.find('\n'), line.size() - 1) << "one line: " << line;
    const Value parsed = ParseJson(line);
    const auto& f = parsed.struct_value().fields();
    const std::string& action = s.event.record().action();
    const int class_uid = static_cast<int>(f.at("class_uid").number_value());
    const int activity = static_cast<int>(f.at("activity_id").number_value());
    if (action == "create_user" || action == "disable_user") {
      EXPECT_EQ(class_uid, 3001);
      EXPECT_EQ(activity, action == "create_user" ? 1 : 5);
      EXPECT_EQ(f.at("user").struct_value().fields().at("uid").string_value(),
                s.event.record().subject());
    } else if (action == "assign_role" || action == "revoke_role") {
      EXPECT_EQ(class_uid, 3005);
      EXPECT_EQ(activity, action == "assign_role" ? 1 : 2);
      const std::string& id = s.event.record().entity_id();
      EXPECT_EQ(f.at("privileges").list_value().values(0).string_value(),
                id.substr(id.rfind('/') + 1));
    } else {
      EXPECT_EQ(class_uid, 6003);
      const int want = absl::StartsWith(action, "create_") ? 1
                       : absl::StartsWith(action, "update_") || absl::StartsWith(action, "requeue_")
                           ? 3
                       : absl::StartsWith(action, "remove_") ? 4
                                                             : 99;
      EXPECT_EQ(activity, want) << action;
      EXPECT_EQ(f.at("api").struct_value().fields().at("operation").string_value(), action);
    }
    EXPECT_EQ(static_cast<int>(f.at("type_uid").number_value()), class_uid * 100 + activity);
    EXPECT_EQ(static_cast<int64_t>(f.at("time").number_value()),
              google::protobuf::util::TimeUtil::TimestampToMilliseconds(s.event.occurred_at()));
    const auto& metadata = f.at("metadata").struct_value().fields();
    EXPECT_EQ(metadata.at("uid").string_value(), s.event.event_id());
    EXPECT_EQ(static_cast<uint64_t>(metadata.at("sequence").number_value()), index);
    EXPECT_EQ(metadata.at("version").string_value(), "1.1.0");
    EXPECT_EQ(f.at("actor")
                  .struct_value()
                  .fields()
                  .at("user")
                  .struct_value()
                  .fields()
                  .at("uid")
                  .string_value(),
              s.event.record().actor());
  }
}

TEST_F(ExportRowsTest, ARowIsAFunctionOfItsLeafAlone) {
  for (int t = 0; t < 100; ++t) {
    const Sample s = RandomSample(rng_);
    for (Format f : {Format::kJsonl, Format::kCsv, Format::kOcsf}) {
      // The same leaf bytes, parsed anew: the same row.
      const std::string copy(s.leaf);
      EXPECT_EQ(RenderRow(f, 7, s.leaf).value(), RenderRow(f, 7, copy).value());
    }
  }
}

TEST_F(ExportRowsTest, WhatIsNotALeafIsRefusedByName) {
  auto r = RenderRow(Format::kJsonl, 3, "not a leaf");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string bad_envelope =
      tlog::EncodeLeaf({"auth", "id", "key", std::string(73, '\x01'), "\xff\xff not proto"});
  r = RenderRow(Format::kCsv, 3, bad_envelope);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("leaf 3"), std::string::npos) << r.status();
  EXPECT_EQ(ParseFormat("xml").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ulticode::exports
