// Added tokens (special and not) found in text the way Hugging Face's
// AddedVocabulary does: leftmost-longest matches over all token contents
// (aho-corasick MatchKind::LeftmostLongest), then the single_word, lstrip and
// rstrip rules of added_vocabulary.rs find_matches.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokjson/added_token.h"

namespace ek::tokenize {

// An added token as the tokenizer.json reader gives it (content, id, flags).
using AddedToken = tokjson::AddedToken;

// A piece of text between added tokens (token_id < 0) or an added token.
struct AddedSplit {
  size_t begin;
  size_t end;
  int32_t token_id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is the text to find for `tokens[i]` (the content, or its
  // normalized form for normalized tokens).
  void Build(std::vector<AddedToken> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }

  // Splits `text` into added tokens and the text between them (non-empty
  // pieces only), appending to `out`.
  void Split(std::string_view text, std::vector<AddedSplit>* out) const;

 private:
  struct Node {
    int32_t token = -1;  // index into tokens_
    std::vector<std::pair<unsigned char, int32_t>> kids;
  };
  // Leftmost-longest match at or after `from`.
  bool FindNext(std::string_view text, size_t from, size_t* begin, size_t* end,
                int32_t* which) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
  int only_first_ = -1;  // the one first byte of every pattern, or -1
};

}  // namespace ek::tokenize
