#include "core/parse.h"

#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <vector>

#include "core/random.h"

namespace ek {
namespace {

TEST(ParseTest, WholeStringOrNothing) {
  EXPECT_EQ(ParseInt64("42"), 42);
  EXPECT_EQ(ParseInt64("-7"), -7);
  for (const char* bad : {"", "x", "4x", " 4", "4 ", "+4", "99999999999999999999", "0x10"}) {
    EXPECT_FALSE(ParseInt64(bad)) << bad;
  }
  EXPECT_EQ(ParseUint64("00000000deadbeef", 16), 0xdeadbeefULL);
  EXPECT_FALSE(ParseUint64("-1"));
  EXPECT_FALSE(ParseUint64("zzzz", 16));
  EXPECT_EQ(ParseIntIn("65535", 1, 65535), 65535);
  EXPECT_FALSE(ParseIntIn("65536", 1, 65535));
  EXPECT_EQ(ParseDouble("1e-5"), 1e-5);
  EXPECT_FALSE(ParseDouble("nan"));
  EXPECT_FALSE(ParseDouble("1.5.2"));
}

// The fast path against std::from_chars, to the bit and to the character where it stops.
TEST(ParseTest, FromCharsDoubleIsFromChars) {
  std::vector<std::string> cases = {"0",
                                    "-0",
                                    "1006.15",
                                    "989.88",
                                    "83968",
                                    "0.1",
                                    "-3.25",
                                    "1.",
                                    ".5",
                                    "-.5",
                                    "-",
                                    "",
                                    ".",
                                    "1e5",
                                    "1.5E-3",
                                    "inf",
                                    "nan",
                                    "-nan",
                                    "123456789012345",
                                    "1234567890123456",
                                    "0.0000000000000000000001",
                                    "0.00000000000000000000001",
                                    "12 W",
                                    "100 %",
                                    "7.5x",
                                    "+1",
                                    "00012.500",
                                    "9007199254740993",
                                    "1.7976931348623157e308"};
  uint64_t rng = 7;
  auto uniform = [&](uint64_t n) { return UniformBelow(rng, n); };
  for (int i = 0; i < 20000; ++i) {
    std::string s = uniform(4) == 0 ? "-" : "";
    const int whole = static_cast<int>(uniform(12));
    for (int d = 0; d < whole; ++d) s += static_cast<char>('0' + uniform(10));
    if (uniform(3) != 0) {
      s += '.';
      const int frac = static_cast<int>(uniform(20));
      for (int d = 0; d < frac; ++d) s += static_cast<char>('0' + uniform(10));
    }
    if (uniform(10) == 0) s += " MiB";
    cases.push_back(s);
  }
  for (const std::string& s : cases) {
    double want = 0, got = 0;
    auto a = std::from_chars(s.data(), s.data() + s.size(), want);
    auto b = FromCharsDouble(s.data(), s.data() + s.size(), got);
    ASSERT_EQ(a.ec, b.ec) << s;
    ASSERT_EQ(a.ptr, b.ptr) << s;
    if (a.ec == std::errc()) {
      ASSERT_EQ(std::bit_cast<uint64_t>(want), std::bit_cast<uint64_t>(got)) << s;
    }
  }
}

}  // namespace
}  // namespace ek
