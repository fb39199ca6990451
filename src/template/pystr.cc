#include "template/pystr.h"

#include <fmt/core.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

namespace ek::tmpl {

bool IsPySpace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t PySpaceLen(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return IsPySpace(c) ? 1 : 0;
  if (c != 0xC2 && c != 0xE1 && c != 0xE2 && c != 0xE3) return 0;
  size_t len;
  uint32_t cp = DecodeUtf8At(s, i, &len);
  return IsPySpace(cp) ? len : 0;
}

namespace {

bool InSet(uint32_t cp, std::string_view chars) {
  for (size_t i = 0; i < chars.size();) {
    size_t len;
    if (DecodeUtf8At(chars, i, &len) == cp) return true;
    i += len;
  }
  return false;
}

bool StripHere(std::string_view s, size_t i, const std::optional<std::string_view>& chars,
               size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (!chars && c < 0x80) {
    *len = 1;
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  }
  uint32_t cp = DecodeUtf8At(s, i, len);
  return chars ? InSet(cp, *chars) : IsPySpace(cp);
}

// Python's full case mappings that are more than one code point (ß -> SS,
// İ -> i̇, ﬁ -> FI, ...), generated from CPython (special_casing.inc).
struct SpecialCase {
  uint32_t cp;
  const char32_t* upper;
  const char32_t* lower;
  const char32_t* title;
};
constexpr SpecialCase kSpecialCases[] = {
#include "template/special_casing.inc"
};

const SpecialCase* FindSpecialCase(uint32_t cp) {
  if (cp < 0xDF) return nullptr;
  auto it = std::lower_bound(std::begin(kSpecialCases), std::end(kSpecialCases), cp,
                             [](const SpecialCase& c, uint32_t v) { return c.cp < v; });
  return it != std::end(kSpecialCases) && it->cp == cp ? it : nullptr;
}

// Σ lower-cases to ς or σ by its context (Final_Sigma): refused, not guessed.
bool SpecialLower(uint32_t cp) { return cp == 0x3A3; }

bool IsCased(uint32_t cp) {
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

Status Refuse(uint32_t cp, std::string_view what) {
  return UnsupportedError(
      fmt::format("unsupported: {} of U+{:04X} (Python picks the mapping by context; evenkeel "
                  "refuses rather than differ)",
                  what, cp));
}

}  // namespace

std::string_view PyStrip(std::string_view s, const std::optional<std::string_view>& chars,
                         bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t len;
      if (!StripHere(s, b, chars, &len)) break;
      b += len;
    }
  }
  if (right) {
    // Walk back over the code points in the set, from the end.
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t len;
      if (!StripHere(s, start, chars, &len)) break;
      e = start;
    }
  }
  return s.substr(b, e - b);
}

Result<std::vector<std::string>> PySplit(std::string_view s,
                                         const std::optional<std::string_view>& sep,
                                         int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep && sep->empty()) return InvalidArgumentError("empty separator");
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit-- > 0) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      out.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit-- > 0 && end >= sep->size()) {
        size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string_view::npos) break;
        out.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      out.emplace_back(s.substr(0, end));
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  // Whitespace runs; empty pieces dropped.
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < s.size()) {
        size_t l = PySpaceLen(s, i);
        if (!l) break;
        i += l;
      }
      if (i >= s.size()) break;
      if (maxsplit-- <= 0) {
        out.emplace_back(s.substr(i));
        break;
      }
      size_t start = i;
      while (i < s.size() && !PySpaceLen(s, i)) {
        size_t len;
        DecodeUtf8At(s, i, &len);
        i += len;
      }
      out.emplace_back(s.substr(start, i - start));
    }
    return out;
  }
  // rsplit(None): work on code point boundaries from the right.
  std::vector<size_t> starts;  // code point starts
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  auto space_at = [&](size_t k) { return PySpaceLen(s, starts[k]) != 0; };
  int64_t k = static_cast<int64_t>(starts.size()) - 1;
  while (true) {
    while (k >= 0 && space_at(static_cast<size_t>(k))) --k;
    if (k < 0) break;
    size_t end =
        static_cast<size_t>(k) + 1 < starts.size() ? starts[static_cast<size_t>(k) + 1] : s.size();
    if (maxsplit-- <= 0) {
      out.emplace_back(s.substr(0, end));
      break;
    }
    while (k >= 0 && !space_at(static_cast<size_t>(k))) --k;
    size_t begin = starts[static_cast<size_t>(k + 1)];
    out.emplace_back(s.substr(begin, end - begin));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t len;
    uint32_t cp = DecodeUtf8At(s, i, &len);
    bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
               cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) {
      i += len;
      continue;
    }
    size_t eol = i + len;
    if (cp == '\r' && eol < s.size() && s[eol] == '\n') ++eol;
    out.emplace_back(s.substr(start, (keepends ? eol : i) - start));
    start = i = eol;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old_s, std::string_view new_s,
                      int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old_s.empty()) {
    // Python inserts `new` before every code point and at the end.
    size_t i = 0;
    while (i < s.size() && count > 0) {
      out += new_s;
      --count;
      size_t len;
      DecodeUtf8At(s, i, &len);
      out.append(s.substr(i, len));
      i += len;
    }
    if (i < s.size()) {
      out.append(s.substr(i));
    } else if (count > 0) {
      out += new_s;
    }
    return out;
  }
  size_t pos = 0;
  while (count-- > 0) {
    size_t hit = s.find(old_s, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out += new_s;
    pos = hit + old_s.size();
  }
  out.append(s.substr(pos));
  return out;
}

