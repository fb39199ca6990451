// The lexer for Jinja chat templates, after jinja2 3.1's lexer.py with the
// environment transformers uses (trim_blocks=True, lstrip_blocks=True, loop
// controls, its {% generation %} tag):
//  - newlines are normalized to \n and one trailing newline is dropped
//    (keep_trailing_newline=False);
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
//    "-#}" all whitespace after it;
//  - lstrip_blocks: a block or comment tag preceded on its line only by
//    whitespace has that whitespace removed ("{%+" keeps it);
//  - trim_blocks: one newline right after a block or comment tag is removed
//    ("+%}" keeps it).
// Anything outside the supported subset is an error naming the construct and
// the line; nothing is silently rendered differently. parser.cc is the parser.
#include "template/lexer.h"

#include <fmt/core.h>

#include <cstring>

#include "core/parse.h"
#include "core/utf8.h"

namespace ek::tmpl {

namespace {

// ---------------------------------------------------------------------------------------
// Unicode helpers: Python's str.isspace and identifier rules for the ASCII range.

bool IsSpaceAscii(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's \s (Unicode whitespace) at s[i]; sets *len to the UTF-8 length.
bool IsPySpaceAt(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  *len = 1;
  if (c < 0x80) return IsSpaceAscii(static_cast<char>(c)) || (c >= 0x1c && c <= 0x1f);
  // Multi-byte whitespace: U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
  // U+3000.
  if (c == 0xC2 && i + 1 < s.size()) {
    unsigned char d = static_cast<unsigned char>(s[i + 1]);
    *len = 2;
    return d == 0x85 || d == 0xA0;
  }
  if (c == 0xE1 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x9A &&
      static_cast<unsigned char>(s[i + 2]) == 0x80) {
    *len = 3;
    return true;
  }
  if (c == 0xE2 && i + 2 < s.size()) {
    unsigned char d = static_cast<unsigned char>(s[i + 1]),
                  e = static_cast<unsigned char>(s[i + 2]);
    *len = 3;
    if (d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF)) return true;
    if (d == 0x81 && e == 0x9F) return true;
    return false;
  }
  if (c == 0xE3 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      static_cast<unsigned char>(s[i + 2]) == 0x80) {
    *len = 3;
    return true;
  }
  return false;
}

// Python's str.rstrip() with no argument.
std::string_view RStripPy(std::string_view s) {
  // Walk forward remembering where the trailing whitespace run starts.
  size_t keep = 0, i = 0;
  while (i < s.size()) {
    size_t len;
    bool space = IsPySpaceAt(s, i, &len);
    i += len;
    if (!space) keep = i;
  }
  return s.substr(0, keep);
}

// The length of the whitespace run (Python \s) at the start of s.
size_t LeadingPySpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len;
    if (!IsPySpaceAt(s, i, &len)) break;
    i += len;
  }
  return i;
}

bool AllPySpace(std::string_view s) { return !s.empty() && LeadingPySpace(s) == s.size(); }

