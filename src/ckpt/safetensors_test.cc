#include "ckpt/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>

#include "ckpt/test_util.h"

namespace ek::ckpt {
namespace {

using testing::FakeTensor;
using testing::MakeSafetensors;
using testing::RawSafetensors;

Result<SafetensorsHeader> Parse(const std::string& file) {
  return ParseSafetensorsHeader(file, file.size(), "x.safetensors");
}

// The error message of parsing `file`; "" when it parses.
std::string ParseErrorOf(const std::string& file) {
  auto h = Parse(file);
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), StatusCode::kCorrupt) << h.status().message();
  return h.status().message();
}

std::string OneTensor(const std::string& entry, const std::string& data) {
  return RawSafetensors("{\"w\":" + entry + "}", data);
}

TEST(Safetensors, ValidFileParses) {
  std::string file = MakeSafetensors({{"a", {2, 3}, "F32"}, {"b", {4}}, {"empty", {0, 5}}});
  auto h = Parse(file);
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->tensors.size(), 3u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[0].dtype, "F32");
  EXPECT_EQ(h->tensors[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(h->tensors[1].begin, 24u);
  EXPECT_EQ(h->tensors[1].end, 32u);
  EXPECT_EQ(h->tensors[2].bytes(), 0u);
  EXPECT_EQ(h->data_bytes, 32u);
  EXPECT_EQ(h->data_start + h->data_bytes, file.size());
  ASSERT_EQ(h->metadata.size(), 1u);
  EXPECT_EQ(h->metadata[0].first, "format");
  EXPECT_EQ(h->metadata[0].second, "pt");
  // The offset of a tensor's entry points at its quoted name.
  EXPECT_EQ(file.substr(h->tensors[1].header_offset, 3), "\"b\"");
}

TEST(Safetensors, TensorsInAnyHeaderOrderAndNoTensorsAtAll) {
  std::string file = RawSafetensors(
      R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
      "abcd");
  EXPECT_EQ(ParseErrorOf(file), "");
  EXPECT_EQ(ParseErrorOf(RawSafetensors("{}", "")), "");
  EXPECT_EQ(ParseErrorOf(RawSafetensors("{\"__metadata__\":{}}   ", "")), "");
}

TEST(Safetensors, SubByteDtypesMustFillWholeBytes) {
  EXPECT_EQ(ParseErrorOf(OneTensor(R"({"dtype":"F4","shape":[4],"data_offsets":[0,2]})", "ab")),
            "");
  EXPECT_NE(ParseErrorOf(OneTensor(R"({"dtype":"F4","shape":[3],"data_offsets":[0,2]})", "ab"))
                .find("whole bytes"),
            std::string::npos);
}

TEST(Safetensors, HeaderLengthBeyondTheFile) {
  std::string file(4096, ' ');
  uint64_t n = 99999999;
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  EXPECT_EQ(ParseErrorOf(file),
            "x.safetensors: byte 8: header length 99999999 exceeds the file (4096 bytes)");
  n = 1ull << 40;
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  EXPECT_EQ(ParseErrorOf(file),
            "x.safetensors: byte 0: header length 1099511627776 exceeds the 100000000-byte limit");
  n = UINT64_MAX;
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  EXPECT_NE(ParseErrorOf(file), "");
  EXPECT_EQ(ParseErrorOf("abc"),
            "x.safetensors: byte 0: file is 3 bytes, too short for the 8-byte header length");
}

TEST(Safetensors, MalformedHeaderJsonNamesTheByte) {
  // Header byte 14 (file byte 22) is where the value should be.
  std::string err = ParseErrorOf(RawSafetensors(R"({"w":{"dtype":}})", ""));
  EXPECT_NE(err.find("x.safetensors: byte 22: malformed header JSON"), std::string::npos) << err;
  EXPECT_NE(
      ParseErrorOf(RawSafetensors("[1,2]", "")).find("byte 8: header does not start with '{'"),
      std::string::npos);
  EXPECT_NE(ParseErrorOf(RawSafetensors("{\"w\":1}", "")).find("tensor 'w' is not an object"),
            std::string::npos);
  EXPECT_NE(ParseErrorOf(RawSafetensors("{\"a\":1} x", "")).find("malformed header JSON"),
            std::string::npos);
  EXPECT_NE(ParseErrorOf(RawSafetensors("{\"\xff\":1}", "")).find("byte 8: malformed header JSON"),
            std::string::npos);
}

TEST(Safetensors, FieldRules) {
  auto err = [](const std::string& entry, const std::string& data) {
    return ParseErrorOf(OneTensor(entry, data));
  };
  EXPECT_NE(
      err(R"({"dtype":"Q7","shape":[1],"data_offsets":[0,1]})", "a").find("unknown dtype 'Q7'"),
      std::string::npos);
  EXPECT_NE(
      err(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})", "a").find("non-negative integer"),
      std::string::npos);
  EXPECT_NE(
      err(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", "a").find("non-negative integer"),
      std::string::npos);
  EXPECT_NE(err(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", "a").find("not [begin, end]"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"U8","shape":[1],"data_offsets":[1,0]})", "a").find("end before begin"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"U8","shape":[1]})", "a").find("no data_offsets"), std::string::npos);
  EXPECT_NE(err(R"({"shape":[1],"data_offsets":[0,1]})", "a").find("no dtype"), std::string::npos);
  EXPECT_NE(
      err(R"({"dtype":"BF16","shape":[3],"data_offsets":[0,4]})", "abcd").find("3 x BF16 needs 6"),
      std::string::npos);
  EXPECT_NE(err(R"({"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,1]})", "a")
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(err(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1],"dtype":"U8"})", "a")
                .find("dtype twice"),
            std::string::npos);
  std::string dup = ParseErrorOf(RawSafetensors(
      R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
      "ab"));
  EXPECT_NE(dup.find("tensor 'w' appears twice"), std::string::npos) << dup;
  EXPECT_NE(ParseErrorOf(RawSafetensors(R"({"__metadata__":{"a":1}})", "")).find("is not a string"),
            std::string::npos);
  EXPECT_NE(ParseErrorOf(RawSafetensors(R"({"__metadata__":[]})", ""))
                .find("__metadata__ is not an object"),
            std::string::npos);
  // Unknown keys inside an entry are ignored, as the safetensors crate does.
  EXPECT_EQ(err(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1],"note":{"x":[1]}})", "a"), "");
}

