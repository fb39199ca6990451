#include "tokenize/pattern.h"

#include <fmt/core.h>
#include <oniguruma.h>

#include <cstring>
#include <mutex>

#include "tokenize/ascii_block.h"
#include "tokenize/unicode.h"

namespace ek::tokenize {

namespace {

// The number of leading bytes of the 8 at p that are ASCII letters (A-Z, a-z).
inline size_t AsciiLetterPrefix(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  // With the high bit clear, w | 0x20 maps A-Z onto a-z (and nothing else
  // there); a byte is in [0x61, 0x7A] when adding 0x1F sets its high bit and
  // adding 0x05 does not (no carry crosses bytes below 0x80).
  const uint64_t l = w | (0x20 * kOnes);
  const uint64_t letters = (l + 0x1F * kOnes) & ~(l + 0x05 * kOnes) & ~w & kHigh;
  const uint64_t stop = ~letters & kHigh;
  return stop ? static_cast<size_t>(__builtin_ctzll(stop)) / 8 : 8;
}

inline bool IsAsciiLetter(unsigned char b) {
  return static_cast<unsigned char>((b | 0x20) - 'a') < 26;
}

// Shared scanning helpers over valid UTF-8.
class Scanner {
 public:
  Scanner(std::string_view text)
      : s_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(text.size()),
        cls_(CharClasses::Get()) {}

  size_t size() const { return n_; }
  // Code point and length at i (i < n).
  size_t At(size_t i, uint32_t* cp) const { return DecodeUtf8(s_ + i, cp); }
  uint8_t ClassAt(size_t i, uint32_t* cp, size_t* len) const {
    *len = At(i, cp);
    return cls_.Of(*cp);
  }
  // End of the run of code points starting at i whose class has `bit`.
  size_t RunOf(size_t i, uint8_t bit) const {
    while (i < n_) {
      uint32_t cp;
      size_t len;
      if (!(ClassAt(i, &cp, &len) & bit)) break;
      i += len;
    }
    return i;
  }
  // End of the run of letters (\p{L}) starting at i: ASCII letters eight
  // bytes at a time, other code points one at a time through the class table
  // (a word in another script tries no ASCII step between its characters).
  size_t RunOfLetters(size_t i) const {
    while (i < n_) {
      if (s_[i] < 0x80) {
        if (i + 8 > n_) {
          if (!IsAsciiLetter(s_[i])) break;
          ++i;
          continue;
        }
        const size_t k = AsciiLetterPrefix(s_ + i);
        i += k;
        if (k == 8) continue;
        if (s_[i] < 0x80) break;  // (fewer than 8 letters: i < n_)
      }
      uint32_t cp;
      const size_t len = At(i, &cp);
      if (!(cls_.Of(cp) & kClassLetter)) break;
      i += len;
    }
    return i;
  }
  // End of the run of "other" code points: not \s, not \p{L}, not \p{N}.
  size_t RunOfOther(size_t i) const {
    while (i < n_) {
      uint32_t cp;
      size_t len;
      if (ClassAt(i, &cp, &len) & (kClassLetter | kClassNumber | kClassSpace)) break;
      i += len;
    }
    return i;
  }
  unsigned char byte(size_t i) const { return s_[i]; }
  // Whether the eight bytes at i are all there and all ' '.
  bool EightSpacesAt(size_t i) const {
    if (i + 8 > n_) return false;
    uint64_t w;
    std::memcpy(&w, s_ + i, 8);
    return w == 0x2020202020202020ull;
  }
  // The class of an ASCII byte (b < 0x80).
  uint8_t AsciiClass(unsigned char b) const { return cls_.Of(b); }

