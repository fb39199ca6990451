// The JSONL reader (core/jsonl.h: LineChunkReader over a plain or zstd file,
// SanitizeJsonLine) and record rendering (pack/record.h) as `evenkeel pack`
// and `evenkeel tokenize` use them: every line through both UTF-8 policies, the
// fixed layouts and two Jinja templates (one with {% generation %} blocks, one
// whose assistant spans come from growing prefixes), spans on and off. Input
// starting with the zstd magic is read as a .zst file.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core/jsonl.h"
#include "fuzz/fuzz_util.h"
#include "pack/record.h"

using namespace ek;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fuzz::Bytes(data, size);
  bool zst = in.starts_with("\x28\xB5\x2F\xFD");
  std::string path = fuzz::ScratchDir() + (zst ? "/in.jsonl.zst" : "/in.jsonl");
  fuzz::WriteWhole(path, in);
  static std::vector<pack::RecordOptions>* options = [] {
    auto* o = new std::vector<pack::RecordOptions>();
    auto jinja = [](const char* src) {
      auto t = tmpl::ChatTemplate::FromText(src, "fuzz.jinja", "");
      if (!t.ok()) __builtin_trap();
      return std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
    };
    auto generation = jinja(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% "
        "generation %}"
        "{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif "
        "%}\n{% endfor %}"
        "{% if tools %}{{ tools | tojson }}{% endif %}");
    auto prefix = jinja(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim "
        "}}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    for (auto policy : {InvalidUtf8Policy::kError, InvalidUtf8Policy::kReplace}) {
      for (auto mode : {pack::ChatMode::kNone, pack::ChatMode::kChatml, pack::ChatMode::kLlama3,
                        pack::ChatMode::kJinja, pack::ChatMode::kAuto}) {
        for (bool spans : {false, true}) {
          pack::RecordOptions r;
          r.text_field = mode == pack::ChatMode::kChatml && spans ? "content" : "text";
          r.chat = mode;
          r.spans = spans;
          r.invalid_utf8 = policy;
          if (mode == pack::ChatMode::kJinja) r.jinja = spans ? generation : prefix;
          if (mode == pack::ChatMode::kAuto) r.no_template = "no chat template";
          o->push_back(std::move(r));
        }
      }
    }
    return o;
  }();
  static std::vector<pack::RecordRenderer*>* renderers = [] {
    auto* r = new std::vector<pack::RecordRenderer*>();
    for (const auto& o : *options) r->push_back(new pack::RecordRenderer(o));
    return r;
  }();
  // Small chunks, so that lines straddle chunk boundaries.
  auto reader = LineChunkReader::Open(path, 64);
  if (reader.ok()) {
    std::string_view chunk;
    pack::RenderedRecord record;
    for (int chunks = 0; chunks < 100000; ++chunks) {
      auto more = (*reader)->Next(&chunk);
      if (!more.ok() || !*more) break;
      while (!chunk.empty()) {
        size_t nl = chunk.find('\n');
        std::string_view line = chunk.substr(0, nl);
        chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
        if (pack::IsBlankLine(line)) continue;
        // Render checks the line (SanitizeJsonLine) under its policy first.
        for (pack::RecordRenderer* r : *renderers) {
          size_t replaced = 0;
          if (!r->Render(line, &record, &replaced).ok()) continue;
          // Spans are sorted, disjoint byte ranges of the text.
          size_t at = 0;
          for (auto [b, e] : record.spans) {
            if (b < at || e < b || e > record.text.size()) __builtin_trap();
            at = e;
          }
        }
      }
    }
  }
  ::unlink(path.c_str());
  return 0;
}
