// The normalizers of SentencePiece-style tokenizer.json files, applied in
// order as Hugging Face tokenizers' normalizers::Sequence does: Prepend (a
// string before any non-empty text: normalizers/prepend.rs), Replace (each
// leftmost non-overlapping match of a String or Regex pattern by a fixed
// content: normalizers/replace.rs), NFC and NFKC (Hugging Face's Unicode 9.0
// tables, as unicode.h's AppendNfc).
//
// Normalizing can also give an alignment: for every byte boundary j of the
// output (0..size), the boundary of the input it comes from. A byte inside or
// at the end of a replacement maps to the end of what it replaced, a prepended
// byte to the start. NFC and NFKC map a changed text as a whole (every inner
// boundary to the start, the end to the end): offsets are exact on text they
// leave unchanged.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/pattern.h"

namespace ek::tokenize {

class Normalizer {
 public:
  void AddPrepend(std::string text);
  // `pattern` finds what to replace (a literal or a regex).
  void AddReplace(std::unique_ptr<Pattern> pattern, std::string content);
  void AddNfc();
  void AddNfkc();

  bool empty() const { return steps_.empty(); }
  // True when NFC is a step and the other steps commute with it (Prepend,
  // Replace of text unchanged by NFC): NFC text in, the same out.
  bool has_nfc() const { return has_nfc_; }
  std::string Describe() const;

  // Writes the normalized `in` (valid UTF-8) to `out` (cleared first); with
  // `align`, the alignment (out->size() + 1 entries). `tmp` is scratch space.
  void Apply(std::string_view in, std::string* out, std::vector<uint32_t>* align, std::string* tmp,
             std::vector<uint32_t>* tmp_align) const;

 private:
  struct Step {
    enum Kind { kPrepend, kReplace, kNfc, kNfkc } kind;
    std::string text;                  // Prepend's text, Replace's content
    std::unique_ptr<Pattern> pattern;  // Replace
  };
  void ApplyStep(const Step& step, std::string_view in, std::string* out,
                 std::vector<uint32_t>* align) const;
  std::vector<Step> steps_;
  bool has_nfc_ = false;
};

}  // namespace ek::tokenize
