// The hand-written split matchers (tokenize/pattern.h: Qwen2, Llama 3 with its 64-byte ASCII
// blocks and without them, GPT-2) against Oniguruma on the input made valid UTF-8 (Python's
// errors="replace"): any difference in the pieces traps. The first byte picks the pattern.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"
#include "tokenize/pattern.h"

namespace {

using ek::tokenize::Pattern;
using ek::tokenize::Span;

struct Pair {
  std::unique_ptr<Pattern> fast, onig;
};

std::vector<Pair> Make() {
  std::vector<Pair> out;
  for (std::string_view regex :
       {ek::tokenize::kQwen2Regex, ek::tokenize::kLlama3Regex, ek::tokenize::kGpt2Regex}) {
    out.push_back({std::move(*ek::tokenize::CompileRegex(regex)),
                   std::move(*ek::tokenize::CompileOnigRegex(regex))});
    out.push_back({std::move(*ek::tokenize::CompileRegexBytewise(regex)),
                   std::move(*ek::tokenize::CompileOnigRegex(regex))});
  }
  return out;
}

bool Same(const std::vector<Span>& a, const std::vector<Span>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Pair> pairs = Make();
  if (size == 0) return 0;
  const Pair& p = pairs[data[0] % pairs.size()];
  std::string text;
  ek::ReplaceInvalidUtf8(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1),
                         &text);
  std::vector<Span> a, b;
  p.fast->FindMatches(text, &a);
  p.onig->FindMatches(text, &b);
  if (!Same(a, b)) __builtin_trap();
  return 0;
}
