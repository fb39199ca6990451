// Locates the first syntax error in a JSON text, for messages like
// "tokenizer.json: line 3, column 17 (byte 52): expected ',' or '}'".
// simdjson (the parser we use) reports what went wrong but not where.
#pragma once

#include <string>
#include <string_view>

namespace ek {

// Returns "" when `text` is syntactically valid JSON (one value, optional
// surrounding whitespace), else "line L, column C (byte B): what".
std::string LocateJsonError(std::string_view text);

// "line L, column C (byte B)" for a byte offset into text.
std::string DescribeOffset(std::string_view text, size_t offset);

}  // namespace ek
