// Small, allocation-friendly helpers for writing JSON. Parsing uses simdjson.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ek {

// Appends `s` as a quoted JSON string. `s` must be valid UTF-8; control
// characters, '"' and '\\' are escaped, everything else is copied as is.
void AppendJsonString(std::string* out, std::string_view s);
std::string JsonString(std::string_view s);

// Appends the decimal form of v (fast path for token ids and counters).
void AppendInt(std::string* out, int64_t v);

// Appends "[a,b,c]".
void AppendIntArray(std::string* out, const int32_t* v, size_t n);

// "0-2,4-15": sorted, deduplicated integers as compact ranges.
std::string CompactRanges(std::vector<int64_t> values);

}  // namespace ek
