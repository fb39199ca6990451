#include "tokenize/pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tokenize/ascii_block.h"
#include "tokenize/unicode.h"

namespace ek::tokenize {
namespace {

std::vector<std::string> Pieces(const Pattern& p, std::string_view text) {
  std::vector<Span> spans;
  p.FindMatches(text, &spans);
  std::vector<std::string> out;
  for (auto s : spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(PatternTest, KnownRegexesGetFastMatchers) {
  EXPECT_EQ((*CompileRegex(kQwen2Regex))->kind(), "qwen2");
  EXPECT_EQ((*CompileRegex(kLlama3Regex))->kind(), "llama3");
  EXPECT_EQ((*CompileRegex(kGpt2Regex))->kind(), "gpt2");
  EXPECT_EQ((*CompileRegex("\\s+"))->kind(), "oniguruma");
}

TEST(PatternTest, Qwen2Examples) {
  auto p = *CompileRegex(kQwen2Regex);
  EXPECT_EQ(
      Pieces(*p, "Hello world's 123  \n\n  x"),
      (std::vector<std::string>{"Hello", " world", "'s", " ", "1", "2", "3", "  \n\n", " ", " x"}));
}

TEST(PatternTest, OnigurumaFallbackSeesUnicode16LikeHf) {
  // U+13460 (Egyptian hieroglyph) is a letter from Unicode 16.0 on; the system
  // Oniguruma may be older, the fallback must still call it \p{L}.
  auto p = *CompileOnigRegex("\\p{L}+|[^\\p{L}]");
  EXPECT_EQ(Pieces(*p, "a\U00013460b."), (std::vector<std::string>{"a\U00013460b", "."}));
  EXPECT_NE(AlignRegexUnicode("\\p{L}").find("\\x{13460}"), std::string::npos);
  EXPECT_EQ(AlignRegexUnicode("\\p{Zs}\\\\p{L}"),
            "\\p{Zs}\\\\p{L}");  // escaped backslash: not a class
}

TEST(PatternTest, InvalidRegexIsAnError) {
  auto r = CompileRegex("(unclosed");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(unclosed"), std::string::npos);
}

// The hand-written matchers must agree with Oniguruma on any text.
class DifferentialTest : public ::testing::TestWithParam<std::string_view> {};

std::string RandomText(std::mt19937& rng, size_t len) {
  static const std::vector<uint32_t> kAlphabet = {'a',
                                                  'Z',
                                                  'q',
                                                  's',
                                                  'S',
                                                  't',
                                                  'T',
                                                  'r',
                                                  'R',
                                                  'e',
                                                  'E',
                                                  'v',
                                                  'V',
                                                  'm',
                                                  'M',
                                                  'l',
                                                  'L',
                                                  'd',
                                                  'D',
                                                  '\'',
                                                  ' ',
                                                  ' ',
                                                  ' ',
                                                  '\t',
                                                  '\n',
                                                  '\r',
                                                  '\v',
                                                  '\f',
                                                  '0',
                                                  '7',
                                                  '9',
                                                  '.',
                                                  ',',
                                                  '!',
                                                  '-',
                                                  '"',
                                                  '$',
                                                  0x017F /* ſ */,
                                                  0x212A /* Kelvin */,
                                                  0x00A0,
                                                  0x3000,
                                                  0x2028,
                                                  0x0085,
                                                  0x200B,
                                                  0x1680,
                                                  0x00B2,
                                                  0x216B,
                                                  0x00BD,
                                                  0x0660 /* Arabic-indic 0 */,
                                                  0x4E2D,
                                                  0x6587,
                                                  0x3042 /* あ */,
                                                  0xAC00,
                                                  0x0E01 /* Thai */,
                                                  0x0E34 /* Thai vowel Mn */,
                                                  0x0627,
                                                  0x064E /* Arabic fatha Mn */,
                                                  0x05D0,
                                                  0x0928,
                                                  0x094D /* virama */,
                                                  0x093F /* Mc */,
                                                  0x0995,
                                                  0x0301,
                                                  0x1F600,
                                                  0x1F3FD,
                                                  0x200D,
                                                  0x2019 /* ’ */,
                                                  0x00E9,
                                                  0x02B0,
                                                  0xFEFF,
                                                  0x1100,
                                                  0x1161};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string s;
  for (size_t i = 0; i < len; ++i) AppendUtf8(&s, kAlphabet[pick(rng)]);
  return s;
}

TEST_P(DifferentialTest, FastMatcherAgreesWithOniguruma) {
  auto fast = *CompileRegex(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  ASSERT_NE(fast->kind(), "oniguruma");
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = RandomText(rng, 1 + iter % 40);
    auto a = Pieces(*fast, text), b = Pieces(*onig, text);
    ASSERT_EQ(a, b) << "text: " << text;
  }
}

// Mostly ASCII with long letter runs (the fast matchers take ASCII letters
// eight bytes at a time): runs of 1 to 20 letters, upper and lower case and
// the bytes just outside A-Z and a-z ('@', '[', '`', '{'), between spaces,
// digits, punctuation, newlines and now and then a non-ASCII letter, mark or
// space.
TEST_P(DifferentialTest, FastMatcherAgreesWithOnigurumaOnAsciiRuns) {
  auto fast = *CompileRegex(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  static const std::vector<uint32_t> kLetters = {'a', 'z', 'A', 'Z', 'm', 'Q', 's', 't'};
  static const std::vector<uint32_t> kOther = {' ',  ' ',  ' ',  '@',    '[',    '`',    '{',
                                               '\'', '\n', '\r', '\t',   '0',    '5',    '.',
                                               ',',  '-',  0xE9, 0x0301, 0x00A0, 0x4E2D, 0x0E34};
  std::mt19937 rng(99);
  std::uniform_int_distribution<size_t> run(1, 20), letter(0, kLetters.size() - 1),
      other(0, kOther.size() - 1), others(1, 3);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string text;
    while (text.size() < 60) {
      for (size_t k = run(rng); k > 0; --k) AppendUtf8(&text, kLetters[letter(rng)]);
      for (size_t k = others(rng); k > 0; --k) AppendUtf8(&text, kOther[other(rng)]);
    }
    auto a = Pieces(*fast, text), b = Pieces(*onig, text);
    ASSERT_EQ(a, b) << "text: " << text;
  }
}

// Runs of whitespace (the matchers take eight spaces at a time and ASCII whitespace by its
// byte): 1 to 24 spaces, tabs, newlines, carriage returns and Unicode spaces between words,
// digits, punctuation, an apostrophe and the end of the text.
TEST_P(DifferentialTest, FastMatcherAgreesWithOnigurumaOnWhitespaceRuns) {
  auto fast = *CompileRegex(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  static const std::vector<uint32_t> kSpace = {' ',  ' ',  ' ',  ' ',    ' ',    ' ',   '\t',
                                               '\n', '\r', '\v', 0x00A0, 0x3000, 0x0085};
  static const std::vector<std::string> kBetween = {
      "a", "Word", "7", "42", ".", "!?", "'s", "\xC3\xA9t\xC3\xA9", "{", "\xE4\xB8\xAD"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> run(1, 24), space(0, kSpace.size() - 1),
      between(0, kBetween.size() - 1), all_spaces(0, 2);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string text;
    while (text.size() < 80) {
      text += kBetween[between(rng)];
      const bool plain = all_spaces(rng) != 0;  // mostly runs of ' ' alone
      for (size_t k = run(rng); k > 0; --k) AppendUtf8(&text, plain ? ' ' : kSpace[space(rng)]);
    }
    if (iter % 2) text += kBetween[between(rng)];  // else the text ends in the run
    auto a = Pieces(*fast, text), b = Pieces(*onig, text);
    ASSERT_EQ(a, b) << "text: " << text;
  }
}

// Long, mostly ASCII texts, where the Llama 3 / Qwen2 matcher takes 64 bytes at a time
// (ascii_block.cc): words of any case, contractions and near-contractions, digit runs,
// punctuation runs with quotes, apostrophes and control bytes, whitespace runs with \r \n
// and long indents, and now and then a non-ASCII character. The matcher with blocks and
// without them must both agree with Oniguruma; the texts are long enough that most of
// each is matched in blocks.
TEST_P(DifferentialTest, FastMatcherAgreesWithOnigurumaOnLongAsciiTexts) {
  auto fast = *CompileRegex(GetParam());
  auto bytewise = *CompileRegexBytewise(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  static const std::vector<std::string> kParts = {"a",        "Zq",
                                                  "word",     "Words",
                                                  "ABC",      "x",
                                                  "'s",       "'S",
                                                  "'t",       "'re",
                                                  "'RE",      "'Ve",
                                                  "'ll",      "'lL",
                                                  "'d",       "'m",
                                                  "'x",       "'r",
                                                  "'l",       "'",
                                                  "''",       "0",
                                                  "12",       "345",
                                                  "6789",     "1234567",
                                                  ".",        ",",
                                                  "!",        "!!",
                                                  "?!.",      "\"",
                                                  "(",        ")",
                                                  "{",        "}",
                                                  "-",        "_",
                                                  "/",        "\\",
                                                  "#",        std::string(1, '\x01'),
                                                  "\x7f",     " ",
                                                  " ",        " ",
                                                  "  ",       "   ",
                                                  "    ",     "        ",
                                                  "\t",       "\n",
                                                  "\n",       "\r\n",
                                                  "\n\n",     " \n",
                                                  "\n ",      "\n    ",
                                                  "\v",       "\f",
                                                  "\t\t",     " \t ",
                                                  "\xC3\xA9", "\xE4\xB8\xAD",
                                                  "\xC2\xA0", "\xCC\x81"};
  static const std::vector<std::string> kPartsAndBytes = [] {  // every ASCII byte alone too
    std::vector<std::string> all = kParts;
    for (int b = 0; b < 0x80; ++b) all.emplace_back(1, static_cast<char>(b));
    return all;
  }();
  std::mt19937 rng(2026);
  std::uniform_int_distribution<size_t> part(0, kPartsAndBytes.size() - 1), len(64, 700);
  std::uniform_int_distribution<int> non_ascii(0, 49);
  for (int iter = 0; iter < 4000; ++iter) {
    std::string text;
    const size_t want = len(rng);
    while (text.size() < want) {
      size_t k = part(rng);
      while (kPartsAndBytes[k][0] & 0x80 && non_ascii(rng) != 0) k = part(rng);  // mostly ASCII
      text += kPartsAndBytes[k];
    }
    auto want_pieces = Pieces(*onig, text);
    ASSERT_EQ(Pieces(*fast, text), want_pieces) << "text: " << text;
    ASSERT_EQ(Pieces(*bytewise, text), want_pieces) << "text: " << text;
  }
}

// Blocks cut short by a non-ASCII character (the block is then the ASCII bytes before it):
// every 16 to 90 ASCII bytes, a letter, mark, digit, punctuation or space that is not
// ASCII, often right after a run of whitespace, newlines, digits or an apostrophe, which
// it may continue (U+00A0 continues a whitespace run, U+0660 a digit run, U+00E9 a word).
TEST_P(DifferentialTest, FastMatcherAgreesWithOnigurumaWhereBlocksMeetOtherBytes) {
  auto fast = *CompileRegex(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  static const std::vector<std::string> kAscii = {
      "a",    "Word", "x",  "'s", "'RE",  "'ll",  "'",   "7",    "12",
      "345",  "6789", ".",  "!!", "\"",   "-",    " ",   " ",    "  ",
      "    ", "\t",   "\n", "\n", "\r\n", "\n\n", " \n", "\n  ", "\n\t "};
  static const std::vector<std::string> kOther = {
      "\xC2\xA0", "\xE3\x80\x80", "\xC2\x85", "\xE2\x80\xA8", "\xC3\xA9",     "\xE4\xB8\xAD",
      "\xCC\x81", "\xD9\xA0",     "\xC2\xB2", "\xE2\x80\x99", "\xE2\x80\x94", "\xF0\x9F\x98\x80"};
  std::mt19937 rng(64);
  std::uniform_int_distribution<size_t> ascii(0, kAscii.size() - 1), other(0, kOther.size() - 1),
      gap(16, 90), tail(0, 4);
  for (int iter = 0; iter < 6000; ++iter) {
    std::string text;
    for (int k = 0; k < 4; ++k) {
      const size_t until = text.size() + gap(rng);
      while (text.size() < until) text += kAscii[ascii(rng)];
      for (size_t t = tail(rng); t > 0; --t) text += kAscii[ascii(rng) % 4 + 15];  // spaces
      text += kOther[other(rng)];
      if (tail(rng) == 0) text += kOther[other(rng)];
    }
    text += std::string(70, 'z');  // so the last character is in a block too
    ASSERT_EQ(Pieces(*fast, text), Pieces(*onig, text)) << "text: " << text;
  }
}

// Blocks through characters of other scripts (two, three and four bytes): letters, which a
// block takes as letters of a run, and marks, punctuation, symbols and emoji, which it takes
// as punctuation (a mark or sign of one character before letters is their prefix, as in
// Devanagari "\u094D\u0924"), between ASCII words, spaces, digits, punctuation and
// apostrophes; now and then a digit or a space of another script, which ends the block
// there, and "'\u017F" ((?i:'s) takes it).
TEST_P(DifferentialTest, FastMatcherAgreesWithOnigurumaOnOtherScripts) {
  auto fast = *CompileRegex(GetParam());
  auto bytewise = *CompileRegexBytewise(GetParam());
  auto onig = *CompileOnigRegex(GetParam());
  // (Kept one to a line by clang-format: ASCII, then letters, then other characters.)
  static const std::vector<std::string> kParts = {
      "a", "Word", "'s", "'S", "'re", "'ll", "'", "'d", "7", "123", ".", "!?", "\"", "-", " ", " ",
      " ", "  ", "\n", "\r\n", "\t",
      // é ſ Ж д α א ا 中 あ 한 न 𝐀 𠀀, and runs of them
      "\u00E9", "\u017F", "\u0416", "\u0434", "\u03B1", "\u05D0", "\u0627", "\u4E2D", "\u3042",
      "\uD55C", "\u0928", "\U0001D400", "\U00020000", "\u0416\u0434\u0434", "\u4E2D\u6587",
      "\u00E9t\u00E9",
      // combining acute, virama, vowel sign I, Arabic fatha, ’ — ， 。 😀 ZWJ ©
      "\u0301", "\u094D", "\u093F", "\u064E", "\u2019", "\u2014", "\uFF0C", "\u3002", "\U0001F600",
      "\u200D", "\u00A9", "\u0928\u094D\u0924\u0947"};
  // Arabic-indic zero, superscript two, no-break space, ideographic space, next line.
  static const std::vector<std::string> kStops = {"\u0660", "\u00B2", "\u00A0", "\u3000", "\u0085"};
  std::mt19937 rng(2027);
  std::uniform_int_distribution<size_t> part(0, kParts.size() - 1), stop(0, kStops.size() - 1),
      len(64, 500);
  std::uniform_int_distribution<int> rare(0, 39);
  for (int iter = 0; iter < 5000; ++iter) {
    std::string text;
    const size_t want = len(rng);
    while (text.size() < want) text += rare(rng) == 0 ? kStops[stop(rng)] : kParts[part(rng)];
    text += std::string(70, 'z');  // so the last characters are in a block too
    auto want_pieces = Pieces(*onig, text);
    ASSERT_EQ(Pieces(*fast, text), want_pieces) << "text: " << text;
    ASSERT_EQ(Pieces(*bytewise, text), want_pieces) << "text: " << text;
  }
}

// The block's classifiers agree on every byte value at every place of a block (the
// byte-at-a-time one, which machines without SSE2 use, is the one the AVX2 and SSE2 ones
// are checked against; the differential tests above run the one the CPU gets).
TEST(AsciiBlockTest, TheClassifiersAgreeOnEveryByteAtEveryPlace) {
  unsigned char block[64];
  for (int b = 0; b < 256; ++b) {
    for (int at = 0; at < 64; ++at) {
      std::memset(block, 'a', sizeof block);
      block[at] = static_cast<unsigned char>(b);
      ASSERT_TRUE(AsciiBlockClassifiersAgree(block)) << "byte " << b << " at " << at;
    }
  }
  std::mt19937 rng(5);
  for (int iter = 0; iter < 20000; ++iter) {
    for (unsigned char& c : block) c = static_cast<unsigned char>(rng() % 128);
    ASSERT_TRUE(AsciiBlockClassifiersAgree(block));
  }
}

INSTANTIATE_TEST_SUITE_P(KnownRegexes, DifferentialTest,
                         ::testing::Values(kQwen2Regex, kLlama3Regex, kGpt2Regex));

}  // namespace
}  // namespace ek::tokenize
