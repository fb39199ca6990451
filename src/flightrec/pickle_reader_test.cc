#include "flightrec/pickle_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace ek::flightrec {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s += static_cast<char>(c);
  return s;
}

std::string Str(const std::string& s) {  // BINUNICODE + BINPUT is added by the caller
  std::string out = "X";
  uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  return out + s;
}

TEST(PickleReader, ReadsTorchStyleDictWithMemoizedStrings) {
  // {"a": "x", "b": "x", "n": -1, "t": 1718000000000000000, "f": 0.25, "p": ("0", "x"), "l": [True,
  // None]}
  std::string p = Bytes({0x80, 2, '}', '('});
  p += Str("a") + Bytes({'q', 0}) + Str("x") + Bytes({'q', 1});
  p += Str("b") + Bytes({'q', 2}) + Bytes({'h', 1});
  p += Str("n") + Bytes({'q', 3}) + Bytes({'J', 0xff, 0xff, 0xff, 0xff});
  p +=
      Str("t") + Bytes({'q', 4}) + Bytes({0x8a, 8, 0x00, 0x00, 0x1f, 0xcc, 0xe5, 0x8f, 0xd7, 0x17});
  p += Str("f") + Bytes({'q', 5}) + Bytes({'G', 0x3f, 0xd0, 0, 0, 0, 0, 0, 0});
  p += Str("p") + Bytes({'q', 6}) + Str("0") + Bytes({'q', 7}) + Bytes({'h', 1, 0x86});
  p += Str("l") + Bytes({'q', 8}) + Bytes({']', '(', 0x88, 'N', 'e'});
  p += Bytes({'u', 'q', 9, '.'});
  auto doc = ParsePickle(p);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  NodeId root = doc->root(), v;
  ASSERT_EQ(doc->kind(root), Kind::kDict);
  EXPECT_EQ(doc->Size(root), 7u);
  ASSERT_TRUE(doc->Find(root, "b", &v));
  EXPECT_EQ(doc->AsString(v), "x");
  ASSERT_TRUE(doc->Find(root, "n", &v));
  EXPECT_EQ(doc->AsInt(v), -1);
  ASSERT_TRUE(doc->Find(root, "t", &v));
  EXPECT_EQ(doc->AsInt(v), 1718000000000000000);
  ASSERT_TRUE(doc->Find(root, "f", &v));
  EXPECT_DOUBLE_EQ(doc->AsFloat(v), 0.25);
  ASSERT_TRUE(doc->Find(root, "p", &v));
  ASSERT_EQ(doc->kind(v), Kind::kTuple);
  EXPECT_EQ(doc->AsString(doc->Children(v)[1]), "x");
  ASSERT_TRUE(doc->Find(root, "l", &v));
  ASSERT_EQ(doc->Size(v), 2u);
  EXPECT_EQ(doc->kind(doc->Children(v)[0]), Kind::kBool);
  EXPECT_EQ(doc->kind(doc->Children(v)[1]), Kind::kNone);
}

TEST(PickleReader, NegativeLong1IsSignExtended) {
  auto doc = ParsePickle(Bytes({0x80, 2, 0x8a, 2, 0x00, 0xff, '.'}));  // -256
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->AsInt(doc->root()), -256);
}

TEST(PickleReader, RefusesGlobalWithByteOffset) {
  auto doc = ParsePickle(
      "\x80\x02"
      "cos\nsystem\n"
      "X\x02\x00\x00\x00ls"
      "\x85R.");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().message(),
            "byte 2: opcode 0x63 (GLOBAL) is not allowed: a flight-recorder dump holds data only");
}

TEST(PickleReader, RefusesReduceAndStackGlobal) {
  auto reduce = ParsePickle(Bytes({0x80, 2, 'N', 'N', 'R', '.'}));
  ASSERT_FALSE(reduce.ok());
  EXPECT_NE(reduce.status().message().find("byte 4: opcode 0x52 (REDUCE)"), std::string::npos);
  auto sg = ParsePickle(Bytes({0x80, 2, 'N', 'N', 0x93, '.'}));
  ASSERT_FALSE(sg.ok());
  EXPECT_NE(sg.status().message().find("STACK_GLOBAL"), std::string::npos);
  auto build = ParsePickle(Bytes({0x80, 2, '}', '}', 'b', '.'}));
  ASSERT_FALSE(build.ok());
  EXPECT_NE(build.status().message().find("BUILD"), std::string::npos);
}

TEST(PickleReader, TruncatedInputsAreErrors) {
  EXPECT_FALSE(ParsePickle("").ok());
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, '}', '('})).ok());  // no STOP
  EXPECT_FALSE(
      ParsePickle(Bytes({0x80, 2, 'X', 10, 0, 0, 0, 'a'})).ok());  // string runs past the end
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, 'J', 1})).ok());        // operand cut short
  auto r = ParsePickle(Bytes({0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f, '.'}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("byte 2: truncated operand"), std::string::npos);
}

TEST(PickleReader, StructuralErrors) {
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, 'h', 3, '.'})).ok());              // memo never stored
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, '}', '(', 'N', 'u', '.'})).ok());  // odd SETITEMS
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, ']', '(', 'N', 'u', '.'})).ok());  // SETITEMS on a list
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 2, 'N', 'N', '.'})).ok());            // two values at STOP
  EXPECT_FALSE(ParsePickle(Bytes({0x80, 1, 'N', '.'})).ok());                 // protocol 1
  EXPECT_FALSE(
      ParsePickle(Bytes({0x80, 2, 0x8a, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, '.'})).ok());  // > 64 bits
}

TEST(PickleReader, AcceptsCPythonRepickledOpcodes) {
  // protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, EMPTY_DICT, SETITEM
  std::string p = Bytes(
      {0x80, 4, 0x95, 9, 0, 0, 0, 0, 0, 0, 0, '}', 0x94, 0x8c, 1, 'k', 0x94, 'K', 7, 's', '.'});
  auto doc = ParsePickle(p);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  NodeId v;
  ASSERT_TRUE(doc->Find(doc->root(), "k", &v));
  EXPECT_EQ(doc->AsInt(v), 7);
}

}  // namespace
}  // namespace ek::flightrec
