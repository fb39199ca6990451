// UTF-8 well-formedness, shared by the JSONL readers and the tokenizer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ek {

// Byte offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t FirstInvalidUtf8(std::string_view s);

// Replaces each maximal ill-formed subsequence with U+FFFD, exactly as
// Python's bytes.decode("utf-8", errors="replace") (and Rust's
// String::from_utf8_lossy) do. Returns the number of replacements.
size_t ReplaceInvalidUtf8(std::string_view in, std::string* out);

}  // namespace ek
