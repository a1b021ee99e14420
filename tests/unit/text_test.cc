// The one validation layer for client strings (common/text).
#include "common/text/text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ulticode::text {
namespace {

using ::testing::HasSubstr;

constexpr Rule kName{.min_chars = 1, .max_chars = 8, .identifier = true};
constexpr Rule kProse{.max_chars = 64, .multiline = true};

TEST(TextTest, AcceptsOrdinaryTextInAnyScript) {
  for (const char* s :
       {"alice", "\xc3\xa9t\xc3\xa9", "\xe6\xbc\xa2\xe5\xad\x97", "\xf0\x9f\x8f\x86", "a b"}) {
    EXPECT_TRUE(Check("name", s, kName).ok()) << s;
  }
  EXPECT_TRUE(Check("body", "line 1\n\tline 2", kProse).ok());
}

TEST(TextTest, RefusesIllFormedUtf8NamingTheCharacter) {
  for (const std::string s :
       {"\xff", "a\xc0\xaf", "\xed\xa0\x80", "ab\xe2\x82", "\xf4\x90\x80\x80"}) {
    absl::Status st = Check("name", s, kName);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(st.message(), HasSubstr("name: not valid UTF-8 at character"));
    EXPECT_FALSE(IsValidUtf8(s));
  }
}

TEST(TextTest, RefusesNulAndOtherControlsWithTheirCodePoint) {
  EXPECT_EQ(Check("reason", std::string("\0hidden", 7), kProse).message(),
            "reason: control character U+0000 at character 1 is not allowed (only \\n and \\t "
            "are)");
  EXPECT_THAT(Check("name", "a\x1b[2J", kName).message(), HasSubstr("U+001B at character 2"));
  EXPECT_THAT(Check("name", "a\x7f", kName).message(), HasSubstr("U+007F"));
  EXPECT_THAT(Check("name", "\xc2\x85", kName).message(), HasSubstr("U+0085"));  // C1 NEL
  EXPECT_THAT(Check("body", "a\r\n", kProse).message(), HasSubstr("U+000D"));
  EXPECT_THAT(Check("name", "a\nb", kName).message(), HasSubstr("U+000A"));
}

TEST(TextTest, RefusesBidiAndInvisibleCharactersInNamesOnly) {
  const std::string rlo =
      "admin\xe2\x80\xae"
      "txt";  // U+202E RIGHT-TO-LEFT OVERRIDE
  EXPECT_THAT(Check("name", rlo, {.max_chars = 16, .identifier = true}).message(),
              HasSubstr("bidi or invisible character U+202E at character 6"));
  EXPECT_TRUE(Check("body", rlo, kProse).ok());
  EXPECT_FALSE(Check("name", "a\xe2\x80\x8b", kName).ok());  // zero-width space
}

TEST(TextTest, CountsCharactersNotBytes) {
  EXPECT_TRUE(Check("name", "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9",
                    kName)
                  .ok());  // 8 characters, 16 bytes
  EXPECT_EQ(Check("name", "123456789", kName).message(), "name: must be 1..8 characters (got 9)");
  EXPECT_EQ(Check("name", "", kName).message(), "name: required");
  EXPECT_THAT(Check("body", std::string(300, 'x'), kProse).message(),
              HasSubstr("at most 256 bytes"));
}

TEST(TextTest, TruncatesWithoutSplittingACharacter) {
  EXPECT_EQ(TruncateUtf8("a\xc3\xa9", 2), "a");
  EXPECT_EQ(TruncateUtf8("a\xc3\xa9", 3), "a\xc3\xa9");
  EXPECT_EQ(TruncateUtf8("abc", 10), "abc");
}

}  // namespace
}  // namespace ulticode::text
