// Reading JSON lines: whole-line chunks from a file or stdin, and the checks
// every JSONL reader shares (invalid UTF-8 and lone surrogate escapes, which
// no Rust or Python string can hold).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
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

// Whether `line` holds the two bytes "\\u" (a JSON \u escape): sixteen positions a
// step, where std::string_view::find stops at every backslash (code's escaped
// newlines and quotes are most of them).
bool HasUnicodeEscape(std::string_view line);

// Checks a raw JSON line. Bad input under kError is an error "byte K: ...";
// under kReplace a repaired copy is written to *storage and *line points at
// it, and *replaced counts the replacements.
Status SanitizeJsonLine(std::string_view* line, InvalidUtf8Policy policy, std::string* storage,
                        size_t* replaced);

// One line of a text: its 1-based number, the byte offset of its first byte in
// the whole input, and its bytes without the '\n' (a '\r' before it is kept:
// what a line means by it is the reader's to say). Errors name the line by
// `number` ("shard-0003.jsonl:1841: ...") or the byte by offset + k.
struct TextLine {
  uint64_t number = 0;
  uint64_t offset = 0;
  std::string_view text;
};

// The one line reader of evenkeel's line records (JSON lines, CSV, exposition
// text, logs): splits a text at '\n'. The last line may lack its '\n'; a text
// that ends in '\n' has no empty line after it, and an empty text has none.
//   LineSplitter lines(text);
//   for (TextLine l; lines.Next(&l);) ...
// Numbering and offsets may start elsewhere (a chunk of a larger input:
// LineChunkReader::NextLines).
class LineSplitter {
 public:
  LineSplitter() = default;
  explicit LineSplitter(std::string_view text, uint64_t first_number = 1, uint64_t first_offset = 0)
      : text_(text), number_(first_number), base_(first_offset) {}
  bool Next(TextLine* line) {
    if (pos_ >= text_.size()) return false;
    const void* nl = memchr(text_.data() + pos_, '\n', text_.size() - pos_);
    size_t end =
        nl ? static_cast<size_t>(static_cast<const char*>(nl) - text_.data()) : text_.size();
    line->number = number_++;
    line->offset = base_ + pos_;
    line->text = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  // The number and offset the line after the last one handed out would have.
  uint64_t next_number() const { return number_; }
  uint64_t next_offset() const { return base_ + std::min(pos_, text_.size()); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  uint64_t number_ = 1, base_ = 0;
};

// The complete lines at the front of `buffer` (what a pipe gave so far), each handed to
// fn(TextLine) and then taken out of it; an unfinished last line stays for the next read.
template <class Fn>
void TakeCompleteLines(std::string* buffer, Fn fn) {
  const size_t nl = buffer->rfind('\n');
  if (nl == std::string::npos) return;
  LineSplitter lines(std::string_view(*buffer).substr(0, nl + 1));
  for (TextLine line; lines.Next(&line);) fn(line);
  buffer->erase(0, nl + 1);
}

// Reads a file (mapped) or stdin ("-") as chunks of whole lines.
class LineChunkReader {
 public:
  // With `hash`, a plain file's reader hashes every byte it reads (Digest).
  static Result<std::unique_ptr<LineChunkReader>> Open(const std::string& path,
                                                       size_t chunk_bytes = 8u << 20,
                                                       bool hash = false);
  virtual ~LineChunkReader() = default;
  // Sets *chunk to the next run of whole lines (the last line of the input
  // may lack its '\n'); returns false at the end of input.
  virtual Result<bool> Next(std::string_view* chunk) = 0;
  // The next chunk as lines numbered from the start of the input: `lines` must
  // be the splitter of the previous call, its lines all read (numbering goes on
  // from it). False at the end of input.
  Result<bool> NextLines(LineSplitter* lines);
  // Total size when known (files), else 0; and bytes handed out so far.
  virtual uint64_t total_bytes() const = 0;
  virtual uint64_t consumed_bytes() const = 0;
  // Once Next has returned false: the size and xxh3-64 of every byte read, for a
  // plain file opened with `hash` (the same as HashFile's, from the one read); else
  // false.
  virtual bool Digest(uint64_t* /*size*/, uint64_t* /*xxh3*/) const { return false; }
  const std::string& path() const { return path_; }

 protected:
  std::string path_;
};

// xxh3-64 of a file's bytes, read in 256 KiB pieces; *size gets its length. `each`, when
// given, sees every piece as it is hashed (a caller that learns more from the same read).
Result<uint64_t> HashFile(const std::string& path, uint64_t* size,
                          const std::function<void(std::string_view)>& each = {});

}  // namespace ek