namespace {
int64_t CodePointIndex(std::string_view s, size_t byte) {
  int64_t n = 0;
  for (size_t i = 0; i < byte; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return n;
}
}  // namespace

int64_t PyFind(std::string_view s, std::string_view sub, bool from_right) {
  size_t hit = from_right ? s.rfind(sub) : s.find(sub);
  return hit == std::string_view::npos ? -1 : CodePointIndex(s, hit);
}

int64_t PyCount(std::string_view s, std::string_view sub) {
  if (sub.empty()) {
    int64_t n = 1;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

Result<std::string> PyCase(std::string_view s, CaseOp op) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp = c < 0x80 ? (len = 1, c) : DecodeUtf8At(s, i, &len);
    i += len;
    bool to_upper = false, to_lower = false, to_title = false;
    switch (op) {
      case CaseOp::kUpper:
        to_upper = true;
        break;
      case CaseOp::kLower:
        to_lower = true;
        break;
      case CaseOp::kTitle:
        if (prev_cased) {
          to_lower = true;
        } else {
          to_title = true;
        }
        break;
      case CaseOp::kCapitalize:
        if (first) {
          to_title = true;
        } else {
          to_lower = true;
        }
        break;
      case CaseOp::kSwapcase: {
        auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
        if (cat == UTF8PROC_CATEGORY_LU) {
          to_lower = true;
        } else if (cat == UTF8PROC_CATEGORY_LL) {
          to_upper = true;
        }
        break;
      }
    }
    first = false;
    uint32_t mapped = cp;
    if (cp < 0x80) {
      if (to_upper || to_title) mapped = (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
      if (to_lower) mapped = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
      prev_cased = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    } else {
      if (to_lower && SpecialLower(cp)) return Refuse(cp, "lower()");
      if (const SpecialCase* sc = FindSpecialCase(cp)) {
        for (const char32_t* m = to_upper ? sc->upper : to_lower ? sc->lower : sc->title; *m; ++m) {
          AppendUtf8(&out, static_cast<uint32_t>(*m));
        }
        prev_cased = IsCased(cp);
        continue;
      }
      auto u = static_cast<utf8proc_int32_t>(cp);
      if (to_upper) mapped = static_cast<uint32_t>(utf8proc_toupper(u));
      if (to_title) mapped = static_cast<uint32_t>(utf8proc_totitle(u));
      if (to_lower) mapped = static_cast<uint32_t>(utf8proc_tolower(u));
      prev_cased = IsCased(cp);
    }
    AppendUtf8(&out, mapped);
  }
  return out;
}

Result<std::string> JinjaTitle(std::string_view s) {
  // jinja2: "".join(item[0].upper() + item[1:].lower() for item in re.split(r"([-\s({\[<]+)", s) if
  // item)
  std::string out;
  auto is_sep = [&](size_t i, size_t* len) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    *len = 1;
    if (c == '-' || c == '(' || c == '{' || c == '[' || c == '<') return true;
    size_t l = PySpaceLen(s, i);
    if (l) *len = l;
    return l != 0;
  };
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (is_sep(i, &len)) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    size_t start = i;
    while (i < s.size() && !is_sep(i, &len)) {
      DecodeUtf8At(s, i, &len);
      i += len;
    }
    std::string_view word = s.substr(start, i - start);
    size_t first_len;
    DecodeUtf8At(word, 0, &first_len);
    EK_ASSIGN_OR_RETURN(std::string head, PyCase(word.substr(0, first_len), CaseOp::kUpper));
    EK_ASSIGN_OR_RETURN(std::string tail, PyCase(word.substr(first_len), CaseOp::kLower));
    out += head;
    out += tail;
  }
  return out;
}

