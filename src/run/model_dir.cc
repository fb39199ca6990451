#include "run/model_dir.h"

#include <simdjson.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <fmt/core.h>

#include "core/file.h"
#include "core/json_check.h"
#include "tokenize/tokenizer.h"

namespace ek::run {

namespace {

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<ModelDir> ReadModelDir(const std::string& path) {
  ModelDir m;
  m.path = path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return NotFoundError(fmt::format("model directory {} does not exist", path));
  }
  std::string config_path = path + "/config.json";
  auto text = ReadFile(config_path);
  if (!text.ok()) return text.status().WithContext("model");
  simdjson::dom::parser parser;
  simdjson::padded_string padded(*text);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root)) {
    return CorruptError(fmt::format("{}: malformed JSON: {}", config_path, LocateJsonError(*text)));
  }
  int64_t vocab = 0;
  simdjson::dom::element text_config;
  if (root["vocab_size"].get(vocab) != simdjson::SUCCESS &&
      (root["text_config"].get(text_config) != simdjson::SUCCESS ||
       text_config["vocab_size"].get(vocab) != simdjson::SUCCESS)) {
    return InvalidArgumentError(fmt::format("{}: no integer vocab_size", config_path));
  }
  if (vocab <= 0) return InvalidArgumentError(fmt::format("{}: vocab_size {} is not positive", config_path, vocab));
  m.vocab_size = vocab;
  std::string_view type;
  if (root["model_type"].get(type) == simdjson::SUCCESS) m.model_type = std::string(type);
  if (IsFile(path + "/model.safetensors.index.json")) {
    m.weights = "model.safetensors.index.json";
  } else if (IsFile(path + "/model.safetensors")) {
    m.weights = "model.safetensors";
  }
  if (IsFile(path + "/tokenizer.json")) {
    m.tokenizer_path = path + "/tokenizer.json";
    EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(m.tokenizer_path));
    m.tokenizer_xxh3 = XXH3_64bits(f.data().data(), f.size());
  }
  return m;
}

Status CheckTokenizerMatch(const pack::Manifest& manifest, const std::string& pack_dir, const ModelDir& model) {
  const std::string pack_name = pack_dir + "/manifest.json";
  if (manifest.vocab_size > model.vocab_size) {
    return FailedPreconditionError(fmt::format(
        "the pack's ids go up to {} ({}), but the model's embedding has {} rows ({}/config.json vocab_size)",
        manifest.vocab_size - 1, pack_name, model.vocab_size, model.path));
  }
  if (model.tokenizer_path.empty()) {
    return FailedPreconditionError(fmt::format(
        "{} has no tokenizer.json: cannot tell whether the pack's ids ({}, tokenizer {}) mean this model's tokens",
        model.path, pack_name, manifest.tokenizer_path));
  }
  if (model.tokenizer_xxh3 == manifest.tokenizer_xxh3) return Status::Ok();
  if (manifest.tokenizer_vocab_xxh3 == 0) {
    return FailedPreconditionError(fmt::format(
        "{} (xxh3 {:016x}) differs from the pack's tokenizer {} (xxh3 {:016x}, {}), and the pack predates "
        "vocabulary fingerprints: re-pack with the model's tokenizer.json",
        model.tokenizer_path, model.tokenizer_xxh3, manifest.tokenizer_path, manifest.tokenizer_xxh3, pack_name));
  }
  auto tok = tokenize::Tokenizer::FromFile(model.tokenizer_path);
  if (!tok.ok()) return tok.status().WithContext("model tokenizer");
  uint64_t fp = (*tok)->VocabFingerprint();
  if (fp != manifest.tokenizer_vocab_xxh3) {
    return FailedPreconditionError(fmt::format(
        "the pack was tokenized with a different vocabulary: {} (vocabulary {:016x}) vs the pack's {} "
        "(vocabulary {:016x}, {}): its ids would mean other tokens to this model; re-pack with the model's tokenizer",
        model.tokenizer_path, fp, manifest.tokenizer_path, manifest.tokenizer_vocab_xxh3, pack_name));
  }
  return Status::Ok();
}

}  // namespace ek::run
