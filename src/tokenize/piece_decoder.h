// The decoders of SentencePiece-style tokenizer.json files: a chain of steps
// over the token strings, each as Hugging Face tokenizers' decode_chain
// (decoders/*.rs), the result joined:
//   Replace       each match of the pattern in each token by the content;
//   ByteFallback  runs of <0xHH> tokens to the text of their bytes, or one
//                 U+FFFD per byte when the run is not valid UTF-8;
//   Fuse          all tokens joined into one;
//   Strip         up to `start` leading and `stop` trailing copies of one
//                 character off each token;
//   Metaspace     the replacement character to a space, except in the first
//                 token where it is dropped unless prepend_scheme is never.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenize/pattern.h"

namespace ek::tokenize {

class PieceDecoder {
 public:
  void AddReplace(std::unique_ptr<Pattern> pattern, std::string content);
  void AddByteFallback();
  void AddFuse();
  void AddStrip(uint32_t content, size_t start, size_t stop);
  void AddMetaspace(uint32_t replacement, bool drop_in_first);

  // Appends the text of `tokens` (each a token's string: an added token's
  // content or a vocabulary key) to `out`.
  void Decode(std::vector<std::string> tokens, std::string* out) const;

 private:
  struct Step {
    enum Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
    explicit Step(Kind k) : kind(k) {}
    Kind kind;
    std::unique_ptr<Pattern> pattern;  // Replace
    std::string content;               // Replace
    uint32_t ch = 0;                   // Strip's content, Metaspace's replacement
    size_t start = 0, stop = 0;        // Strip
    bool drop_in_first = false;        // Metaspace
  };
  void Apply(const Step& step, std::vector<std::string>* tokens) const;
  std::vector<Step> steps_;
};

}  // namespace ek::tokenize
