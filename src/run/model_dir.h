// A Hugging Face model directory as a run names it ([model] path): config.json,
// safetensors weights, tokenizer files. The gate and the trainer (through the
// binding) both ask here whether a pack's token ids mean this model's tokens.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "packfile/manifest.h"

namespace ek::run {

struct ModelDir {
  std::string path;
  int64_t vocab_size = 0;       // config.json's vocab_size: rows of the embedding
  std::string model_type;       // config.json's model_type ("qwen3", "llama", ...)
  std::string weights;          // "model.safetensors.index.json", "model.safetensors" or ""
  std::string tokenizer_path;   // path/tokenizer.json, "" when absent
  uint64_t tokenizer_xxh3 = 0;  // of tokenizer.json's bytes
};

// Reads what the checks need; a missing directory or config.json is an error
// naming the path. config.json's extra fields are fine; vocab_size (or, in a
// composite config, text_config.vocab_size) missing or mistyped, or a mistyped
// model_type, is an error naming the file and the field.
Result<ModelDir> ReadModelDir(const std::string& path);

// OK when the pack was tokenized with this model's tokenizer: the same
// tokenizer.json bytes, or the same vocabulary (every id the same token bytes,
// tokjson/vocab_fingerprint.h), and every id of the pack is a row of the
// model's embedding: the manifest's max_id (the largest id its blocks hold; in a
// pack made before it, vocab_size - 1) below config.json's vocab_size. Otherwise an
// error saying which and naming both files.
Status CheckTokenizerMatch(const pack::Manifest& manifest, const std::string& pack_dir,
                           const ModelDir& model);

}  // namespace ek::run