 private:
  const unsigned char* s_;
  size_t n_;
  const CharClasses& cls_;
};

inline bool IsNewline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Whitespace alternatives shared by all three patterns, at i where the code
// point is whitespace. `newline_rule` enables \s*[\r\n]+ (Llama 3 / Qwen).
size_t MatchWhitespace(const Scanner& sc, size_t i, bool newline_rule) {
  size_t j = i, last_nl_end = 0, last_len = 0, count = 0;
  const size_t n = sc.size();
  while (j < n) {
    if (const unsigned char b = sc.byte(j); b < 0x80) {  // ASCII: the class of the byte
      if (sc.EightSpacesAt(j)) {                         // indentation, eight spaces a step
        j += 8;
        count += 8;
        last_len = 1;
        continue;
      }
      if (!(sc.AsciiClass(b) & kClassSpace)) break;
      ++j;
      last_len = 1;
      ++count;
      if (b == '\r' || b == '\n') last_nl_end = j;
      continue;
    }
    uint32_t cp;
    size_t len;
    if (!(sc.ClassAt(j, &cp, &len) & kClassSpace)) break;
    j += len;
    last_len = len;
    ++count;
  }
  // \s*[\r\n]+ : ends right after the last newline of the run.
  if (newline_rule && last_nl_end != 0) return last_nl_end;
  // \s+(?!\S) : the whole run at end of text, else all but its last char.
  if (j == sc.size()) return j;
  if (count >= 2) return j - last_len;
  // \s+
  return j;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (text[i] == '\''); 0 if none.
// Case-insensitive with Oniguruma's case folding: U+017F (long s) folds to s.
size_t MatchContraction(const Scanner& sc, size_t i, bool ignore_case) {
  size_t n = sc.size();
  if (i + 1 >= n) return 0;
  uint32_t c1;
  size_t l1 = sc.At(i + 1, &c1);
  auto lower = [&](uint32_t c) -> uint32_t {
    if (!ignore_case) return c;
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's';
    return c;
  };
  uint32_t a = lower(c1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + l1;
  if (a == 'r' || a == 'v' || a == 'l') {
    size_t k = i + 1 + l1;
    if (k >= n) return 0;
    uint32_t c2;
    size_t l2 = sc.At(k, &c2);
    uint32_t b = lower(c2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return 1 + l1 + l2;
    }
  }
  return 0;
}

// Llama 3 / Qwen2 family.
class Cl100kPattern final : public Pattern {
 public:
  Cl100kPattern(int max_digits, std::string_view name) : max_digits_(max_digits), name_(name) {}

  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    Scanner sc(text);
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    size_t i = 0, n = sc.size();
    size_t bytewise_until = 0;  // where a block had no certain start, byte by byte up to here
    while (i < n) {
      if (blocks_ && i >= bytewise_until && i + 64 < n) {
        size_t bytewise;
        if (const size_t next = Cl100kAsciiBlock(bytes + i, max_digits_, static_cast<uint32_t>(i),
                                                 out, &bytewise)) {
          i += next;
          continue;
        }
        bytewise_until = i + bytewise;
      }
      size_t end = MatchAt(sc, i);
      out->push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(end)});
      i = end;
    }
  }
  std::string_view kind() const override { return name_; }
  // Off: every match byte by byte (the differential tests compare both with Oniguruma).
  void set_blocks(bool on) { blocks_ = on; }
  bool covers_all() const override { return true; }

 private:
  // The end of \p{N}{1,max_digits_} whose first digit ends at j.
  size_t MoreDigits(const Scanner& sc, size_t j) const {
    for (int d = 1; d < max_digits_ && j < sc.size(); ++d) {
      uint32_t c;
      size_t l;
      if (!(sc.ClassAt(j, &c, &l) & kClassNumber)) break;
      j += l;
    }
    return j;
  }

