#include "tokenize/unicode.h"

#include <gtest/gtest.h>

namespace ek::tokenize {
namespace {

TEST(CharClassesTest, MatchesUnicodeCategories) {
  const auto& c = CharClasses::Get();
  constexpr uint8_t kRegexBits = kClassLetter | kClassNumber | kClassSpace;
  EXPECT_EQ(c.Of('a') & kRegexBits, kClassLetter);
  EXPECT_EQ(c.Of('7') & kRegexBits, kClassNumber);
  EXPECT_EQ(c.Of(' ') & kRegexBits, kClassSpace);
  EXPECT_EQ(c.Of('\n') & kRegexBits, kClassSpace);
  EXPECT_EQ(c.Of('.') & kRegexBits, 0);
  EXPECT_EQ(c.Of(0x4E2D) & kRegexBits, kClassLetter);  // 中 Lo
  EXPECT_EQ(c.Of(0x02B0) & kRegexBits, kClassLetter);  // ʰ Lm
  EXPECT_EQ(c.Of(0x00B2) & kRegexBits, kClassNumber);  // ² No
  EXPECT_EQ(c.Of(0x216B) & kRegexBits, kClassNumber);  // Ⅻ Nl
  EXPECT_EQ(c.Of(0x0301) & kRegexBits, 0);             // combining acute: Mn, not a letter
  EXPECT_EQ(c.Of(0x093F) & kRegexBits, 0);             // Devanagari vowel sign i: Mc
  EXPECT_EQ(c.Of(0x00A0) & kRegexBits, kClassSpace);   // no-break space
  EXPECT_EQ(c.Of(0x3000) & kRegexBits, kClassSpace);   // ideographic space
  EXPECT_EQ(c.Of(0x0085) & kRegexBits, kClassSpace);   // next line
  EXPECT_EQ(c.Of(0x200B) & kRegexBits, 0);             // zero width space is not White_Space
  EXPECT_EQ(c.Of(0xFEFF) & kRegexBits, 0);
  EXPECT_EQ(c.Of(0x1F600) & kRegexBits, 0);  // emoji: So
}

TEST(CharClassesTest, NormalizationBits) {
  const auto& c = CharClasses::Get();
  EXPECT_TRUE(c.Of(0x0301) & kClassCombining);
  EXPECT_TRUE(c.Of(0x0340) & kClassNfcQc);
  EXPECT_FALSE(c.Of(0x4E2D) & (kClassCombining | kClassNfcQc));
}

TEST(CharClassesTest, FollowsUnicode16LikeHfOniguruma) {
  const auto& c = CharClasses::Get();
  EXPECT_TRUE(c.Of(0x13460) & kClassLetter);  // Egyptian hieroglyph, new in Unicode 16.0
  EXPECT_TRUE(c.Of(0x1DF6) & kClassPost9);    // combining kavyka, new in 10.0
  EXPECT_FALSE(c.Of(0x1DF6) & kClassCombining);
}

TEST(NfcTest, CharactersAfterUnicode9AreInertAsInHf) {
  // HF's NFC (Unicode 9.0 tables) leaves d + U+1DF6 + U+0323 alone: U+1DF6 is a
  // starter there, so U+0323 neither reorders before it nor composes with d.
  std::string out;
  AppendNfc("d\u1df6\u0323", &out);
  EXPECT_EQ(out, "d\u1df6\u0323");
  out.clear();
  AppendNfc("d\u0323\u0301x\u1df6", &out);  // 9.0 characters still compose
  EXPECT_EQ(out, "\u1e0d\u0301x\u1df6");
}

TEST(Utf8Test, FirstInvalid) {
  EXPECT_EQ(FirstInvalidUtf8("héllo"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("ab\xff", 3)), 2u);
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("ab\xed\xa0\x80", 5)), 2u);  // encoded surrogate
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("\xc3", 1)), 0u);            // truncated
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("\xc0\xaf", 2)), 0u);        // overlong
}

TEST(Utf8Test, ReplaceLikePython) {
  // Expected strings from Python: bytes.decode("utf-8", errors="replace").
  auto rep = [](std::string_view in) {
    std::string out;
    ReplaceInvalidUtf8(in, &out);
    return out;
  };
  EXPECT_EQ(rep("a\xff"
                "b"),
            "a\uFFFDb");
  EXPECT_EQ(rep("\xe2\x82"), "\uFFFD");  // truncated 3-byte: one U+FFFD
  EXPECT_EQ(rep("\xe2\x82"
                "a"),
            "\uFFFD"
            "a");
  EXPECT_EQ(rep("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD");  // surrogate: 3 replacements
  EXPECT_EQ(rep("\xf0\x9f\x98"), "\uFFFD");              // truncated emoji
  EXPECT_EQ(rep("\xc0\xaf"), "\uFFFD\uFFFD");
  EXPECT_EQ(rep("\xf4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");  // above U+10FFFF
}

// IsNfcQuick skips the three-byte characters U+4000..U+9FFF (lead bytes E4 to
// E9, CJK ideographs) without a look-up: every one is NFC_QC=Yes with ccc 0.
TEST(NfcTest, QuickCheckSkipsCjkBecauseNoneNeedsNormalizing) {
  const CharClasses& cls = CharClasses::Get();
  for (uint32_t cp = 0x4000; cp < 0xA000; ++cp) {
    EXPECT_EQ(cls.Of(cp) & (kClassNfcQc | kClassCombining), 0) << std::hex << cp;
  }
}

TEST(NfcTest, QuickCheckAndCompose) {
  EXPECT_TRUE(IsNfcQuick("plain ascii"));
  EXPECT_TRUE(IsNfcQuick("café 中文 한국어"));
  EXPECT_FALSE(IsNfcQuick("cafe\u0301"));
  std::string out;
  AppendNfc("cafe\u0301", &out);
  EXPECT_EQ(out, "caf\u00e9");
  out.clear();
  AppendNfc("\u1100\u1161", &out);  // Hangul jamo compose to 가
  EXPECT_EQ(out, "\uac00");
  out.clear();
  AppendNfc("\u212b", &out);  // Angstrom sign -> Å
  EXPECT_EQ(out, "\u00c5");
}

}  // namespace
}  // namespace ek::tokenize
