#include "core/json_fields.h"

#include <gtest/gtest.h>

namespace ek {
namespace {

TEST(JsonFieldsTest, MissingOrMistypedIsNamedNeverZero) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_FALSE(
      parser
          .parse(std::string_view(
              R"({"name":"a","n":3,"big":-1,"x":1.5,"ok":true,"h":"00000000000000ff","o":{"k":"v"},"arr":[{"b":1},2]})"))
          .get(root));
  auto f = JsonFields::Root(root, "f.json");
  ASSERT_TRUE(f.ok());
  std::string s;
  EXPECT_TRUE(f->Str("name", &s).ok());
  EXPECT_EQ(s, "a");
  int n = 0;
  EXPECT_TRUE(f->Int("n", &n).ok());
  EXPECT_EQ(n, 3);
  uint64_t u = 7;
  auto neg = f->U64("big", &u);
  EXPECT_EQ(neg.message(), "f.json: big: not a non-negative integer");
  EXPECT_EQ(u, 7u);
  EXPECT_EQ(f->Str("missing", &s).message(), "f.json: missing: missing");
  EXPECT_EQ(f->Int("name", &n).message(), "f.json: name: not an integer");
  double d = 0;
  EXPECT_TRUE(f->Num("n", &d).ok());
  EXPECT_EQ(d, 3);
  EXPECT_TRUE(f->Num("x", &d).ok());
  uint64_t h = 0;
  EXPECT_TRUE(f->Hex64("h", &h).ok());
  EXPECT_EQ(h, 255u);
  EXPECT_FALSE(f->Hex64("name", &h).ok());
  int8_t small = 0;
  EXPECT_TRUE(f->Int("n", &small).ok());
  JsonFields o = *f;
  ASSERT_TRUE(f->Object("o", &o).ok());
  EXPECT_EQ(o.Int("k", &n).message(), "f.json: o.k: not an integer");
  simdjson::dom::array arr;
  ASSERT_TRUE(f->Array("arr", &arr).ok());
  size_t i = 0;
  for (auto e : arr) {
    auto item = f->Item(e, "arr", i++);
    if (i == 1) {
      ASSERT_TRUE(item.ok());
      EXPECT_EQ(item->Str("b", &s).message(), "f.json: arr[0].b: not a string");
    } else {
      EXPECT_EQ(item.status().message(), "f.json: arr[1]: not an object");
    }
  }
  // Optional: absent is fine, present must be right.
  std::string keep = "kept";
  EXPECT_TRUE(f->OptStr("absent", &keep).ok());
  EXPECT_EQ(keep, "kept");
  EXPECT_FALSE(f->OptStr("n", &keep).ok());
}

TEST(JsonFieldsTest, ListsNullableNumbersAndKeys) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_FALSE(
      parser
          .parse(std::string_view(
              R"({"hosts":["a",3],"ranks":[0,1,-2],"names":["x","y"],"t":null,"u":2,"m":{"0":1,"x":2},"s":"a"})"))
          .get(root));
  auto f = JsonFields::Root(root, "f.json");
  ASSERT_TRUE(f.ok());
  std::vector<std::string> names;
  EXPECT_EQ(f->StrList("hosts", &names).message(), "f.json: hosts[1]: not a string");
  EXPECT_TRUE(f->StrList("names", &names).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f->StrList("s", &names).message(), "f.json: s: not an array");
  std::vector<int64_t> ints;
  EXPECT_EQ(f->IntList("ranks", 0, 10, &ints).message(),
            "f.json: ranks[2]: -2 is out of range [0, 10]");
  EXPECT_EQ(f->IntList("names", 0, 10, &ints).message(), "f.json: names[0]: not an integer");
  std::optional<double> d = 1;
  EXPECT_TRUE(f->NumOrNull("t", &d).ok());
  EXPECT_FALSE(d.has_value());
  EXPECT_TRUE(f->NumOrNull("u", &d).ok());
  EXPECT_EQ(d, 2.0);
  EXPECT_EQ(f->NumOrNull("s", &d).message(), "f.json: s: not a number");
  EXPECT_EQ(f->NumOrNull("gone", &d).message(), "f.json: gone: missing");
  EXPECT_TRUE(f->OptNumOrNull("gone", &d).ok());
  EXPECT_FALSE(d.has_value());
  JsonFields m = *f;
  ASSERT_TRUE(f->Object("m", &m).ok());
  EXPECT_EQ(m.Keys(), (std::vector<std::string_view>{"0", "x"}));
  EXPECT_TRUE(f->Keys().size() == 7);
}

}  // namespace
}  // namespace ek
