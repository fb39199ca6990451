// Numbers from text that came from a file, a flag or the environment: the
// whole string must be the number, in range, or the answer is nullopt. Never
// throws (std::stoi and friends throw on bad input, and an exception out of a
// library aborts the tool).
#pragma once

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

}  // namespace ek
