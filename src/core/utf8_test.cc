#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace ek {
namespace {

// Every code point encodes and decodes back, by each decoder, at its RFC 3629 length.
TEST(Utf8Codec, EveryScalarValueRoundTrips) {
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(&s, cp);
    const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), want) << cp;
    uint32_t a = 0, b = 0;
    size_t len = 0, bad = 0;
    ASSERT_EQ(DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()), &a), want);
    ASSERT_EQ(a, cp);
    ASSERT_EQ(DecodeUtf8At(s, 0, &len), cp);
    ASSERT_EQ(len, want);
    ASSERT_EQ(DecodeUtf8Checked(s, 0, &b, &bad), want) << cp;
    ASSERT_EQ(b, cp);
    ASSERT_EQ(FirstInvalidUtf8(s), std::string_view::npos);
  }
}

TEST(Utf8Codec, CheckedDecodingRefusesIllFormedSequencesWithTheirLength) {
  uint32_t cp = 7;
  size_t bad = 0;
  auto check = [&](std::string_view s, size_t want_bad) {
    cp = 7;
    bad = 0;
    EXPECT_EQ(DecodeUtf8Checked(s, 0, &cp, &bad), 0u) << s;
    EXPECT_EQ(cp, 7u) << "untouched";
    EXPECT_EQ(bad, want_bad) << s;
  };
  check("\xff", 1);
  check("\x80", 1);          // a lone continuation byte
  check("\xc0\xaf", 1);      // overlong
  check("\xed\xa0\x80", 1);  // an encoded surrogate
  check("\xe2\x82", 2);      // truncated by the end
  check(
      "\xe2\x82"
      "a",
      2);                        // truncated by an ASCII byte
  check("\xf4\x90\x80\x80", 1);  // above U+10FFFF
  check("\xf0\x9f\x98", 3);      // a truncated emoji
  // Offsets inside a string.
  std::string_view s = "a\xc3\xa9\xff";
  EXPECT_EQ(DecodeUtf8Checked(s, 1, &cp), 2u);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(DecodeUtf8Checked(s, 3, &cp), 0u);
  EXPECT_EQ(FirstInvalidUtf8(s), 3u);
}

TEST(Utf8Codec, CharStartStepsBackOverContinuationBytesToTheFloor) {
  const std::string s = "a\xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80";  // a é ▁ 😀
  EXPECT_EQ(Utf8CharStart(s, 1), 0u);
  EXPECT_EQ(Utf8CharStart(s, 3), 1u);
  EXPECT_EQ(Utf8CharStart(s, 6), 3u);
  EXPECT_EQ(Utf8CharStart(s, s.size()), 6u);
  EXPECT_EQ(Utf8CharStart(s, s.size(), 7), 7u);  // never before the floor
}

TEST(Utf8Codec, DecodeAtNeverReadsPastTheEnd) {
  // A lead byte whose sequence the view cuts off: the missing bytes read as 0.
  std::string backing = "\xe2\x82\xac";
  std::string_view cut(backing.data(), 2);
  size_t len = 0;
  EXPECT_EQ(DecodeUtf8At(cut, 0, &len), 0x2080u);
  EXPECT_EQ(len, 3u);
}

}  // namespace
}  // namespace ek
