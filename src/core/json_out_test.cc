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

TEST(JsonWriterTest, PlacesCommasAndKeysInBothStyles) {
  for (
      auto [style, want] :
      {std::pair{
           JsonWriter::kCompact,
           std::string(
               R"({"a":1,"b":[true,null,"x\"y"],"c":{},"d":[],"e":2.50,"f":18446744073709551615})")},
       std::pair{
           JsonWriter::kSpaced,
           std::string(
               R"({"a": 1, "b": [true, null, "x\"y"], "c": {}, "d": [], "e": 2.50, "f": 18446744073709551615})")}}) {
    JsonWriter w(style);
    w.BeginObject().Key("a").Int(1).Key("b").BeginArray().Bool(true).Null().Str("x\"y").EndArray();
    w.Key("c").BeginObject().EndObject().Key("d").BeginArray().EndArray().Key("e").Fixed(2.5, 2);
    w.Key("f").Uint(18446744073709551615ull).EndObject();
    EXPECT_EQ(w.str(), want);
    EXPECT_EQ(w.Line(), want + "\n");
  }
}

TEST(JsonWriterTest, RawPutsInAValueWrittenElsewhereWithoutItsNewline) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginArray().Raw("{\"x\": 1}\n").Raw("[]").Int(-3).EndArray();
  EXPECT_EQ(w.str(), "[{\"x\": 1}, [], -3]");
}

TEST(JsonWriterTest, IndentedPutsEachMemberOnALineAsPythonsIndent2) {
  // json.dumps({"a": 1, "b": [True, {}], "c": {"d": "x"}, "e": []}, indent=2)
  JsonWriter w(JsonWriter::kIndented);
  w.BeginObject().Key("a").Int(1).Key("b").BeginArray().Bool(true).BeginObject().EndObject();
  w.EndArray().Key("c").BeginObject().Key("d").Str("x").EndObject();
  w.Key("e").BeginArray().EndArray().EndObject();
  EXPECT_EQ(w.Line(),
            "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    {}\n  ],\n  \"c\": {\n    \"d\": \"x\"\n  "
            "},\n  \"e\": []\n}\n");
}

TEST(JsonWriterTest, DoubleIsFmtsShortestRoundTripForm) {
  JsonWriter w;
  w.BeginArray().Double(0.1 + 0.2).Double(1e-7).Double(52345.5).Double(3).Double(-0.0);
  w.Double(1e21).Double(1.0 / 3).EndArray();
  EXPECT_EQ(w.str(), "[0.30000000000000004,1e-07,52345.5,3,-0,1e+21,0.3333333333333333]");
}

}  // namespace
}  // namespace ek
