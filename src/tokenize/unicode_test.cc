#include "tokenize/unicode.h"

#include <gtest/gtest.h>
#include <utf8proc.h>

#include <random>

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

// CharClasses asks utf8proc for combining classes in planes 0-3 and 14 only: its
// combining bit must still be, for every code point, utf8proc's class != 0 (outside the
// characters after Unicode 9.0, inert for HF's NFC).
TEST(CharClassesTest, CombiningBitIsUtf8procsClassEverywhere) {
  const CharClasses& cls = CharClasses::Get();
  size_t marks = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    const bool post9 = (cls.Of(cp) & kClassPost9) != 0;
    const bool mark =
        !post9 && utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class != 0;
    ASSERT_EQ((cls.Of(cp) & kClassCombining) != 0, mark) << std::hex << cp;
    marks += mark;
  }
  EXPECT_GT(marks, 800u);
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

// The quick check reads two- and three-byte characters' inertness from a bitmap: it must
// say what the classes say, for every code point of the BMP.
TEST(NfcTest, InertBitsAreTheClasses) {
  const CharClasses& cls = CharClasses::Get();
  size_t inert = 0;
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    const bool want = (cls.Of(cp) & (kClassNfcQc | kClassCombining)) == 0;
    ASSERT_EQ(cls.NfcInert(cp), want) << std::hex << cp;
    inert += want;
  }
  EXPECT_GT(inert, 60000u);
}

// AppendNfc normalizes only the stretches around what the quick check stops
// at; the text whole through the tables must give the same. Random text of
// characters that compose, reorder (marks of several classes, some passing
// the check: U+0316, U+05B0, U+0651, U+064E, U+0E48), decompose or stop the
// check (Maybe: the
// Bengali and Hangul vowels; No: Angstrom, U+0958), starters, a character
// after Unicode 9.0, and long runs of plain text so that stretches are both
// joined (under 256 bytes apart) and apart.
TEST(NfcTest, StretchesNormalizeAsTheWholeText) {
  static const std::vector<uint32_t> kAlphabet = {
      'e',    'A',    'x',     ' ',    0x0301, 0x0308, 0x0323, 0x0302, 0x0345, 0x09C7, 0x09BE,
      0x09D7, 0x0995, 0x1100,  0x1161, 0x11A8, 0xAC00, 0x0915, 0x093C, 0x0958, 0x212B, 0x1E0A,
      0x4E00, 0x1DF6, 0x1F9D0, 0x00E9, 0x0041, 0x030A, 0x0316, 0x05B0, 0x0651, 0x064E, 0x0E48};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1), plain(0, 400);
  for (int iter = 0; iter < 4000; ++iter) {
    std::string text;
    for (int part = 0; part < 4; ++part) {
      for (int k = 1 + iter % 12; k > 0; --k) AppendUtf8(&text, kAlphabet[pick(rng)]);
      text.append(iter % 3 == 0 ? plain(rng) : 0, 'a');
    }
    std::string whole, stretches;
    AppendNfcWhole(text, &whole);
    AppendNfc(text, &stretches);
    ASSERT_EQ(stretches, whole) << "text: " << text;
  }
}

// The quick check passes a Maybe of class 0 with no decomposition (kClassNfcMaybeStarter:
// Bengali's AA sign, Hangul's vowel and final jamo, ...) where it does not compose with the
// character before it. Every such character in the BMP and the SMP, after each of the 256
// code points around it (where the characters it composes with live), Hangul syllables and
// leading jamo, a combining mark and the text's start: AppendNfc equals the whole text
// through the tables, and the quick check passes exactly where the pair does not join.
TEST(NfcTest, MaybeStartersPassWhereTheyDoNotJoin) {
  const CharClasses& cls = CharClasses::Get();
  size_t maybes = 0, passed = 0, stopped = 0;
  for (uint32_t m = 0x300; m < 0x30000; ++m) {
    if (!(cls.Of(m) & kClassNfcMaybeStarter)) continue;
    ++maybes;
    std::vector<uint32_t> before = {0xAC00, 0xAC01, 0x1100, 0x0301, 'a'};
    for (uint32_t p = m > 128 ? m - 128 : 0; p < m + 128; ++p) {
      if ((p < 0xD800 || p > 0xDFFF) && p != 0) before.push_back(p);
    }
    for (uint32_t p : before) {
      std::string pair, text = "x";
      AppendUtf8(&pair, p);
      AppendUtf8(&pair, m);
      text += pair;
      text += "y";
      std::string whole, stretches, two;
      AppendNfcWhole(text, &whole);
      AppendNfc(text, &stretches);
      ASSERT_EQ(stretches, whole) << std::hex << "U+" << p << " U+" << m;
      AppendNfcWhole(pair, &two);
      const bool joins = two != pair;
      // The quick check stops at m (or before it) exactly where the pair joins, or
      // where p stops it itself.
      const bool p_passes =
          IsNfcQuick(std::string_view(pair).substr(0, pair.size() - (m < 0x800     ? 2
                                                                     : m < 0x10000 ? 3
                                                                                   : 4)));
      if (p_passes) {
        EXPECT_EQ(IsNfcQuick(text), !joins) << std::hex << "U+" << p << " U+" << m;
        (joins ? stopped : passed) += 1;
      }
    }
    std::string alone;
    AppendUtf8(&alone, m);
    EXPECT_FALSE(IsNfcQuick(alone)) << "at the start, nothing to ask";  // conservative
  }
  EXPECT_GT(maybes, 40u);
  EXPECT_GT(passed, 1000u);
  EXPECT_GT(stopped, 20u);  // Bengali E + AA, Hangul L + V and LV + T, ...
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
