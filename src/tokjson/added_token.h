// One entry of a tokenizer.json's added_tokens, as the tokenizer.json reader
// (document.h) gives it and the tokenizer's added-token matcher uses it.
#pragma once

#include <cstdint>
#include <string>

namespace ek::tokjson {

// `id` is the id Hugging Face assigns (Document::added_tokens says how), not
// necessarily the file's.
struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

}  // namespace ek::tokjson
