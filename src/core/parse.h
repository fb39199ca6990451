// Numbers from text that came from a file, a flag or the environment: the
// whole string must be the number, in range, or the answer is nullopt. Never
// throws (std::stoi and friends throw on bad input, and an exception out of a
// library aborts the tool).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ek {

// Decimal (or `base`) integer, optional leading '-'; no spaces, no '+', no trailing text.
std::optional<int64_t> ParseInt64(std::string_view s, int base = 10);
std::optional<uint64_t> ParseUint64(std::string_view s, int base = 10);
// An int64 within [lo, hi].
std::optional<int64_t> ParseIntIn(std::string_view s, int64_t lo, int64_t hi);
// A finite double in plain or scientific notation.
std::optional<double> ParseDouble(std::string_view s);

// std::from_chars for a double (general format), the same answer to the bit, with a fast
// path for the plain decimals telemetry is made of ("1006.15", "-3", "0.5"): up to 15
// digits and at most 22 after the point are exact as an integer over a power of ten, and
// one IEEE division rounds that correctly (Clinger's fast path). Anything else (an exponent,
// more digits, inf, nan) goes to std::from_chars. A 1,024-GPU report parses 66 million.
std::from_chars_result FromCharsDouble(const char* first, const char* last, double& value);

}  // namespace ek
