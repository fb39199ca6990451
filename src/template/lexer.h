// The lexer of Jinja chat templates: source text to tokens, with jinja2 3.1's
// whitespace control as transformers configures it (the rules: lexer.cc). Used by
// the parser only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "template/value.h"

namespace ek::tmpl {

// ---------------------------------------------------------------------------------------
// Tokens.

enum class Tok {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEnd
};

struct Token {
  Tok type;
  std::string value;
  int line;
  Value literal;  // kString, kInt, kFloat
};

// The tokens of `source` ending with one kEnd; an error names `name` and the line.
Result<std::vector<Token>> Lex(std::string_view source, const std::string& name);

}  // namespace ek::tmpl
