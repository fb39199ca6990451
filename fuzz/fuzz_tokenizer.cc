// tokenizer.json loading (Tokenizer::FromJson); when it loads, encode and
// decode a short fixed string so the loaded model is exercised too.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenize/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = ek::tokenize::Tokenizer::FromJson(json, "fuzz.json");
  if (!tok.ok()) return 0;
  const ek::tokenize::Tokenizer& t = **tok;
  static constexpr std::string_view kText = "Hello, world! <|endoftext|> 123 ünïcödé  \n\tdone";
  std::vector<int32_t> ids;
  if (t.Encode(kText, &ids).ok()) {
    std::string back;
    (void)t.Decode(ids, &back);
  }
  (void)t.Describe();
  (void)t.VocabFingerprint();
  return 0;
}
