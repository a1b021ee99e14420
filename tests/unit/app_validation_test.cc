// App request validation: every rule of app.proto rejects a bad value with
// INVALID_ARGUMENT naming the field, and accepts the edges of its range.
#include <string>

#include "absl/strings/str_cat.h"
#include "app/app_service.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace ulticode::app {
namespace {

using google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

constexpr char kUuid[] = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

// INVALID_ARGUMENT whose message starts with "<field>:".
void ExpectInvalid(const absl::Status& s, const std::string& field, const std::string& what) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
  EXPECT_EQ(s.message().substr(0, field.size() + 1), field + ":") << what << ": " << s;
}

v1::CreateProblemRequest GoodProblem() {
  v1::CreateProblemRequest r;
  r.set_slug("two-sum");
  r.set_title("Two Sum");
  r.set_statement("Add two numbers.");
  *r.mutable_time_limit() = TimeUtil::MillisecondsToDuration(1000);
  r.set_memory_limit_mb(256);
  r.set_difficulty(3);
  return r;
}

v1::CreateContestRequest GoodContest() {
  v1::CreateContestRequest r;
  r.set_slug("round-1");
  r.set_title("Round 1");
  *r.mutable_starts_at() = TimeUtil::SecondsToTimestamp(1800000000);
  *r.mutable_ends_at() = TimeUtil::SecondsToTimestamp(1800007200);
  return r;
}

TEST(AppValidationTest, Slug) {
  for (const std::string& good : {std::string("abc"), std::string("a-1"), std::string("two-sum"),
                                  std::string("z99"), std::string(64, 'a')}) {
    EXPECT_TRUE(ValidateSlug(good).ok()) << good;
  }
  for (const std::string& bad :
       {std::string(""), std::string("ab"), std::string(65, 'a'), std::string("1abc"),
        std::string("-abc"), std::string("Abc"), std::string("ab_c"), std::string("ab c"),
        std::string("abé"), std::string("ab\0c", 4)}) {
    absl::Status s = ValidateSlug(bad);
    ExpectInvalid(s, "slug", bad);
    EXPECT_EQ(s.message(), "slug: must be 3..64 characters of [a-z0-9-] starting with a letter");
  }
}

TEST(AppValidationTest, Label) {
  for (const char* good : {"A", "Z", "AA", "ZZ", "QB"})
    EXPECT_TRUE(ValidateLabel(good).ok()) << good;
  for (const char* bad : {"", "a", "AAA", "A1", "1", "Ab", " A", "-"}) {
    absl::Status s = ValidateLabel(bad);
    ExpectInvalid(s, "label", bad);
    EXPECT_EQ(s.message(), "label: must be one or two uppercase letters");
  }
}

TEST(AppValidationTest, Id) {
  EXPECT_TRUE(ValidateId("problem_id", kUuid).ok());
  ExpectInvalid(ValidateId("problem_id", ""), "problem_id", "empty");
  ExpectInvalid(ValidateId("contest_id", "not-a-uuid"), "contest_id", "malformed");
  ExpectInvalid(ValidateId("contest_id", std::string(kUuid) + "0"), "contest_id", "too long");
}

TEST(AppValidationTest, CreateProblemAcceptsRangeEdges) {
  EXPECT_TRUE(ValidateCreateProblem(GoodProblem()).ok());
  auto low = GoodProblem();
  low.set_title("T");
  low.set_statement("");
  *low.mutable_time_limit() = TimeUtil::MillisecondsToDuration(100);
  low.set_memory_limit_mb(16);
  low.set_difficulty(1);
  EXPECT_TRUE(ValidateCreateProblem(low).ok());
  auto high = GoodProblem();
  high.set_title(std::string(200, 'x'));
  high.set_statement(std::string(65536, 's'));
  *high.mutable_time_limit() = TimeUtil::MillisecondsToDuration(60000);
  high.set_memory_limit_mb(4096);
  high.set_difficulty(10);
  EXPECT_TRUE(ValidateCreateProblem(high).ok());
  // 200 characters, 400 bytes: the limit counts characters.
  auto unicode = GoodProblem();
  std::string title;
  for (int i = 0; i < 200; ++i) title += "é";
  unicode.set_title(title);
  EXPECT_TRUE(ValidateCreateProblem(unicode).ok());
  // Statements are multi-line text: newlines and tabs are fine, a carriage
  // return (which can overwrite a line on a terminal) is not.
  auto multiline = GoodProblem();
  multiline.set_statement("line 1\n\tline 2\n");
  EXPECT_TRUE(ValidateCreateProblem(multiline).ok());
  multiline.set_statement("line 1\r\n");
  EXPECT_THAT(ValidateCreateProblem(multiline).message(),
              HasSubstr("statement: control character U+000D at character 7"));
}

