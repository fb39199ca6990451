// Helpers shared by checkpoint.cc and verify.cc; not part of ek_ckpt's API.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.h"
#include "core/env.h"
#include "core/status.h"

namespace ek::ckpt::internal {

struct DirEntry {
  std::string name;
  bool regular = false;  // lstat: a symlink is neither regular nor a directory
  bool directory = false;
  uint64_t size = 0;  // regular files only
  double mtime = 0;
};

// The entries of `dir` but "." and "..", sorted by name, listed and stat'ed
// (not following links) through `env`. kNotFound when the directory does not
// exist.
Result<std::vector<DirEntry>> ListDir(const std::string& dir, Env* env = Env::Default());

std::string BaseName(const std::string& path);
std::string ParentOf(const std::string& path);

// A tensor name or dtype quoted for a message: 'name', hostile names cut to 80 bytes.
std::string Quoted(std::string_view s);

// Reads the file at `path` once, filling rec's size, xxh3 and per-chunk
// hashes (rec->name is left alone).
Status HashFileChunks(const std::string& path, uint64_t chunk_bytes, FileRecord* rec);

// "step-00000010" -> 10; at least 8 digits; nullopt for any other name.
std::optional<int64_t> StepOfFinalName(std::string_view name);

// ".step-00000010.tmp-4242" (being written), ".old-PID" (a copy moved aside by
// FinalizeCheckpoint), ".del-PID" (being removed by PruneCheckpoints).
struct TempName {
  enum Kind { kWriting = 0, kReplaced = 1, kRemoving = 2 };
  int64_t step = 0;
  int64_t pid = 0;
  Kind kind = kWriting;
};
std::optional<TempName> ParseTempName(std::string_view name);

// Runs fn(i) for i in [0, n) on up to `threads` threads (0: up to 8).
void RunParallel(size_t n, size_t threads, const std::function<void(size_t)>& fn);

}  // namespace ek::ckpt::internal
