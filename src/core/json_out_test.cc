#include "core/json_out.h"

#include <gtest/gtest.h>

namespace ek {
namespace {

TEST(JsonOutTest, EscapesControlAndQuotes) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01 é"), "\"a\\\"b\\\\c\\n\\u0001 é\"");
}

TEST(JsonOutTest, Ints) {
  std::string s;
  int32_t v[] = {0, -5, 151643};
  AppendIntArray(&s, v, 3);
  EXPECT_EQ(s, "[0,-5,151643]");
}

TEST(JsonOutTest, CompactRanges) {
  EXPECT_EQ(CompactRanges({4, 0, 1, 2, 15, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), "0-2,4-15");
  EXPECT_EQ(CompactRanges({3}), "3");
  EXPECT_EQ(CompactRanges({}), "");
}

}  // namespace
}  // namespace ek