TEST(AppValidationTest, CreateProblemRejectsEachBadField) {
  struct Case {
    const char* what;
    const char* field;
    void (*mutate)(v1::CreateProblemRequest&);
  };
  const Case cases[] = {
      {"empty slug", "slug", [](v1::CreateProblemRequest& r) { r.set_slug(""); }},
      {"upper slug", "slug", [](v1::CreateProblemRequest& r) { r.set_slug("Two-sum"); }},
      {"empty title", "title", [](v1::CreateProblemRequest& r) { r.set_title(""); }},
      {"long title", "title",
       [](v1::CreateProblemRequest& r) { r.set_title(std::string(201, 'x')); }},
      {"control title", "title", [](v1::CreateProblemRequest& r) { r.set_title("a\nb"); }},
      {"long statement", "statement",
       [](v1::CreateProblemRequest& r) { r.set_statement(std::string(65537, 's')); }},
      {"NUL statement", "statement",
       [](v1::CreateProblemRequest& r) { r.set_statement(std::string("a\0b", 3)); }},
      {"time 0", "time_limit", [](v1::CreateProblemRequest& r) { r.clear_time_limit(); }},
      {"time 99", "time_limit",
       [](v1::CreateProblemRequest& r) {
         *r.mutable_time_limit() = TimeUtil::MillisecondsToDuration(99);
       }},
      {"time 60001", "time_limit",
       [](v1::CreateProblemRequest& r) {
         *r.mutable_time_limit() = TimeUtil::MillisecondsToDuration(60001);
       }},
      {"time negative", "time_limit",
       [](v1::CreateProblemRequest& r) {
         *r.mutable_time_limit() = TimeUtil::MillisecondsToDuration(-1000);
       }},
      {"time not whole ms", "time_limit",
       [](v1::CreateProblemRequest& r) {
         *r.mutable_time_limit() = TimeUtil::MicrosecondsToDuration(100500);
       }},
      {"memory 15", "memory_limit_mb",
       [](v1::CreateProblemRequest& r) { r.set_memory_limit_mb(15); }},
      {"memory 4097", "memory_limit_mb",
       [](v1::CreateProblemRequest& r) { r.set_memory_limit_mb(4097); }},
      {"difficulty 0", "difficulty", [](v1::CreateProblemRequest& r) { r.set_difficulty(0); }},
      {"difficulty 11", "difficulty", [](v1::CreateProblemRequest& r) { r.set_difficulty(11); }},
  };
  for (const Case& c : cases) {
    auto r = GoodProblem();
    c.mutate(r);
    ExpectInvalid(ValidateCreateProblem(r), c.field, c.what);
  }
  // An unset request fails on its first field.
  ExpectInvalid(ValidateCreateProblem(v1::CreateProblemRequest()), "slug", "empty request");
}

