// Patterns for the Split pre-tokenizer. A Pattern finds successive,
// non-overlapping matches the way Hugging Face tokenizers' SysRegex does
// (Oniguruma find_iter: leftmost-first alternation, an empty match right
// after the previous match is skipped by one character).
//
// The regexes that real byte-level tokenizers ship (GPT-2, Llama 3 / cl100k,
// Qwen2 / Qwen3) have hand-written matchers that give the same matches as
// Oniguruma on every valid UTF-8 input (pattern_test.cc checks them against
// the Oniguruma matcher on random text) at a fraction of the cost; every
// other regex runs on Oniguruma itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek::tokenize {

struct Span {
  uint32_t begin;
  uint32_t end;
};

class Pattern {
 public:
  virtual ~Pattern() = default;
  // Appends the matches in `text` (valid UTF-8) to `out`. Thread-safe.
  virtual void FindMatches(std::string_view text, std::vector<Span>* out) const = 0;
  // A short name for diagnostics ("qwen2", "llama3", "gpt2", "oniguruma", "literal").
  virtual std::string_view kind() const = 0;
  // True when the matches of any text cover it end to end, with no gaps
  // between them (the hand-written matchers: every character is in one).
  virtual bool covers_all() const { return false; }
};

// The GPT-2 pattern used by ByteLevel(use_regex=true).
inline constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 / cl100k_base.
inline constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 / Qwen2.5 / Qwen3: as Llama 3 but single digits.
inline constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Compiles `regex`: a hand-written matcher when it is one of the known
// patterns above, else Oniguruma. Errors name the regex and the position.
Result<std::unique_ptr<Pattern>> CompileRegex(std::string_view regex);
// As CompileRegex, with the Llama 3 / Qwen2 matcher's 64-byte ASCII blocks
// (ascii_block.h) off: every match byte by byte (for the differential tests).
Result<std::unique_ptr<Pattern>> CompileRegexBytewise(std::string_view regex);
// Always Oniguruma (for tests and for --slow-regex debugging).
Result<std::unique_ptr<Pattern>> CompileOnigRegex(std::string_view regex);
// `regex` with each \p{Category} widened by the code points that Unicode 16.0
// (HF's Oniguruma) has in it and the system's Oniguruma lacks.
std::string AlignRegexUnicode(std::string_view regex);
// A literal string (Split with {"String": ...}).
std::unique_ptr<Pattern> MakeLiteralPattern(std::string literal);

}  // namespace ek::tokenize
