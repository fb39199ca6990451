#include "tokjson/byte_level.h"

#include <gtest/gtest.h>

#include <string>

namespace ek::tokjson {
namespace {

TEST(ByteLevel, PrintableBytesAreThemselvesAndTheRestAreShifted) {
  std::string out;
  ASSERT_TRUE(ByteLevelToBytes("hello", &out));
  EXPECT_EQ(out, "hello");
  // U+0120 is the 33rd shifted code point: byte 0x20 (the space); U+010A is 0x0A.
  ASSERT_TRUE(ByteLevelToBytes("\xC4\xA0world\xC4\x8A", &out));
  EXPECT_EQ(out, " world\n");
  // U+00E9 is kept as itself: the raw byte 0xE9, not its UTF-8.
  ASSERT_TRUE(ByteLevelToBytes("\xC3\xA9", &out));
  EXPECT_EQ(out, std::string("\xE9"));
  // U+0100 is byte 0x00; U+0143 is the last shifted code point, byte 0xAD.
  ASSERT_TRUE(ByteLevelToBytes("\xC4\x80\xC5\x83", &out));
  EXPECT_EQ(out, std::string("\x00\xAD", 2));
}

TEST(ByteLevel, ACharacterOutsideTheTableIsRefused) {
  std::string out;
  EXPECT_FALSE(ByteLevelToBytes("\xE4\xB8\xAD", &out));  // U+4E2D
  EXPECT_FALSE(ByteLevelToBytes("a\xC5\x84", &out));     // U+0144: past the table
  EXPECT_FALSE(ByteLevelToBytes(" ", &out));             // a raw space is not in it
}

}  // namespace
}  // namespace ek::tokjson
