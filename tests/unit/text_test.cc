// The one validation layer for client strings (common/text).
#include "common/text/text.h"

#include <string>

#include "absl/strings/str_format.h"
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

// Every format (Cf) character and the fillers that render as nothing: a name
// that looks like another must not pass as new.
TEST(TextTest, RefusesEveryFormatCharacterAndFillerInNames) {
  auto utf8 = [](char32_t cp) {
    std::string out;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  };
  for (char32_t cp :
       {0xE0001u, 0xE0041u, 0xE007Fu, 0x2061u, 0x2064u,  0x206Au,  0x206Fu,  0x180Eu,
        0x115Fu,  0x1160u,  0x3164u,  0xFFA0u, 0x034Fu,  0xFE00u,  0xFE0Fu,  0xE0100u,
        0x2028u,  0x2029u,  0x0600u,  0x06DDu, 0x110BDu, 0x13430u, 0x1D173u, 0x180Bu}) {
    const std::string name = "ab" + utf8(cp);
    EXPECT_FALSE(Check("name", name, {.max_chars = 16, .identifier = true}).ok())
        << absl::StrFormat("U+%04X", static_cast<uint32_t>(cp));
    EXPECT_TRUE(Check("body", name, kProse).ok())
        << absl::StrFormat("U+%04X in prose", static_cast<uint32_t>(cp));
  }
  EXPECT_TRUE(Check("name", "Zo\xc3\xab", kName).ok()) << "letters with diacritics stay";
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