bool PyIsClass(std::string_view s, std::string_view method) {
  if (s.empty()) return false;
  bool any_cased = false;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    uint32_t cp = DecodeUtf8At(s, i, &len);
    i += len;
    auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    bool letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
    bool digit = cat == UTF8PROC_CATEGORY_ND;
    bool numeric = digit || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
    if (method == "isdigit" || method == "isdecimal") {
      if (!digit) return false;
    } else if (method == "isnumeric") {
      if (!numeric) return false;
    } else if (method == "isalpha") {
      if (!letter) return false;
    } else if (method == "isalnum") {
      if (!letter && !numeric) return false;
    } else if (method == "isspace") {
      if (!IsPySpace(cp)) return false;
    } else if (method == "isupper") {
      if (cat == UTF8PROC_CATEGORY_LL) return false;
      any_cased = any_cased || cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT;
    } else if (method == "islower") {
      if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT) return false;
      any_cased = any_cased || cat == UTF8PROC_CATEGORY_LL;
    } else {
      return false;
    }
  }
  if (method == "isupper" || method == "islower") return any_cased;
  return true;
}

// Python's repr of an ASCII character, quoted with ' (row 0) or " (row 1): its
// length and text, one table entry a byte, so a long ASCII string is a table
// walk rather than a compare chain a byte (see AppendJsonString in value.cc).
struct ReprEscape {
  char text[4];
  uint8_t len;
};
constexpr std::array<std::array<ReprEscape, 128>, 2> MakeReprEscapes() {
  std::array<std::array<ReprEscape, 128>, 2> t{};
  constexpr char kHex[] = "0123456789abcdef";
  for (int row = 0; row < 2; ++row) {
    char q = row == 0 ? '\'' : '"';
    for (int c = 0; c < 128; ++c) {
      ReprEscape& e = t[row][c];
      auto two = [&e](char x) {
        e.text[0] = '\\';
        e.text[1] = x;
        e.len = 2;
      };
      if (c == '\\' || c == q) {
        two(static_cast<char>(c));
      } else if (c == '\n') {
        two('n');
      } else if (c == '\r') {
        two('r');
      } else if (c == '\t') {
        two('t');
      } else if (c < 0x20 || c == 0x7F) {
        e.text[0] = '\\';
        e.text[1] = 'x';
        e.text[2] = kHex[c >> 4];
        e.text[3] = kHex[c & 15];
        e.len = 4;
      } else {
        e.text[0] = static_cast<char>(c);
        e.len = 1;
      }
    }
  }
  return t;
}
constexpr std::array<std::array<ReprEscape, 128>, 2> kReprEscapes = MakeReprEscapes();

std::string PyStrRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = has_single && !has_double ? '"' : '\'';
  const std::array<ReprEscape, 128>& ascii = kReprEscapes[q == '"'];
  std::string out(1, q);
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    size_t j = i;  // a run of ASCII, written through the table
    while (j < s.size() && static_cast<unsigned char>(s[j]) < 0x80) ++j;
    if (j > i) {
      size_t at = out.size();
      out.resize(at + 4 * (j - i));  // the longest entry is 4 bytes
      char* p = out.data() + at;
      for (; i < j; ++i) {
        const ReprEscape& e = ascii[static_cast<unsigned char>(s[i])];
        std::memcpy(p, e.text, 4);
        p += e.len;
      }
      out.resize(static_cast<size_t>(p - out.data()));
      continue;
    }
    size_t len;
    uint32_t cp = DecodeUtf8At(s, i, &len);
    if (cp == '\\') {
      out += "\\\\";
    } else if (cp == static_cast<uint32_t>(q)) {
      out += '\\';
      out += q;
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", cp);
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
      bool printable = !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                         cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
                         cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                         cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
      if (printable) {
        out.append(s.substr(i, len));
      } else if (cp < 0x100) {
        out += fmt::format("\\x{:02x}", cp);
      } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", cp);
      } else {
        out += fmt::format("\\U{:08x}", cp);
      }
    }
    i += len;
  }
  out += q;
  return out;
}

}  // namespace ek::tmpl
