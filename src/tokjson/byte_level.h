// Byte-level BPE's alphabet: GPT-2's table from each of the 256 bytes to a
// printable code point (Hugging Face tokenizers' byte_level `bytes_char`), the
// form in which a byte-level tokenizer.json spells its vocabulary, merges and
// added tokens. One home for the table: the tokenizer.json reader (document.h)
// and the tokenizer's loader read token strings through it.
#pragma once

#include <string>
#include <string_view>

namespace ek::tokjson {

// The raw bytes of a byte-level token string (valid UTF-8, as simdjson hands
// it over); false, with *out unspecified, when a character is outside the table.
bool ByteLevelToBytes(std::string_view s, std::string* out);

// What Hugging Face's ByteLevel decoder gives for one token: its raw bytes when
// every character is in the table, else the token's own text (UTF-8).
std::string ByteLevelDecode(std::string_view s);

}  // namespace ek::tokjson