  size_t MatchAt(const Scanner& sc, size_t i) const {
    size_t n = sc.size();
    // The commonest matches first, on ASCII bytes alone: a word, or a space and
    // a word ([^\r\n\p{L}\p{N}]?\p{L}+).
    if (const unsigned char b = sc.byte(i); IsAsciiLetter(b)) {
      return sc.RunOfLetters(i + 1);
    } else if (b == ' ' && i + 1 < n && IsAsciiLetter(sc.byte(i + 1))) {
      return sc.RunOfLetters(i + 2);
    } else if (b >= '0' && b <= '9') {  // \p{N}{1,max_digits_}
      return MoreDigits(sc, i + 1);
    } else if (b < 0x80 && b != '\'' && !(sc.AsciiClass(b) & kClassSpace) &&
               (i + 1 == n || sc.byte(i + 1) < 0x80)) {
      // ASCII punctuation before ASCII or the end: with a letter after it, the
      // two start a word; else ' '?[^\s\p{L}\p{N}]+[\r\n]* from it.
      if (i + 1 < n && IsAsciiLetter(sc.byte(i + 1))) return sc.RunOfLetters(i + 2);
      size_t e = sc.RunOfOther(i + 1);
      while (e < n && (sc.byte(e) == '\r' || sc.byte(e) == '\n')) ++e;
      return e;
    }
    uint32_t c0;
    size_t l0;
    uint8_t k0 = sc.ClassAt(i, &c0, &l0);
    if (c0 == '\'') {
      if (size_t m = MatchContraction(sc, i, true)) return i + m;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (k0 & kClassLetter) return sc.RunOfLetters(i + l0);
    if (!(k0 & kClassNumber) && !IsNewline(c0) && i + l0 < n) {
      uint32_t c1;
      size_t l1;
      if (sc.ClassAt(i + l0, &c1, &l1) & kClassLetter) return sc.RunOfLetters(i + l0 + l1);
    }
    // \p{N}{1,max}
    if (k0 & kClassNumber) return MoreDigits(sc, i + l0);
    // ' '?[^\s\p{L}\p{N}]+[\r\n]*
    size_t j = c0 == ' ' ? i + 1 : i;
    if (j < n) {
      uint32_t c;
      size_t l;
      if (!(sc.ClassAt(j, &c, &l) & (kClassLetter | kClassNumber | kClassSpace))) {
        size_t e = sc.RunOfOther(j + l);
        while (e < n && (sc.byte(e) == '\r' || sc.byte(e) == '\n')) ++e;
        return e;
      }
    }
    // \s*[\r\n]+ | \s+(?!\S) | \s+
    if (k0 & kClassSpace) return MatchWhitespace(sc, i, true);
    // Unreachable for valid input: every code point is L, N, \s or other.
    return i + l0;
  }

  int max_digits_;
  std::string_view name_;
  bool blocks_ = true;
};

class Gpt2Pattern final : public Pattern {
 public:
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    Scanner sc(text);
    size_t i = 0, n = sc.size();
    while (i < n) {
      size_t end = MatchAt(sc, i);
      out->push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(end)});
      i = end;
    }
  }
  std::string_view kind() const override { return "gpt2"; }
  bool covers_all() const override { return true; }

 private:
  static size_t MatchAt(const Scanner& sc, size_t i) {
    size_t n = sc.size();
    // The commonest matches first, on ASCII bytes alone ( ?\p{L}+).
    if (const unsigned char b = sc.byte(i); IsAsciiLetter(b)) {
      return sc.RunOfLetters(i + 1);
    } else if (b == ' ' && i + 1 < n && IsAsciiLetter(sc.byte(i + 1))) {
      return sc.RunOfLetters(i + 2);
    }
    uint32_t c0;
    size_t l0;
    uint8_t k0 = sc.ClassAt(i, &c0, &l0);
    if (c0 == '\'') {
      if (size_t m = MatchContraction(sc, i, false)) return i + m;
    }
    size_t j = i;
    uint8_t kj = k0;
    size_t lj = l0;
    if (c0 == ' ' && i + 1 < n) {
      uint32_t c1;
      j = i + 1;
      kj = sc.ClassAt(j, &c1, &lj);
    }
    if (j < n) {
      if (kj & kClassLetter) return sc.RunOfLetters(j + lj);
      if (kj & kClassNumber) return sc.RunOf(j + lj, kClassNumber);
      if (!(kj & kClassSpace)) return sc.RunOfOther(j + lj);
    }
    if (k0 & kClassSpace) return MatchWhitespace(sc, i, false);
    return i + l0;
  }
};

class OnigPattern final : public Pattern {
 public:
  explicit OnigPattern(regex_t* reg) : reg_(reg) {}
  ~OnigPattern() override { onig_free(reg_); }

  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
    const OnigUChar* end = str + text.size();
    OnigRegion* region = onig_region_new();
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    while (last_end <= text.size()) {
      onig_region_clear(region);
      int r = onig_search(reg_, str, end, str + last_end, end, region, ONIG_OPTION_NONE);
      if (r < 0) break;  // ONIG_MISMATCH, or an engine error: no more matches
      size_t s = static_cast<size_t>(region->beg[0]), e = static_cast<size_t>(region->end[0]);
      if (s == e && have_last && last_match_end == e) {
        if (last_end >= text.size()) break;
        uint32_t cp;
        last_end += DecodeUtf8(str + last_end, &cp);
        continue;
      }
      last_end = e;
      have_last = true;
      last_match_end = e;
      out->push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e)});
      if (s == e && e >= text.size()) break;
    }
    onig_region_free(region, 1);
  }
  std::string_view kind() const override { return "oniguruma"; }

 private:
  regex_t* reg_;
};

