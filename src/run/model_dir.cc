#include "run/model_dir.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "tokjson/vocab_fingerprint.h"

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
  // Extra fields are fine (a Hugging Face config holds many); the ones read
  // here are checked: missing or mistyped is an error naming the field.
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, config_path));
  // Composite (multimodal) configs keep the text model's vocab_size in
  // text_config; null is how they spell "not here".
  simdjson::dom::element top;
  const bool present = root["vocab_size"].get(top) == simdjson::SUCCESS;
  const JsonFields* holder = &f;
  JsonFields text_config = f;
  if (present && !top.is_null()) {
    EK_RETURN_IF_ERROR(f.Int("vocab_size", &m.vocab_size));
  } else if (f.Has("text_config")) {
    EK_RETURN_IF_ERROR(f.Object("text_config", &text_config));
    EK_RETURN_IF_ERROR(text_config.Int("vocab_size", &m.vocab_size));
    holder = &text_config;
  } else {
    return f.Err("vocab_size", present ? "null, and there is no text_config.vocab_size"
                                       : "missing (and there is no text_config.vocab_size)");
  }
  if (m.vocab_size <= 0)
    return holder->Err("vocab_size", fmt::format("{} is not positive", m.vocab_size));
  EK_RETURN_IF_ERROR(f.OptStr("model_type", &m.model_type));
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

Status CheckTokenizerMatch(const pack::Manifest& manifest, const std::string& pack_dir,
                           const ModelDir& model) {
  const std::string pack_name = pack_dir + "/manifest.json";
  // The ids the pack holds, not the tokenizer's limit: a tokenizer may number an
  // added token past the embedding's rows (Gemma 3's <image_soft_token> is 262144 of
  // a 262144-row embedding) that text never produces.
  if (manifest.largest_id() >= model.vocab_size) {
    const std::string rows =
        fmt::format("the model's embedding has {} rows (ids 0-{}, {}/config.json vocab_size)",
                    model.vocab_size, model.vocab_size - 1, model.path);
    if (manifest.max_id >= 0) {
      return FailedPreconditionError(fmt::format(
          "the pack holds id {} ({} tokenizer.max_id), but {}", manifest.max_id, pack_name, rows));
    }
    return FailedPreconditionError(fmt::format(
        "the pack's ids may go up to {} ({} tokenizer.vocab_size {}; the pack predates max_id, "
        "re-pack to record the largest id it holds), but {}",
        manifest.largest_id(), pack_name, manifest.vocab_size, rows));
  }
  if (model.tokenizer_path.empty()) {
    return FailedPreconditionError(
        fmt::format("{} has no tokenizer.json: cannot tell whether the pack's ids ({}, tokenizer "
                    "{}) mean this model's tokens",
                    model.path, pack_name, manifest.tokenizer_path));
  }
  if (model.tokenizer_xxh3 == manifest.tokenizer_xxh3) return Status::Ok();
  if (manifest.tokenizer_vocab_xxh3 == 0) {
    return FailedPreconditionError(
        fmt::format("{} (xxh3 {:016x}) differs from the pack's tokenizer {} (xxh3 {:016x}, {}), "
                    "and the pack predates "
                    "vocabulary fingerprints: re-pack with the model's tokenizer.json",
                    model.tokenizer_path, model.tokenizer_xxh3, manifest.tokenizer_path,
                    manifest.tokenizer_xxh3, pack_name));
  }
  auto vocab = tokjson::VocabFingerprintOfFile(model.tokenizer_path);
  if (!vocab.ok()) return vocab.status().WithContext("model tokenizer");
  const uint64_t fp = *vocab;
  if (fp != manifest.tokenizer_vocab_xxh3) {
    return FailedPreconditionError(
        fmt::format("the pack was tokenized with a different vocabulary: {} (vocabulary {:016x}) "
                    "vs the pack's {} "
                    "(vocabulary {:016x}, {}): its ids would mean other tokens to this model; "
                    "re-pack with the model's tokenizer",
                    model.tokenizer_path, fp, manifest.tokenizer_path,
                    manifest.tokenizer_vocab_xxh3, pack_name));
  }
  return Status::Ok();
}

}  // namespace ek::run