TEST(AppValidationTest, UpdateProblemMask) {
  v1::UpdateProblemRequest r;
  r.mutable_problem()->set_problem_id(kUuid);
  ExpectInvalid(ValidateUpdateProblem(r), "update_mask", "empty mask");

  r.mutable_update_mask()->add_paths("title");
  r.mutable_problem()->set_title("New title");
  EXPECT_TRUE(ValidateUpdateProblem(r).ok());
  r.mutable_update_mask()->add_paths("title");  // repeated path: still a set
  EXPECT_TRUE(ValidateUpdateProblem(r).ok());

  r.mutable_update_mask()->add_paths("foo");
  absl::Status s = ValidateUpdateProblem(r);
  ExpectInvalid(s, "update_mask.paths[2]", "unknown path");
  EXPECT_EQ(s.message(), "update_mask.paths[2]: unknown path \"foo\"");

  // Immutable or nonexistent fields are unknown paths too.
  for (const char* path : {"slug", "problem_id", "version", "", "Title"}) {
    v1::UpdateProblemRequest u;
    u.mutable_problem()->set_problem_id(kUuid);
    u.mutable_update_mask()->add_paths(path);
    ExpectInvalid(ValidateUpdateProblem(u), "update_mask.paths[0]", path);
  }

  v1::UpdateProblemRequest no_id;
  no_id.mutable_update_mask()->add_paths("title");
  no_id.mutable_problem()->set_title("x");
  ExpectInvalid(ValidateUpdateProblem(no_id), "problem.problem_id", "missing id");
  no_id.mutable_problem()->set_problem_id("42");
  ExpectInvalid(ValidateUpdateProblem(no_id), "problem.problem_id", "malformed id");
}

TEST(AppValidationTest, UpdateProblemChecksOnlyMaskedValues) {
  // Unmasked fields may hold anything (zero values): they are ignored.
  v1::UpdateProblemRequest r;
  r.mutable_problem()->set_problem_id(kUuid);
  r.mutable_update_mask()->add_paths("difficulty");
  r.mutable_problem()->set_difficulty(10);
  EXPECT_TRUE(ValidateUpdateProblem(r).ok());

  // Every path, all valid (an empty statement is allowed).
  v1::UpdateProblemRequest all;
  all.mutable_problem()->set_problem_id(kUuid);
  for (const char* p : {"title", "statement", "time_limit", "memory_limit_mb", "difficulty"}) {
    all.mutable_update_mask()->add_paths(p);
  }
  all.mutable_problem()->set_title("T");
  all.mutable_problem()->set_statement("");
  *all.mutable_problem()->mutable_time_limit() = TimeUtil::MillisecondsToDuration(100);
  all.mutable_problem()->set_memory_limit_mb(4096);
  all.mutable_problem()->set_difficulty(1);
  EXPECT_TRUE(ValidateUpdateProblem(all).ok());

  struct Case {
    const char* path;
    void (*mutate)(v1::UpdateProblemRequest&);
  };
  const Case cases[] = {
      {"title", [](v1::UpdateProblemRequest& u) { u.mutable_problem()->set_title(""); }},
      {"title",
       [](v1::UpdateProblemRequest& u) { u.mutable_problem()->set_title(std::string(201, 'x')); }},
      {"statement",
       [](v1::UpdateProblemRequest& u) {
         u.mutable_problem()->set_statement(std::string(65537, 's'));
       }},
      {"time_limit",
       [](v1::UpdateProblemRequest& u) {
         *u.mutable_problem()->mutable_time_limit() = TimeUtil::MillisecondsToDuration(60001);
       }},
      {"memory_limit_mb",
       [](v1::UpdateProblemRequest& u) { u.mutable_problem()->set_memory_limit_mb(0); }},
      {"difficulty", [](v1::UpdateProblemRequest& u) { u.mutable_problem()->set_difficulty(0); }},
  };
  // The values are in `problem`: the field path names them there.
  for (const Case& c : cases) {
    v1::UpdateProblemRequest u;
    u.mutable_problem()->set_problem_id(kUuid);
    u.mutable_update_mask()->add_paths(c.path);
    c.mutate(u);
    ExpectInvalid(ValidateUpdateProblem(u), absl::StrCat("problem.", c.path), c.path);
  }
}

