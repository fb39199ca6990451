// Shared by tokenizer.cc (encoding) and tokenizer_json.cc (the tokenizer.json
// loader) and nothing else: the pre-tokenizer steps a loaded tokenizer runs.
#pragma once

#include <memory>

#include "tokenize/pattern.h"
#include "tokenize/tokenizer.h"

namespace ek::tokenize {

// ---------------------------------------------------------------------------
// Pre-tokenizer steps.

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Tokenizer::PreStep {
  enum Kind { kSplit, kByteLevel } kind = kSplit;
  std::unique_ptr<Pattern> pattern;  // Split, or ByteLevel with use_regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
};

}  // namespace ek::tokenize
