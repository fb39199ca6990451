// Reading JSON lines: whole-line chunks from a file or stdin, and the checks
// every JSONL reader shares (invalid UTF-8 and lone surrogate escapes, which
// no Rust or Python string can hold).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/file.h"
#include "core/status.h"

namespace ek {

enum class InvalidUtf8Policy {
  kError,    // refuse the line, naming the byte offset
  kReplace,  // U+FFFD for each bad sequence, as Python's errors="replace"
};

// Checks a raw JSON line. Bad input under kError is an error "byte K: ...";
// under kReplace a repaired copy is written to *storage and *line points at
// it, and *replaced counts the replacements.
Status SanitizeJsonLine(std::string_view* line, InvalidUtf8Policy policy, std::string* storage,
                        size_t* replaced);

// Reads a file (mapped) or stdin ("-") as chunks of whole lines.
class LineChunkReader {
 public:
  static Result<std::unique_ptr<LineChunkReader>> Open(const std::string& path,
                                                       size_t chunk_bytes = 8u << 20);
  virtual ~LineChunkReader() = default;
  // Sets *chunk to the next run of whole lines (the last line of the input
  // may lack its '\n'); returns false at the end of input.
  virtual Result<bool> Next(std::string_view* chunk) = 0;
  // Total size when known (files), else 0; and bytes handed out so far.
  virtual uint64_t total_bytes() const = 0;
  virtual uint64_t consumed_bytes() const = 0;
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
};

// xxh3-64 of a file's bytes, read in 1 MiB pieces; *size gets its length.
Result<uint64_t> HashFile(const std::string& path, uint64_t* size);

}  // namespace ek
