// The JSONL reader (core/jsonl.h: LineChunkReader over a plain or zstd file,
// SanitizeJsonLine) and record rendering (pack/record.h) as `evenkeel pack`
// and `evenkeel tokenize` use them: every line through both UTF-8 policies and
// the three templates. Input starting with the zstd magic is read as a .zst file.
#include <unistd.h>

#include <string>

#include "core/jsonl.h"
#include "fuzz/fuzz_util.h"
#include "pack/record.h"

using namespace ek;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fuzz::Bytes(data, size);
  bool zst = in.starts_with("\x28\xB5\x2F\xFD");
  std::string path = fuzz::ScratchDir() + (zst ? "/in.jsonl.zst" : "/in.jsonl");
  fuzz::WriteWhole(path, in);
  static const pack::RecordOptions kOptions[] = {
      {"text", pack::ChatTemplate::kNone, InvalidUtf8Policy::kError},
      {"text", pack::ChatTemplate::kNone, InvalidUtf8Policy::kReplace},
      {"text", pack::ChatTemplate::kChatml, InvalidUtf8Policy::kError},
      {"content", pack::ChatTemplate::kChatml, InvalidUtf8Policy::kReplace},
      {"text", pack::ChatTemplate::kLlama3, InvalidUtf8Policy::kError},
      {"text", pack::ChatTemplate::kLlama3, InvalidUtf8Policy::kReplace},
  };
  static pack::RecordRenderer* renderers[std::size(kOptions)];
  if (!renderers[0]) {
    for (size_t i = 0; i < std::size(kOptions); ++i) renderers[i] = new pack::RecordRenderer(kOptions[i]);
  }
  // Small chunks, so that lines straddle chunk boundaries.
  auto reader = LineChunkReader::Open(path, 64);
  if (reader.ok()) {
    std::string_view chunk;
    std::string text;
    for (int chunks = 0; chunks < 100000; ++chunks) {
      auto more = (*reader)->Next(&chunk);
      if (!more.ok() || !*more) break;
      while (!chunk.empty()) {
        size_t nl = chunk.find('\n');
        std::string_view line = chunk.substr(0, nl);
        chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
        if (pack::IsBlankLine(line)) continue;
        // Render checks the line (SanitizeJsonLine) under its policy first.
        for (size_t i = 0; i < std::size(kOptions); ++i) {
          size_t replaced = 0;
          (void)renderers[i]->Render(line, &text, &replaced);
        }
      }
    }
  }
  ::unlink(path.c_str());
  return 0;
}