class LiteralPattern final : public Pattern {
 public:
  explicit LiteralPattern(std::string lit) : lit_(std::move(lit)) {}
  void FindMatches(std::string_view text, std::vector<Span>* out) const override {
    if (lit_.empty()) return;
    size_t pos = 0;
    while ((pos = text.find(lit_, pos)) != std::string_view::npos) {
      out->push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + lit_.size())});
      pos += lit_.size();
    }
  }
  std::string_view kind() const override { return "literal"; }

 private:
  std::string lit_;
};

}  // namespace

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// The system Oniguruma's ranges for a property name.
Ranges OnigRanges(const std::string& name) {
  Ranges out;
  OnigEncoding enc = ONIG_ENCODING_UTF8;
  auto* p = reinterpret_cast<OnigUChar*>(const_cast<char*>(name.c_str()));
  int ctype = ONIGENC_PROPERTY_NAME_TO_CTYPE(enc, p, p + name.size());
  OnigCodePoint sb_out = 0;
  const OnigCodePoint* ranges = nullptr;
  if (ctype < 0 || ONIGENC_GET_CTYPE_CODE_RANGE(enc, ctype, &sb_out, &ranges) != 0 || !ranges)
    return out;
  for (OnigCodePoint i = 0; i < ranges[0]; ++i)
    out.emplace_back(ranges[1 + 2 * i], ranges[2 + 2 * i]);
  return out;
}

// a minus b, for sorted disjoint inclusive ranges.
Ranges Subtract(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    uint32_t cur = lo;
    while (j < b.size() && b[j].second < cur) ++j;
    size_t k = j;
    while (cur <= hi) {
      if (k >= b.size() || b[k].first > hi) {
        out.emplace_back(cur, hi);
        break;
      }
      if (b[k].first > cur) out.emplace_back(cur, b[k].first - 1);
      if (b[k].second >= hi) break;
      cur = std::max(cur, b[k].second + 1);
      ++k;
    }
  }
  return out;
}

}  // namespace

std::string AlignRegexUnicode(std::string_view regex) {
  // Hugging Face's Oniguruma classifies with Unicode 16.0; the system's may be
  // older. Each \p{Category} gets the code points it lacks, written out.
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < regex.size(); ++i) {
    char c = regex[i];
    if (c == '\\' && i + 1 < regex.size()) {
      if ((regex[i + 1] == 'p') && i + 2 < regex.size() && regex[i + 2] == '{') {
        size_t close = regex.find('}', i + 3);
        if (close != std::string_view::npos) {
          std::string name(regex.substr(i + 3, close - i - 3));
          std::string escape(regex.substr(i, close - i + 1));
          Ranges ours = CategoryRanges(name);
          Ranges extra = ours.empty() ? Ranges{} : Subtract(ours, OnigRanges(name));
          if (extra.empty()) {
            out += escape;
          } else {
            std::string add = escape;
            for (auto [lo, hi] : extra) add += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", lo, hi);
            out += depth > 0 ? add : "[" + add + "]";
          }
          i = close;
          continue;
        }
      }
      out += c;
      out += regex[++i];
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']' && depth > 0) --depth;
    out += c;
  }
  return out;
}

Result<std::unique_ptr<Pattern>> CompileOnigRegex(std::string_view regex_in) {
  std::string aligned = AlignRegexUnicode(regex_in);
  std::string_view regex = aligned;
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encs[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encs, 1);
  });
  regex_t* reg = nullptr;
  OnigErrorInfo einfo;
  const auto* p = reinterpret_cast<const OnigUChar*>(regex.data());
  int r = onig_new(&reg, p, p + regex.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                   ONIG_SYNTAX_DEFAULT, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    return InvalidArgumentError("invalid regex " + std::string(regex_in) + ": " +
                                reinterpret_cast<char*>(msg));
  }
  return std::unique_ptr<Pattern>(new OnigPattern(reg));
}

Result<std::unique_ptr<Pattern>> CompileRegex(std::string_view regex) {
  if (regex == kQwen2Regex) return std::unique_ptr<Pattern>(new Cl100kPattern(1, "qwen2"));
  if (regex == kLlama3Regex) return std::unique_ptr<Pattern>(new Cl100kPattern(3, "llama3"));
  if (regex == kGpt2Regex) return std::unique_ptr<Pattern>(new Gpt2Pattern());
  return CompileOnigRegex(regex);
}

Result<std::unique_ptr<Pattern>> CompileRegexBytewise(std::string_view regex) {
  const int digits = regex == kQwen2Regex ? 1 : regex == kLlama3Regex ? 3 : 0;
  if (digits == 0) return CompileRegex(regex);
  auto p = std::make_unique<Cl100kPattern>(digits, digits == 1 ? "qwen2" : "llama3");
  p->set_blocks(false);
  return std::unique_ptr<Pattern>(std::move(p));
}

std::unique_ptr<Pattern> MakeLiteralPattern(std::string literal) {
  return std::unique_ptr<Pattern>(new LiteralPattern(std::move(literal)));
}

}  // namespace ek::tokenize
