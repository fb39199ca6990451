// A strict reader for the header of a safetensors file (the format of the
// `safetensors` package, https://github.com/huggingface/safetensors, whose
// Rust crate is the reference for the rules below):
//
//   bytes [0, 8)       N, the header length, little-endian u64
//   bytes [8, 8+N)     a JSON object: tensor name -> {"dtype", "shape",
//                      "data_offsets": [begin, end]}, plus an optional
//                      "__metadata__": {string: string}; may end in spaces
//   bytes [8+N, EOF)   the data region; offsets are relative to its start
//
// Rules enforced, each violation a kCorrupt Status naming the file and a byte
// offset in it: 8 + N fits in the file and N <= 100,000,000 (the crate's cap);
// the header is valid UTF-8 JSON starting with '{'; every dtype is known; a
// shape is non-negative integers whose product (and byte size) does not
// overflow 64 bits; end - begin == numel * dtype size; the tensors neither
// overlap nor leave holes and cover the data region from byte 0 (the spec
// requires it, so a hole means a corrupt writer); the file ends exactly at the
// end of the data region.
//
// Only the header is read (two preads), never the data. Safety: every input,
// however hostile, yields a Status; nothing here throws, aborts or reads out
// of bounds (ckpt_test feeds it random and mutated headers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ek::ckpt {

// The safetensors crate's MAX_HEADER_SIZE.
inline constexpr uint64_t kMaxHeaderLength = 100'000'000;

// Bits per element of a safetensors dtype name ("BF16" -> 16, "F4" -> 4);
// 0 for a name the format does not define.
int DtypeBits(std::string_view dtype);

struct TensorInfo {
  std::string name;
  std::string dtype;  // as written, e.g. "BF16"
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data region
  uint64_t end = 0;
  uint64_t header_offset = 0;  // file byte where this tensor's entry starts (for messages)

  uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t header_length = 0;       // N
  uint64_t data_start = 0;          // 8 + N, the file byte where the data region starts
  uint64_t data_bytes = 0;          // size of the data region (the largest end)
  uint64_t file_size = 0;           // == data_start + data_bytes once parsed
  std::vector<TensorInfo> tensors;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", in order
};

// Parses and checks a header. `file_prefix` is the file's first bytes: all of
// them, or at least the first 8 + N when the file is longer; `file_size` is
// the size of the whole file; `name` starts every error message.
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view file_prefix, uint64_t file_size,
                                                 std::string_view name);

// Reads the header of the file at `path` (pread of 8 + N bytes) and checks it
// with ParseSafetensorsHeader. Errors start with `name` ("model.safetensors"),
// or with `path` when `name` is empty; an unreadable file is kIoError/kNotFound.
Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path, std::string_view name);

}  // namespace ek::ckpt
