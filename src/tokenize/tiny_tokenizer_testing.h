// A tiny byte-level tokenizer.json for tests of the tokenizer and of the
// components built on it. Test-only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json_out.h"
#include "tokenize/pattern.h"
#include "tokenize/unicode.h"

namespace ek::tokenize::testing {

// GPT-2 byte table, written independently of the loader's.
inline std::string ByteChar(int b) {
  static std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256);
    int n = 0;
    for (int i = 0; i < 256; ++i) {
      bool keep = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
      t[i] = keep ? i : 256 + n++;
    }
    return t;
  }();
  std::string s;
  AppendUtf8(&s, table[b]);
  return s;
}

// Replaces the first `from` in *json with `to`; false when there is none (a test's
// edit of a tokenizer.json that no longer applies).
inline bool ReplaceOnce(std::string* json, std::string_view from, std::string_view to) {
  const size_t at = json->find(from);
  if (at == std::string::npos) return false;
  json->replace(at, from.size(), to);
  return true;
}

// A tiny byte-level tokenizer: 256 byte tokens, "he"=256, "ll"=257, "hell"=258,
// "hello"=259, "Ġw"=260; added tokens <|x|> (special) and <y> (lstrip, rstrip).
inline std::string TinyJson(std::string_view normalizer = "{\"type\":\"NFC\"}",
                            std::string_view pre = "") {
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    vocab += JsonString(ByteChar(b)) + ":" + std::to_string(b) + ",";
  }
  vocab += "\"he\":256,\"ll\":257,\"hell\":258,\"hello\":259,\"Ġw\":260}";
  std::string pre_json =
      pre.empty()
          ? std::string(
                R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":)") +
                JsonString(kQwen2Regex) +
                R"(},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})"
          : std::string(pre);
  return std::string(R"({"version":"1.0","truncation":null,"padding":null,"added_tokens":[)") +
         R"({"id":261,"content":"<|x|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},)" +
         R"({"id":262,"content":"<y>","single_word":false,"lstrip":true,"rstrip":true,"normalized":false,"special":false}],)" +
         "\"normalizer\":" + std::string(normalizer) + ",\"pre_tokenizer\":" + pre_json +
         R"(,"post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","dropout":null,"unk_token":null,)" +
         R"("ignore_merges":false,"vocab":)" + vocab +
         R"(,"merges":["h e","l l",["he","ll"],"hell o","Ġ w"]}})";
}

}  // namespace ek::tokenize::testing