TEST(AppValidationTest, CreateContest) {
  EXPECT_TRUE(ValidateCreateContest(GoodContest()).ok());
  auto one_us = GoodContest();
  *one_us.mutable_ends_at() = TimeUtil::MicrosecondsToTimestamp(1800000000LL * 1000000 + 1);
  EXPECT_TRUE(ValidateCreateContest(one_us).ok());

  auto r = GoodContest();
  r.set_slug("x");
  ExpectInvalid(ValidateCreateContest(r), "slug", "short slug");
  r = GoodContest();
  r.set_title("");
  ExpectInvalid(ValidateCreateContest(r), "title", "empty title");
  r = GoodContest();
  r.set_title(std::string(201, 'x'));
  ExpectInvalid(ValidateCreateContest(r), "title", "long title");

  r = GoodContest();
  r.clear_starts_at();
  ExpectInvalid(ValidateCreateContest(r), "starts_at", "missing starts_at");
  r = GoodContest();
  r.clear_ends_at();
  ExpectInvalid(ValidateCreateContest(r), "ends_at", "missing ends_at");

  r = GoodContest();
  r.mutable_starts_at()->set_nanos(-1);
  ExpectInvalid(ValidateCreateContest(r), "starts_at", "negative nanos");
  r = GoodContest();
  r.mutable_ends_at()->set_nanos(1000000000);
  ExpectInvalid(ValidateCreateContest(r), "ends_at", "nanos overflow");
  r = GoodContest();
  r.mutable_ends_at()->set_seconds(TimeUtil::kTimestampMaxSeconds + 1);
  ExpectInvalid(ValidateCreateContest(r), "ends_at", "after 9999");
  r = GoodContest();
  r.mutable_starts_at()->set_seconds(-1);
  ExpectInvalid(ValidateCreateContest(r), "starts_at", "before 1970");
  r = GoodContest();
  r.mutable_starts_at()->set_seconds(0);
  *r.mutable_ends_at() = TimeUtil::SecondsToTimestamp(TimeUtil::kTimestampMaxSeconds);
  r.mutable_ends_at()->set_nanos(999999999);
  EXPECT_TRUE(ValidateCreateContest(r).ok()) << "the widest range";

  absl::Status s;
  r = GoodContest();
  *r.mutable_ends_at() = r.starts_at();
  s = ValidateCreateContest(r);
  ExpectInvalid(s, "ends_at", "equal times");
  EXPECT_EQ(s.message(), "ends_at: must be after starts_at");
  r = GoodContest();
  std::swap(*r.mutable_starts_at(), *r.mutable_ends_at());
  ExpectInvalid(ValidateCreateContest(r), "ends_at", "reversed times");
  // Stored at microsecond precision: 500ns later is not after.
  r = GoodContest();
  *r.mutable_ends_at() = r.starts_at();
  r.mutable_ends_at()->set_nanos(500);
  ExpectInvalid(ValidateCreateContest(r), "ends_at", "sub-microsecond difference");
}

TEST(AppValidationTest, ContestMembershipAndPublish) {
  v1::AddProblemToContestRequest add;
  add.set_contest_id(kUuid);
  add.set_problem_id(kUuid);
  add.set_label("A");
  EXPECT_TRUE(ValidateAddProblemToContest(add).ok());
  auto a = add;
  a.set_contest_id("");
  ExpectInvalid(ValidateAddProblemToContest(a), "contest_id", "add without contest");
  a = add;
  a.set_problem_id("nope");
  ExpectInvalid(ValidateAddProblemToContest(a), "problem_id", "add with bad problem");
  a = add;
  a.set_label("a");
  ExpectInvalid(ValidateAddProblemToContest(a), "label", "add with lowercase label");
  a = add;
  a.clear_label();
  ExpectInvalid(ValidateAddProblemToContest(a), "label", "add without label");

  v1::RemoveProblemFromContestRequest rm;
  rm.set_contest_id(kUuid);
  rm.set_problem_id(kUuid);
  EXPECT_TRUE(ValidateRemoveProblemFromContest(rm).ok());
  auto r = rm;
  r.set_contest_id("x");
  ExpectInvalid(ValidateRemoveProblemFromContest(r), "contest_id", "remove with bad contest");
  r = rm;
  r.clear_problem_id();
  ExpectInvalid(ValidateRemoveProblemFromContest(r), "problem_id", "remove without problem");

  v1::PublishContestRequest pub;
  ExpectInvalid(ValidatePublishContest(pub), "contest_id", "publish without contest");
  pub.set_contest_id("zzz");
  ExpectInvalid(ValidatePublishContest(pub), "contest_id", "publish with bad contest");
  pub.set_contest_id(kUuid);
  EXPECT_TRUE(ValidatePublishContest(pub).ok());
}

}  // namespace
}  // namespace ulticode::app
