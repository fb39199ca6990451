// The SentencePiece-style family on a tiny tokenizer.json written here; the
// real files (Gemma, Llama 2) are checked against Hugging Face by
// tests/tokenize/parity.py and tests/tokenizer_variants.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_out.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer.h"

namespace ek::tokenize {
namespace {

// <unk>=0 <s>=1 </s>=2, <0x00>..<0xFF> = 3..258, then ▁ h e l o w ▁h he ll
// ▁he ▁hell ▁hello (259..270), merges building ▁hello. Llama 2's normalizer
// and decoder unless given.
constexpr std::string_view kLlama2Normalizer =
    R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},)"
    R"({"type":"Replace","pattern":{"String":" "},"content":"▁"}]})";
constexpr std::string_view kLlama2Decoder =
    R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},)"
    R"({"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})";

std::string SpJson(std::string_view normalizer = kLlama2Normalizer, std::string_view pre = "null",
                   std::string_view decoder = kLlama2Decoder, bool byte_fallback = true,
                   bool fuse_unk = true) {
  std::string vocab = R"({"<unk>":0,"<s>":1,"</s>":2)";
  for (int b = 0; b < 256; ++b) vocab += fmt::format(R"(,"<0x{:02X}>":{})", b, 3 + b);
  int id = 259;
  for (const char* t : {"▁", "h", "e", "l", "o", "w", "▁h", "he", "ll", "▁he", "▁hell", "▁hello"})
    vocab += fmt::format(",{}:{}", JsonString(t), id++);
  vocab += "}";
  return fmt::format(
      R"({{"version":"1.0","truncation":null,"padding":null,"added_tokens":[)"
      R"({{"id":0,"content":"<unk>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}},)"
      R"({{"id":1,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}}],)"
      R"("normalizer":{},"pre_tokenizer":{},"post_processor":null,"decoder":{},)"
      R"("model":{{"type":"BPE","dropout":null,"unk_token":"<unk>","continuing_subword_prefix":null,)"
      R"("end_of_word_suffix":null,"fuse_unk":{},"byte_fallback":{},"vocab":{},)"
      R"("merges":["▁ h","l l","▁h e","▁he ll","▁hell o"]}}}})",
      normalizer, pre, decoder, fuse_unk ? "true" : "false", byte_fallback ? "true" : "false",
      vocab);
}

