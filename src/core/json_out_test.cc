#include "core/json_out.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

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

TEST(JsonWriterTest, DoubleIsFmtsShortestForm) {
  JsonWriter w;
  w.BeginArray().Double(0.1).Double(1e21).Double(8e10).Double(3).Double(-0.0).Double(1.5e-7);
  w.Double(0.1 + 0.2).Double(54.054054054054056).EndArray();
  EXPECT_EQ(w.str(), "[0.1,1e+21,80000000000,3,-0,1.5e-07,0.30000000000000004,54.054054054054056]");
  for (double v : {0.1 + 0.2, 1e300, 5e-324, 123456.789, 2.5}) {
    JsonWriter one;
    one.Double(v);
    EXPECT_EQ(one.str(), fmt::format("{}", v));
    EXPECT_EQ(std::strtod(one.str().c_str(), nullptr), v);  // reads back as the same double
  }
}

TEST(JsonWriterTest, LinesPutEachMemberOnALineIndentedByLevel) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject(JsonWriter::kLines).Key("a").Int(1).Key("b").BeginObject().Key("x").Int(2);
  w.Key("y").BeginArray().Int(3).Int(4).EndArray().EndObject();
  w.Key("rows").BeginArray(JsonWriter::kLines);
  w.BeginObject().Key("r").Int(0).EndObject().BeginObject().Key("r").Int(1).EndObject();
  w.EndArray().Key("none").BeginArray(JsonWriter::kLines).EndArray();
  w.Key("empty").BeginObject(JsonWriter::kLines).EndObject().EndObject();
  EXPECT_EQ(w.Line(),
            "{\n"
            "  \"a\": 1,\n"
            "  \"b\": {\"x\": 2, \"y\": [3, 4]},\n"
            "  \"rows\": [\n"
            "    {\"r\": 0},\n"
            "    {\"r\": 1}\n"
            "  ],\n"
            "  \"none\": [],\n"
            "  \"empty\": {}\n"
            "}\n");
  JsonWriter compact;
  compact.BeginArray(JsonWriter::kLines).Int(1).BeginArray().Int(2).Int(3).EndArray().EndArray();
  EXPECT_EQ(compact.str(), "[\n  1,\n  [2,3]\n]");
}

TEST(JsonWriterTest, ArraysOfARange) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("ranks").IntArray(std::vector<int>{0, -1, 2});
  w.Key("steps").IntArray(std::vector<uint64_t>{18446744073709551615u});
  w.Key("hosts").StrArray(std::vector<std::string>{"a", "b\"c"});
  w.Key("none").IntArray(std::vector<int64_t>{}).EndObject();
  EXPECT_EQ(w.str(),
            R"({"ranks": [0, -1, 2], "steps": [18446744073709551615], "hosts": ["a", "b\"c"], )"
            R"("none": []})");
}

// The escape as the byte-by-byte loop wrote it before AppendJsonString went a word at a time.
std::string JsonOutTestEscapeOneByOne(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

TEST(JsonOutTest, EveryByteAtEveryPlaceOfAWordEscapesAsOneByOne) {
  for (size_t len = 1; len <= 19; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string s(len, 'a');
        s[at] = static_cast<char>(b);
        if (at + 1 < len) s[at + 1] = static_cast<char>(0xC3);  // a byte >= 0x80 beside it
        ASSERT_EQ(JsonString(s), JsonOutTestEscapeOneByOne(s))
            << "len " << len << " at " << at << " byte " << b;
      }
    }
  }
}

TEST(JsonWriterTest, ClearStartsANewDocument) {
  JsonWriter w;
  w.BeginObject().Key("a").BeginArray().Int(1);
  w.Clear();
  w.BeginObject().Key("b").Int(2).EndObject();
  EXPECT_EQ(w.str(), R"({"b":2})");
}

}  // namespace
}  // namespace ek