TEST(Safetensors, OverlapsAndHolesAreCorrupt) {
  std::string overlap = ParseErrorOf(RawSafetensors(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
      "abcdef"));
  EXPECT_NE(overlap.find("tensor 'b' (data offsets 2-6) overlaps tensor 'a' (0-4)"),
            std::string::npos)
      << overlap;
  std::string hole = ParseErrorOf(RawSafetensors(
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
      "abcdef"));
  EXPECT_NE(hole.find("2 bytes before tensor 'b' belong to no tensor (a hole at data offsets 2-4)"),
            std::string::npos)
      << hole;
  std::string leading =
      ParseErrorOf(OneTensor(R"({"dtype":"U8","shape":[2],"data_offsets":[1,3]})", "abc"));
  EXPECT_NE(leading.find("a hole at data offsets 0-1"), std::string::npos) << leading;
}

TEST(Safetensors, TruncatedAndOverlongFiles) {
  std::string file = MakeSafetensors({{"a", {8}}});
  std::string cut = file.substr(0, file.size() - 3);
  EXPECT_EQ(ParseErrorOf(cut), "x.safetensors: truncated: header declares data up to byte " +
                                   std::to_string(file.size()) + ", file ends at byte " +
                                   std::to_string(cut.size()));
  std::string err = ParseErrorOf(file + "zz");
  EXPECT_NE(err.find("byte " + std::to_string(file.size()) + ": 2 bytes after the data region"),
            std::string::npos)
      << err;
}

