// Helpers for the ckpt tests: a scratch directory, safetensors files built in
// memory, and a small two-shard checkpoint laid out as the trainer writes it.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "core/file.h"

namespace ek::ckpt::testing {

// A fresh directory under $TMPDIR, removed with the object.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ek-ckpt-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct FakeTensor {
  std::string name;
  std::vector<uint64_t> shape;
  std::string dtype = "BF16";
};

inline int FakeDtypeBytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "U8" || dtype == "BOOL") return 1;
  return 2;
}

// 8-byte little-endian length + header + data.
inline std::string RawSafetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// A valid safetensors file: tensors laid out back to back in the given order,
// data bytes a deterministic pattern seeded by `seed`.
inline std::string MakeSafetensors(const std::vector<FakeTensor>& tensors, int seed = 1) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t at = 0;
  for (const auto& t : tensors) {
    uint64_t n = FakeDtypeBytes(t.dtype);
    std::string shape;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      n *= t.shape[i];
      if (i) shape += ',';
      shape += std::to_string(t.shape[i]);
    }
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + n) + "]}";
    at += n;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';  // the package pads to 8 bytes
  std::string data(at, '\0');
  for (uint64_t i = 0; i < at; ++i) data[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
  return RawSafetensors(header, data);
}

inline std::string IndexJson(uint64_t total_size,
                             const std::vector<std::pair<std::string, std::string>>& weight_map) {
  std::string o = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total_size) +
                  "},\n  \"weight_map\": {";
  for (size_t i = 0; i < weight_map.size(); ++i) {
    o += (i ? ",\n    \"" : "\n    \"") + weight_map[i].first + "\": \"" + weight_map[i].second +
         "\"";
  }
  return o + "\n  }\n}\n";
}

inline void Put(const std::string& path, const std::string& data) {
  Status st = WriteFileAtomic(path, data);
  if (!st.ok()) abort();
}

// The trainer's side of a save: two bf16 shards, their index and the copied
// files, in `dir` (created). Tensor bytes: 4*8*2 + 8*2 + 4*8*2 + 8*2 = 160.
inline void WriteTrainerFiles(const std::string& dir, int seed = 1) {
  if (!MakeDirs(dir).ok()) abort();
  Put(dir + "/model-00001-of-00002.safetensors",
      MakeSafetensors({{"model.embed.weight", {4, 8}}, {"model.norm.weight", {8}}}, seed));
  Put(dir + "/model-00002-of-00002.safetensors",
      MakeSafetensors({{"lm_head.weight", {4, 8}}, {"model.layers.0.norm.weight", {8}}}, seed + 1));
  Put(dir + "/model.safetensors.index.json",
      IndexJson(160, {{"lm_head.weight", "model-00002-of-00002.safetensors"},
                      {"model.embed.weight", "model-00001-of-00002.safetensors"},
                      {"model.layers.0.norm.weight", "model-00002-of-00002.safetensors"},
                      {"model.norm.weight", "model-00001-of-00002.safetensors"}}));
  Put(dir + "/config.json", "{\"model_type\": \"llama\", \"torch_dtype\": \"bfloat16\"}\n");
  Put(dir + "/tokenizer.json", "{\"version\": \"1.0\"}\n");
}

inline CheckpointManifest SampleMeta(int64_t step) {
  CheckpointManifest m;
  m.step = step;
  m.epoch = 1;
  m.step_in_epoch = step % 7;
  m.tokens_seen = static_cast<uint64_t>(step) * 65536;
  m.run = {"demo", "/runs/demo/run.toml", 0x0123456789abcdefull};
  m.pack = {"/data/pack", 0xfedcba9876543210ull, 16, 2048};
  m.extra = "{\"data\": {\"seed\": 7, \"consumed\": [1, 2, 3]}, \"lr\": 1.5e-05}";
  return m;
}

}  // namespace ek::ckpt::testing
