#include "core/utf8.h"

#include <cstdint>

namespace ek {

namespace {

// Length of the well-formed sequence at s[i], or 0 with *consumed set to the
// length of the maximal ill-formed subpart (at least 1).
size_t WellFormedAt(const unsigned char* s, size_t n, size_t i, size_t* consumed) {
  unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *consumed = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= n) break;
    unsigned char b = s[i + k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need + 1) return need + 1;
  *consumed = k;
  return 0;
}

}  // namespace

size_t DecodeUtf8Checked(std::string_view sv, size_t i, uint32_t* cp, size_t* bad) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t consumed = 0;
  size_t len = WellFormedAt(s, sv.size(), i, &consumed);
  if (len == 0) {
    if (bad) *bad = consumed;
    return 0;
  }
  DecodeUtf8(s + i, cp);
  return len;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t FirstInvalidUtf8(std::string_view sv) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size();
  size_t i = 0;
  while (i < n) {
    i = NextNonAscii(s, i, n);
    if (i >= n) break;
    size_t consumed;
    size_t len = WellFormedAt(s, n, i, &consumed);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t ReplaceInvalidUtf8(std::string_view sv, std::string* out) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0, run = 0, replaced = 0;
  while (i < n) {
    size_t consumed;
    size_t len = WellFormedAt(s, n, i, &consumed);
    if (len) {
      i += len;
      continue;
    }
    out->append(sv.data() + run, i - run);
    out->append("\xEF\xBF\xBD");
    ++replaced;
    i += consumed;
    run = i;
  }
  out->append(sv.data() + run, n - run);
  return replaced;
}

}  // namespace ek
