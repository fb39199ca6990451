// The JSONL reader (core/jsonl.h: LineChunkReader over a plain or zstd file,
// SanitizeJsonLine) and record rendering (pack/record.h) as `evenkeel pack`
// and `evenkeel tokenize` use them: every line through both UTF-8 policies,
// the fixed chat layouts and two Jinja templates, with assistant spans. Input
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
  // Every way a record renders: the text field under both UTF-8 policies, the
  // fixed ChatML and Llama 3 layouts, a Jinja template with {% generation %}
  // blocks and one without (assistant spans by the prefix rule), and "auto"
  // with no template found (a chat record is then an error).
  static const std::vector<pack::RecordOptions>* options = [] {
    auto jinja = [](std::string_view text) {
      auto t = tmpl::ChatTemplate::FromText(text, "fuzz.jinja", "");
      if (!t.ok()) abort();  // the harness's own constant
      return std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
    };
    auto gen = jinja(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content }}<|im_end|>{% endgeneration %}{% else %}{{ m.content }}<|im_end|>{% endif %}\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    auto plain = jinja(
        "{% for m in messages %}[{{ m.role | upper }}] {{ m.content if m.content is string else m.content | tojson }}"
        "{% if tools %} {{ tools | length }}{% endif %}\n{% endfor %}{% if add_generation_prompt %}[ASSISTANT] "
        "{% endif %}");
    auto* v = new std::vector<pack::RecordOptions>(7);
    (*v)[0] = {.text_field = "text", .chat = pack::ChatMode::kNone};
    (*v)[1] = {.text_field = "text", .chat = pack::ChatMode::kNone, .invalid_utf8 = InvalidUtf8Policy::kReplace};
    (*v)[2] = {.text_field = "text", .chat = pack::ChatMode::kChatml, .spans = true};
    (*v)[3] = {.text_field = "content", .chat = pack::ChatMode::kLlama3, .spans = true,
               .invalid_utf8 = InvalidUtf8Policy::kReplace};
    (*v)[4] = {.text_field = "text", .chat = pack::ChatMode::kJinja, .jinja = gen, .spans = true};
    (*v)[5] = {.text_field = "text", .chat = pack::ChatMode::kJinja, .jinja = plain, .spans = true,
               .invalid_utf8 = InvalidUtf8Policy::kReplace};
    (*v)[6] = {.text_field = "text", .chat = pack::ChatMode::kAuto, .no_template = "no chat template here"};
    return v;
  }();
  static std::vector<std::unique_ptr<pack::RecordRenderer>> renderers;
  if (renderers.empty()) {
    for (const auto& o : *options) renderers.push_back(std::make_unique<pack::RecordRenderer>(o));
  }
  // Small chunks, so that lines straddle chunk boundaries.
  auto reader = LineChunkReader::Open(path, 64);
  if (reader.ok()) {
    std::string_view chunk;
    pack::RenderedRecord rendered;
    for (int chunks = 0; chunks < 100000; ++chunks) {
      auto more = (*reader)->Next(&chunk);
      if (!more.ok() || !*more) break;
      while (!chunk.empty()) {
        size_t nl = chunk.find('\n');
        std::string_view line = chunk.substr(0, nl);
        chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
        if (pack::IsBlankLine(line)) continue;
        // Render checks the line (SanitizeJsonLine) under its policy first.
        for (auto& renderer : renderers) {
          size_t replaced = 0;
          rendered = {};
          (void)renderer->Render(line, &rendered, &replaced);
        }
      }
    }
  }
  ::unlink(path.c_str());
  return 0;
}
