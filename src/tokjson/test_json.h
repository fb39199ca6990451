// For the tokjson gtests: a minimal tokenizer.json (a BPE model over `vocab`, with
// `added` tokens, `decoder` and `merges`) as text.
#pragma once

#include <string>
#include <string_view>

namespace ek::tokjson::testing {

inline std::string TokenizerJson(std::string_view vocab, std::string_view added = "[]",
                                 std::string_view decoder = R"({"type":"ByteLevel"})",
                                 std::string_view merges = "[]") {
  return std::string(R"({"added_tokens":)") + std::string(added) + R"(,"decoder":)" +
         std::string(decoder) + R"(,"model":{"type":"BPE","vocab":)" + std::string(vocab) +
         R"(,"merges":)" + std::string(merges) + "}}";
}

}  // namespace ek::tokjson::testing