std::unique_ptr<Tokenizer> SpLoad(const std::string& json) {
  auto t = Tokenizer::FromJson(json, "sp.json");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<int32_t> SpIds(const Tokenizer& t, std::string_view text) {
  auto ids = t.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().message();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::string SpText(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::string out;
  EXPECT_TRUE(t.Decode(ids, &out).ok());
  return out;
}

constexpr int32_t kSpace = 259, kH = 260, kE = 261, kO = 263, kSpH = 265, kLl = 267, kHello = 270;
int32_t SpByte(int b) { return 3 + b; }

TEST(SentencePiece, PrependAndReplaceThenMergesAsLlama2) {
  auto t = SpLoad(SpJson());
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->sentencepiece());
  EXPECT_EQ(SpIds(*t, "hello"), (std::vector<int32_t>{kHello}));
  EXPECT_EQ(SpIds(*t, "hello hello"), (std::vector<int32_t>{kHello, kHello}));
  EXPECT_EQ(SpIds(*t, "ehllo"), (std::vector<int32_t>{kSpace, kE, kH, kLl, kO}));
  // Each piece between added tokens is normalized alone: Prepend before each.
  EXPECT_EQ(SpIds(*t, "hello<s>hello"), (std::vector<int32_t>{kHello, 1, kHello}));
  EXPECT_EQ(SpText(*t, {kHello, kHello}), "hello hello");  // Strip: one leading space
  EXPECT_EQ(SpText(*t, {kHello, 1, kHello}), "hello<s> hello");
}

TEST(SentencePiece, ByteFallbackAndUnknownTokens) {
  auto t = SpLoad(SpJson());
  ASSERT_TRUE(t);
  // "é" is not a token: its UTF-8 bytes are.
  EXPECT_EQ(SpIds(*t, "hé"), (std::vector<int32_t>{kSpH, SpByte(0xC3), SpByte(0xA9)}));
  EXPECT_EQ(SpText(*t, {kSpace, SpByte(0xC3), SpByte(0xA9)}), "é");
  // A run of bytes that is not UTF-8: one U+FFFD per byte (ByteFallback).
  EXPECT_EQ(SpText(*t, {kH, SpByte(0xC3), kH}), "h\xEF\xBF\xBDh");
  EXPECT_EQ(SpText(*t, {kH, SpByte(0xE2), SpByte(0x96), kH}), "h\xEF\xBF\xBD\xEF\xBF\xBDh");

  auto fused = SpLoad(SpJson(kLlama2Normalizer, "null", kLlama2Decoder, false, true));
  ASSERT_TRUE(fused);
  EXPECT_EQ(SpIds(*fused, "hééh"), (std::vector<int32_t>{kSpH, 0, kH}));
  auto apart = SpLoad(SpJson(kLlama2Normalizer, "null", kLlama2Decoder, false, false));
  ASSERT_TRUE(apart);
  EXPECT_EQ(SpIds(*apart, "hééh"), (std::vector<int32_t>{kSpH, 0, 0, kH}));
}

TEST(SentencePiece, MetaspacePrependSchemesAndSplit) {
  auto meta = [](std::string_view scheme, bool split) {
    return SpLoad(SpJson("null",
                         fmt::format(R"({{"type":"Metaspace","replacement":"▁","prepend_scheme":)"
                                     R"("{}","split":{}}})",
                                     scheme, split ? "true" : "false"),
                         R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first",)"
                         R"("split":true})"));
  };
  auto first = meta("first", true);
  ASSERT_TRUE(first);
  EXPECT_EQ(SpIds(*first, "hello hello"), (std::vector<int32_t>{kHello, kHello}));
  // Only the piece at the text's start gets the "▁".
  EXPECT_EQ(SpIds(*first, "<s>hello"), (std::vector<int32_t>{1, kH, kE, kLl, kO}));
  auto always = meta("always", true);
  ASSERT_TRUE(always);
  EXPECT_EQ(SpIds(*always, "<s>hello"), (std::vector<int32_t>{1, kHello}));
  auto never = meta("never", true);
  ASSERT_TRUE(never);
  EXPECT_EQ(SpIds(*never, "hello hello"), (std::vector<int32_t>{kH, kE, kLl, kO, kHello}));
  // Metaspace's decoder drops every "▁" of the first token, spaces the rest.
  EXPECT_EQ(SpText(*first, {kHello, kHello}), "hello hello");
  EXPECT_EQ(SpText(*first, {kSpace, kHello}), " hello");
}

TEST(SentencePiece, OffsetsMapBackThroughTheNormalizer) {
  auto t = SpLoad(SpJson());
  ASSERT_TRUE(t);
  std::vector<int32_t> ids;
  std::vector<uint32_t> ends;
  ASSERT_TRUE(t->EncodeWithOffsets("hello  hello<s>é", &ids, &ends).ok());
  EXPECT_EQ(ids,
            (std::vector<int32_t>{kHello, kSpace, kHello, 1, kSpace, SpByte(0xC3), SpByte(0xA9)}));
  // "▁hello" ends after "hello"; the second space's "▁"; then "▁hello"; <s>;
  // the prepended "▁" takes no text; the two bytes of "é".
  EXPECT_EQ(ends, (std::vector<uint32_t>{5, 6, 12, 15, 15, 16, 17}));
}

// A piece is cut before a "▁" only after a character no token holds before a "▁"
// (CharBpe::NextCut): with a token "o▁" whose merge comes first, "hello hello"
// merges across the words' boundary, and the cut path must give what the
// whole-word (plain) path gives.
TEST(SentencePiece, WordsAreCutOnlyWhereNoTokenCrosses) {
  std::string crossing = SpJson();
  ASSERT_TRUE(testing::ReplaceOnce(&crossing, R"("▁hello":270)", R"("▁hello":270,"o▁":271)"));
  ASSERT_TRUE(testing::ReplaceOnce(&crossing, R"("merges":["▁ h")", R"("merges":["o ▁","▁ h")"));
  for (const std::string& json : {SpJson(), crossing}) {
    auto fast = SpLoad(json);
    auto plain = SpLoad(json);
    ASSERT_TRUE(fast && plain);
    plain->UsePlainPath();
    for (std::string_view text : {"hello hello", "hello  hello", "ho hw", "hé hello", "hello"}) {
      EXPECT_EQ(SpIds(*fast, text), SpIds(*plain, text)) << text;
    }
  }
  auto t = SpLoad(crossing);
  ASSERT_TRUE(t);
  const std::vector<int32_t> ids = SpIds(*t, "hello hello");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 271), ids.end()) << "the merge across the boundary";
}

TEST(SentencePiece, WhatIsNotSupportedIsRefusedNamingThePart) {
  auto err = [](const std::string& json) {
    auto t = Tokenizer::FromJson(json, "sp.json");
    return t.ok() ? std::string("loaded") : t.status().message();
  };
  EXPECT_EQ(err(SpJson(R"({"type":"Precompiled","precompiled_charsmap":""})"))
                .rfind("sp.json: normalizer: unsupported: normalizer 'Precompiled'", 0),
            0u);
  EXPECT_EQ(err(SpJson(kLlama2Normalizer, R"({"type":"ByteLevel","add_prefix_space":false})"))
                .rfind("sp.json: pre_tokenizer: unsupported: pre-tokenizer 'ByteLevel'", 0),
            0u);
  EXPECT_EQ(err(SpJson(kLlama2Normalizer, "null",
                       R"({"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"CTC"}]})"))
                .rfind("sp.json: decoder.decoders[1]: unsupported: 'CTC'", 0),
            0u);
}

}  // namespace
}  // namespace ek::tokenize
