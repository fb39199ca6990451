#include "core/parse.h"

#include <charconv>
#include <cmath>

namespace ek {

std::optional<int64_t> ParseInt64(std::string_view s, int base) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> ParseUint64(std::string_view s, int base) {
  uint64_t v = 0;
  if (s.empty() || s[0] == '-') return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseIntIn(std::string_view s, int64_t lo, int64_t hi) {
  auto v = ParseInt64(s);
  if (!v || *v < lo || *v > hi) return std::nullopt;
  return v;
}

std::optional<double> ParseDouble(std::string_view s) {
  double v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = FromCharsDouble(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::from_chars_result FromCharsDouble(const char* first, const char* last, double& value) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const char* p = first;
  const bool negative = p != last && *p == '-';
  if (negative) ++p;
  uint64_t mantissa = 0;
  int digits = 0;
  const char* int_start = p;
  while (p != last && *p >= '0' && *p <= '9') mantissa = mantissa * 10 + (*p++ - '0'), ++digits;
  int fraction = 0;
  if (p != int_start && p != last && *p == '.') {
    ++p;
    while (p != last && *p >= '0' && *p <= '9') {
      mantissa = mantissa * 10 + (*p++ - '0');
      ++digits, ++fraction;
    }
  }
  const bool exponent = p != last && (*p == 'e' || *p == 'E');
  if (p == int_start || exponent || digits > 15 || fraction > 22) {
    return std::from_chars(first, last, value);
  }
  const double v = static_cast<double>(mantissa) / kPow10[fraction];
  value = negative ? -v : v;
  return {p, std::errc()};
}

}  // namespace ek
