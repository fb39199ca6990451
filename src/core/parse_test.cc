#include "core/parse.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ek
