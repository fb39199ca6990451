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
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace ek