// Python's unicode-escape decoding of a string literal's body (what jinja2 does with
// .encode("ascii", "backslashreplace").decode("unicode-escape")).
Result<std::string> Unescape(std::string_view s, int line, const std::string& name) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    auto hex = [&](size_t n) -> Result<uint32_t> {
      if (i + n >= s.size()) {
        return InvalidArgumentError(
            fmt::format("{}:{}: truncated \\{} escape in a string", name, line, s[i]));
      }
      auto v = ParseUint64(s.substr(i + 1, n), 16);
      if (!v) return InvalidArgumentError(fmt::format("{}:{}: bad escape in a string", name, line));
      i += n;
      return static_cast<uint32_t>(*v);
    };
    auto utf8 = [&](uint32_t cp) { AppendUtf8(&out, cp); };
    switch (c) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x': {
        EK_ASSIGN_OR_RETURN(uint32_t cp, hex(2));
        utf8(cp);
        break;
      }
      case 'u': {
        EK_ASSIGN_OR_RETURN(uint32_t cp, hex(4));
        utf8(cp);
        break;
      }
      case 'U': {
        EK_ASSIGN_OR_RETURN(uint32_t cp, hex(8));
        if (cp > 0x10FFFF)
          return InvalidArgumentError(fmt::format("{}:{}: \\U escape out of range", name, line));
        utf8(cp);
        break;
      }
      case 'N':
        return UnsupportedError(
            fmt::format("{}:{}: unsupported: \\N{{...}} escape in a string", name, line));
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            v = v * 8 + (s[++i] - '0');
          utf8(v);
        } else {
          out += '\\';  // Python keeps unknown escapes as they are
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, std::string name) : name_(std::move(name)) {
    // Normalize \r\n and \r to \n; drop one trailing newline.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  Result<std::vector<Token>> Run() {
    std::vector<Token> out;
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t tag = FindTag(pos);
      std::string_view text(src_.data() + pos,
                            (tag == std::string::npos ? src_.size() : tag) - pos);
      if (tag == std::string::npos) {
        Emit(&out, Tok::kData, std::string(text));
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : 0;
      if (sign != '-' && sign != '+') sign = 0;
      // Whitespace before the tag.
      if (sign == '-') {
        text = RStripPy(text);
      } else if (sign != '+' && kind != '{') {
        size_t l = text.rfind('\n');
        size_t l_pos = l == std::string_view::npos ? 0 : l + 1;
        if ((l_pos > 0 || line_starting) && AllPySpace(text.substr(l_pos)))
          text = text.substr(0, l_pos);
      }
      if (!text.empty()) Emit(&out, Tok::kData, std::string(text));
      line_ += CountNewlines(src_.substr(pos, tag - pos));
      pos = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        EK_ASSIGN_OR_RETURN(pos, SkipComment(pos, &line_starting));
        continue;
      }
      if (kind == '%' && IsRaw(pos)) {
        EK_ASSIGN_OR_RETURN(pos, LexRaw(pos, &out, &line_starting));
        continue;
      }
      Emit(&out, kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "");
      EK_ASSIGN_OR_RETURN(pos, LexTag(pos, kind == '{', &out, &line_starting));
    }
    Emit(&out, Tok::kEnd, "");
    return out;
  }

 private:
  static int CountNewlines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }
  void Emit(std::vector<Token>* out, Tok t, std::string v, Value lit = Value()) {
    out->push_back(Token{t, std::move(v), line_, std::move(lit)});
  }
  Status Err(std::string_view what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", name_, line_, what));
  }
  size_t FindTag(size_t pos) const {
    while (true) {
      size_t i = src_.find('{', pos);
      if (i == std::string::npos || i + 1 >= src_.size()) return std::string::npos;
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      pos = i + 1;
    }
  }
  // After a block/comment end: "+" keeps what follows, "-" strips all whitespace,
  // plain trims one newline (trim_blocks).
  size_t AfterEnd(size_t pos, char sign, bool is_var, bool* line_starting) {
    if (sign == '-') {
      size_t n = LeadingPySpace(std::string_view(src_).substr(pos));
      line_ += CountNewlines(std::string_view(src_).substr(pos, n));
      *line_starting = n > 0 && src_[pos + n - 1] == '\n';
      return pos + n;
    }
    if (sign == 0 && !is_var && pos < src_.size() && src_[pos] == '\n') {
      ++line_;
      *line_starting = true;
      return pos + 1;
    }
    *line_starting = false;
    return pos;
  }
  Result<size_t> SkipComment(size_t pos, bool* line_starting) {
    size_t end = src_.find("#}", pos);
    if (end == std::string::npos) return Err("missing end of comment tag");
    char sign = end > pos && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    line_ += CountNewlines(std::string_view(src_).substr(pos, end - pos));
    return AfterEnd(end + 2, sign, false, line_starting);
  }
  bool IsRaw(size_t pos) const {
    size_t i = pos;
    while (i < src_.size() && IsSpaceAscii(src_[i])) ++i;
    return src_.compare(i, 3, "raw") == 0 &&
           (i + 3 >= src_.size() ||
            !(std::isalnum(static_cast<unsigned char>(src_[i + 3])) || src_[i + 3] == '_'));
  }
  // {% raw %} ... {% endraw %}: the text in between, as it is.
  Result<size_t> LexRaw(size_t pos, std::vector<Token>* out, bool* line_starting) {
    size_t close = src_.find("%}", pos);
    if (close == std::string::npos) return Err("missing end of raw tag");
    char sign = src_[close - 1] == '-' ? '-' : 0;
    size_t body = AfterEnd(close + 2, sign, false, line_starting);
    size_t search = body;
    while (true) {
      size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) return Err("missing end of raw directive");
      size_t i = tag + 2;
      char bsign = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i++] : 0;
      while (i < src_.size() && IsSpaceAscii(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") == 0) {
        i += 6;
        while (i < src_.size() && IsSpaceAscii(src_[i])) ++i;
        char esign = 0;
        if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) esign = src_[i++];
        if (src_.compare(i, 2, "%}") != 0) return Err("bad endraw tag");
        std::string_view text(src_.data() + body, tag - body);
        if (bsign == '-') text = RStripPy(text);
        if (!text.empty()) Emit(out, Tok::kData, std::string(text));
        line_ += CountNewlines(std::string_view(src_).substr(body, i - body));
        return AfterEnd(i + 2, esign, false, line_starting);
      }
      search = tag + 2;
    }
  }
  Result<size_t> LexTag(size_t pos, bool is_var, std::vector<Token>* out, bool* line_starting) {
    std::vector<char> balance;
    static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*",
                                 "/",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                 ".",  ":",  ",",  "|",  "=",  "<",  ">", ";"};
    while (true) {
      if (pos >= src_.size())
        return Err(is_var ? "unexpected end of template: missing '}}'"
                          : "unexpected end of template: missing '%}'");
      // The end of the tag, when brackets are balanced.
      if (balance.empty()) {
        const char* end = is_var ? "}}" : "%}";
        for (char sign : {'-', '+', '\0'}) {
          if (sign == '+' && is_var) continue;
          size_t at = pos + (sign ? 1 : 0);
          if ((sign == 0 || src_[pos] == sign) && src_.compare(at, 2, end) == 0) {
            Emit(out, is_var ? Tok::kVarEnd : Tok::kBlockEnd, "");
            return AfterEnd(at + 2, sign, is_var, line_starting);
          }
        }
      }
      char c = src_[pos];
      if (IsSpaceAscii(c)) {
        if (c == '\n') ++line_;
        ++pos;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t i = pos + 1;
        while (i < src_.size() && src_[i] != c) {
          if (src_[i] == '\\') ++i;
          ++i;
        }
        if (i >= src_.size()) return Err("unterminated string");
        std::string_view body(src_.data() + pos + 1, i - pos - 1);
        EK_ASSIGN_OR_RETURN(std::string s, Unescape(body, line_, name_));
        Emit(out, Tok::kString, "", Value::String(std::move(s)));
        line_ += CountNewlines(body);
        pos = i + 1;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t i = pos;
        bool is_float = false;
        while (i < src_.size() &&
               (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_'))
          ++i;
        if (i + 1 < src_.size() && src_[i] == '.' &&
            std::isdigit(static_cast<unsigned char>(src_[i + 1]))) {
          is_float = true;
          ++i;
          while (i < src_.size() &&
                 (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_'))
            ++i;
        }
        if (i < src_.size() && (src_[i] == 'e' || src_[i] == 'E')) {
          size_t j = i + 1;
          if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) ++j;
          if (j < src_.size() && std::isdigit(static_cast<unsigned char>(src_[j]))) {
            is_float = true;
            i = j;
            while (i < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i]))) ++i;
          }
        }
        std::string digits;
        for (size_t k = pos; k < i; ++k) {
          if (src_[k] != '_') digits += src_[k];
        }
        if (is_float) {
          auto d = ParseDouble(digits);
          if (!d) return Err("bad number " + digits);
          Emit(out, Tok::kFloat, digits, Value::Float(*d));
        } else {
          auto v = ParseInt64(digits);
          if (!v) return Err("integer out of range " + digits);
          Emit(out, Tok::kInt, digits, Value::Int(*v));
        }
        pos = i;
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t i = pos;
        while (i < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_'))
          ++i;
        Emit(out, Tok::kName, src_.substr(pos, i - pos));
        pos = i;
        continue;
      }
      bool matched = false;
      for (const char* op : kOps) {
        size_t n = std::strlen(op);
        if (src_.compare(pos, n, op) == 0) {
          if (n == 1 && (c == '(' || c == '[' || c == '{'))
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
          if (n == 1 && (c == ')' || c == ']' || c == '}')) {
            if (balance.empty() || balance.back() != c)
              return Err(fmt::format("unexpected '{}'", c));
            balance.pop_back();
          }
          Emit(out, Tok::kOp, op);
          pos += n;
          matched = true;
          break;
        }
      }
      if (!matched) return Err(fmt::format("unexpected character '{}'", c));
    }
  }

  std::string src_;
  std::string name_;
  int line_ = 1;
};

}  // namespace

Result<std::vector<Token>> Lex(std::string_view source, const std::string& name) {
  Lexer lexer(source, name);
  return lexer.Run();
}

}  // namespace ek::tmpl
