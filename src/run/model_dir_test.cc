#include "run/model_dir.h"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>

#include "core/file.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer.h"

namespace ek::run {
namespace {

namespace fs = std::filesystem;

class ModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ek_model_dir_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
    model_ = (dir_ / "model").string();
    tokenizer_ = tokenize::testing::TinyJson();
    ASSERT_TRUE(WriteFileAtomic(model_ + "/tokenizer.json", tokenizer_).ok());
    ASSERT_TRUE(
        WriteFileAtomic(model_ + "/config.json", R"({"model_type": "qwen3", "vocab_size": 300})")
            .ok());
    ASSERT_TRUE(WriteFileAtomic(model_ + "/model.safetensors", "x").ok());
    auto tok = tokenize::Tokenizer::FromJson(tokenizer_, "tiny");
    ASSERT_TRUE(tok.ok());
    manifest_.tokenizer_path = "/elsewhere/tokenizer.json";
    manifest_.tokenizer_xxh3 = XXH3_64bits(tokenizer_.data(), tokenizer_.size());
    manifest_.tokenizer_vocab_xxh3 = (*tok)->VocabFingerprint();
    manifest_.vocab_size = (*tok)->vocab_size();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string model_, tokenizer_;
  pack::Manifest manifest_;
};

TEST_F(ModelDirTest, SameFileMatches) {
  auto m = ReadModelDir(model_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->vocab_size, 300);
  EXPECT_EQ(m->model_type, "qwen3");
  EXPECT_EQ(m->weights, "model.safetensors");
  EXPECT_TRUE(CheckTokenizerMatch(manifest_, "pack", *m).ok());
}

TEST_F(ModelDirTest, SameVocabularyInOtherBytesMatches) {
  // Reformatted JSON: other bytes, same ids.
  ASSERT_TRUE(WriteFileAtomic(model_ + "/tokenizer.json", "\n" + tokenizer_ + "\n").ok());
  auto m = ReadModelDir(model_);
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->tokenizer_xxh3, manifest_.tokenizer_xxh3);
  Status st = CheckTokenizerMatch(manifest_, "pack", *m);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_F(ModelDirTest, OtherVocabularyIsRefused) {
  std::string other = tokenizer_;
  auto at = other.find("\"he\":256,\"ll\":257");
  ASSERT_NE(at, std::string::npos);
  other.replace(at, 17, "\"he\":257,\"ll\":256");  // the same tokens under swapped ids
  ASSERT_TRUE(WriteFileAtomic(model_ + "/tokenizer.json", other).ok());
  auto m = ReadModelDir(model_);
  ASSERT_TRUE(m.ok());
  Status st = CheckTokenizerMatch(manifest_, "pack", *m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("different vocabulary"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/elsewhere/tokenizer.json"), std::string::npos) << st.message();
}

TEST_F(ModelDirTest, EmbeddingTooSmallOrNoTokenizerIsRefused) {
  ASSERT_TRUE(WriteFileAtomic(model_ + "/config.json", R"({"vocab_size": 100})").ok());
  auto m = ReadModelDir(model_);
  ASSERT_TRUE(m.ok());
  Status st = CheckTokenizerMatch(manifest_, "pack", *m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("embedding has 100 rows"), std::string::npos) << st.message();
  fs::remove(model_ + "/tokenizer.json");
  ASSERT_TRUE(WriteFileAtomic(model_ + "/config.json", R"({"vocab_size": 300})").ok());
  auto n = ReadModelDir(model_);
  ASSERT_TRUE(n.ok());
  st = CheckTokenizerMatch(manifest_, "pack", *n);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no tokenizer.json"), std::string::npos) << st.message();
}

// The ids the pack holds (tokenizer.max_id) are what must be rows of the embedding,
// not the tokenizer's limit: Gemma 3's tokenizer numbers <image_soft_token> 262144
// for a 262144-row embedding, and a text pack never holds it.
TEST_F(ModelDirTest, MaxIdBelowTheRowsMatchesWhenVocabSizeExceedsThem) {
  const int64_t rows = manifest_.vocab_size - 1;  // one id past the embedding, as Gemma 3
  ASSERT_TRUE(
      WriteFileAtomic(model_ + "/config.json", fmt::format(R"({{"vocab_size": {}}})", rows)).ok());
  auto m = ReadModelDir(model_);
  ASSERT_TRUE(m.ok()) << m.status().message();
  manifest_.max_id = rows - 1;
  Status st = CheckTokenizerMatch(manifest_, "pack", *m);
  EXPECT_TRUE(st.ok()) << st.message();

  manifest_.max_id = rows;  // the pack holds the id past the embedding
  st = CheckTokenizerMatch(manifest_, "pack", *m);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            fmt::format("the pack holds id {} (pack/manifest.json tokenizer.max_id), but the "
                        "model's embedding has {} rows (ids 0-{}, {}/config.json vocab_size)",
                        rows, rows, rows - 1, model_));

  // A pack made before max_id: its ids may go up to vocab_size - 1.
  manifest_.max_id = -1;
  st = CheckTokenizerMatch(manifest_, "pack", *m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(fmt::format("may go up to {} (pack/manifest.json "
                                          "tokenizer.vocab_size {}; the pack predates max_id",
                                          rows, rows + 1)),
            std::string::npos)
      << st.message();
}

TEST_F(ModelDirTest, BadDirectoriesNameThePath) {
  auto missing = ReadModelDir(model_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(model_ + "/config.json", "{\"vocab_size\": ").ok());
  auto bad = ReadModelDir(model_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config.json: malformed JSON"), std::string::npos)
      << bad.status().message();
  ASSERT_TRUE(WriteFileAtomic(model_ + "/config.json", R"({"vocab_size": "many"})").ok());
  auto typed = ReadModelDir(model_);
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().message(), model_ + "/config.json: vocab_size: not an integer");
}

// config.json: extra fields are fine; the fields read, missing or mistyped, are
// an error naming the field and the file.
TEST_F(ModelDirTest, ABadConfigFieldIsAnErrorNamingItAndTheFile) {
  const std::string config = model_ + "/config.json";
  auto error_for = [&](const std::string& json) {
    EXPECT_TRUE(WriteFileAtomic(config, json).ok());
    auto m = ReadModelDir(model_);
    EXPECT_FALSE(m.ok()) << json;
    return m.ok() ? std::string() : m.status().message();
  };
  EXPECT_EQ(error_for(R"({"model_type": "qwen3"})"),
            config + ": vocab_size: missing (and there is no text_config.vocab_size)");
  EXPECT_EQ(error_for(R"({"vocab_size": 0})"), config + ": vocab_size: 0 is not positive");
  EXPECT_EQ(error_for(R"({"vocab_size": 300.5})"), config + ": vocab_size: not an integer");
  EXPECT_EQ(error_for(R"({"vocab_size": 300, "model_type": 3})"),
            config + ": model_type: not a string");
  EXPECT_EQ(error_for(R"({"text_config": {"hidden_size": 8}})"),
            config + ": text_config.vocab_size: missing");
  EXPECT_EQ(error_for(R"({"text_config": [300]})"), config + ": text_config: not an object");
  EXPECT_EQ(error_for(R"({"vocab_size": null})"),
            config + ": vocab_size: null, and there is no text_config.vocab_size");
  EXPECT_EQ(error_for(R"({"text_config": {"vocab_size": "300"}})"),
            config + ": text_config.vocab_size: not an integer");
  EXPECT_EQ(error_for("[300]"), config + ": not a JSON object");
  // Composite configs: the text model's vocab_size (a null one at the top is "not here").
  ASSERT_TRUE(
      WriteFileAtomic(
          config,
          R"({"model_type": "gemma3", "vocab_size": null, "text_config": {"vocab_size": 262208},
                                         "vision_config": {"hidden_size": 1152}, "architectures": ["X"]})")
          .ok());
  auto composite = ReadModelDir(model_);
  ASSERT_TRUE(composite.ok()) << composite.status().message();
  EXPECT_EQ(composite->vocab_size, 262208);
  EXPECT_EQ(composite->model_type, "gemma3");
}

}  // namespace
}  // namespace ek::run