TEST(Safetensors, ReadsTheHeaderFromAFile) {
  testing::ScratchDir dir;
  std::string file = MakeSafetensors({{"a", {2, 2}}});
  testing::Put(dir / "m.safetensors", file);
  auto h = ReadSafetensorsHeader(dir / "m.safetensors", "m.safetensors");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->tensors.size(), 1u);
  auto missing = ReadSafetensorsHeader(dir / "none.safetensors", "none.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // A 2 GiB sparse file: only its header is read.
  std::string big = RawSafetensors(
      R"({"a":{"dtype":"U8","shape":[2147483648],"data_offsets":[0,2147483648]}})", "");
  testing::Put(dir / "big.safetensors", big);
  ASSERT_EQ(
      ::truncate((dir / "big.safetensors").c_str(), static_cast<off_t>(big.size() + 2147483648ull)),
      0);
  auto hb = ReadSafetensorsHeader(dir / "big.safetensors", "");
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_EQ(hb->data_bytes, 2147483648ull);
}

// Random bytes and mutations of valid headers: every input gives an answer,
// none crashes (run under -DEK_SANITIZE=ON for the memory-safety half).
TEST(Safetensors, HostileHeadersNeverCrash) {
  std::mt19937_64 rng(20240611);
  const std::vector<std::string> seeds = {
      MakeSafetensors({{"a", {2, 3}, "F32"}, {"b", {4}}, {"c", {0}}}),
      MakeSafetensors({{"model.layers.0.self_attn.q_proj.weight", {8, 8}}}),
      RawSafetensors(
          R"({"__metadata__":{"k":"v"},"x":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "z"),
  };
  const std::string tokens[] = {"{",
                                "}",
                                "[",
                                "]",
                                ",",
                                ":",
                                "\"",
                                "\\",
                                "-1",
                                "1e400",
                                "18446744073709551616",
                                "\"dtype\"",
                                "\"shape\"",
                                "\"data_offsets\"",
                                "\"__metadata__\"",
                                "null",
                                "\xc3",
                                "\xff",
                                std::string(1, '\0'),
                                "0"};
  constexpr int kRounds = 600;  // 200,000 ran clean under ASan/UBSan when this was written
  int parsed = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::string file;
    const std::string& seed = seeds[rng() % seeds.size()];
    switch (i % 5) {
      case 0: {  // random bytes
        file.resize(rng() % 200);
        for (char& c : file) c = static_cast<char>(rng());
        break;
      }
      case 1: {  // byte flips
        file = seed;
        for (int k = 0, n = 1 + rng() % 4; k < n; ++k)
          file[rng() % file.size()] ^= static_cast<char>(1 + rng() % 255);
        break;
      }
      case 2: {  // truncation or extension
        file = seed.substr(0, rng() % (seed.size() + 1));
        if (rng() % 2) file += std::string(rng() % 40, static_cast<char>(rng()));
        break;
      }
      case 3: {  // JSON tokens spliced into the header, length fixed up
        std::string header = seed.substr(8, seed.size() - 8);
        for (int k = 0, n = 1 + rng() % 3; k < n; ++k) {
          size_t at = 1 + rng() % (header.size() - 1);
          header.insert(at, tokens[rng() % std::size(tokens)]);
        }
        file = RawSafetensors(header, "");
        break;
      }
      default: {  // a lying header length
        file = seed;
        uint64_t n = rng() % 4 == 0 ? rng() : rng() % (file.size() + 16);
        for (int k = 0; k < 8; ++k) file[k] = static_cast<char>((n >> (8 * k)) & 0xff);
        break;
      }
    }
    auto h = ParseSafetensorsHeader(file, file.size(), "fuzz.safetensors");
    if (h.ok()) {
      ++parsed;
      EXPECT_EQ(h->data_start + h->data_bytes, file.size());
    } else {
      EXPECT_EQ(h.status().code(), StatusCode::kCorrupt) << h.status().message();
      EXPECT_EQ(h.status().message().rfind("fuzz.safetensors: ", 0), 0u) << h.status().message();
    }
  }
  EXPECT_LT(parsed, kRounds);
}

}  // namespace
}  // namespace ek::ckpt
