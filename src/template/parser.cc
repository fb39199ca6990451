// Lexer and parser for Jinja chat templates, after jinja2 3.1's lexer.py and
// parser.py with the environment transformers uses (trim_blocks=True,
// lstrip_blocks=True, loop controls, its {% generation %} tag):
//  - newlines are normalized to \n and one trailing newline is dropped
//    (keep_trailing_newline=False);
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}",
//    "-#}" all whitespace after it;
//  - lstrip_blocks: a block or comment tag preceded on its line only by
//    whitespace has that whitespace removed ("{%+" keeps it);
//  - trim_blocks: one newline right after a block or comment tag is removed
//    ("+%}" keeps it).
// Anything outside the supported subset is an error naming the construct and
// the line; nothing is silently rendered differently.
#include "template/parser.h"

#include <fmt/core.h>

#include <cstring>

#include "core/parse.h"

namespace ek::tmpl {

namespace {

// ---------------------------------------------------------------------------------------
// Unicode helpers: Python's str.isspace and identifier rules for the ASCII range.

bool IsSpaceAscii(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's \s (Unicode whitespace) at s[i]; sets *len to the UTF-8 length.
bool IsPySpaceAt(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  *len = 1;
  if (c < 0x80) return IsSpaceAscii(static_cast<char>(c)) || (c >= 0x1c && c <= 0x1f);
  // Multi-byte whitespace: U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
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
    unsigned char d = static_cast<unsigned char>(s[i + 1]), e = static_cast<unsigned char>(s[i + 2]);
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

// ---------------------------------------------------------------------------------------
// Tokens.

enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };

struct Token {
  Tok type;
  std::string value;
  int line;
  Value literal;  // kString, kInt, kFloat
};

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
        return InvalidArgumentError(fmt::format("{}:{}: truncated \\{} escape in a string", name, line, s[i]));
      }
      auto v = ParseUint64(s.substr(i + 1, n), 16);
      if (!v) return InvalidArgumentError(fmt::format("{}:{}: bad escape in a string", name, line));
      i += n;
      return static_cast<uint32_t>(*v);
    };
    auto utf8 = [&](uint32_t cp) {
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
      }
    };
    switch (c) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': { EK_ASSIGN_OR_RETURN(uint32_t cp, hex(2)); utf8(cp); break; }
      case 'u': { EK_ASSIGN_OR_RETURN(uint32_t cp, hex(4)); utf8(cp); break; }
      case 'U': {
        EK_ASSIGN_OR_RETURN(uint32_t cp, hex(8));
        if (cp > 0x10FFFF) return InvalidArgumentError(fmt::format("{}:{}: \\U escape out of range", name, line));
        utf8(cp);
        break;
      }
      case 'N': return UnsupportedError(fmt::format("{}:{}: unsupported: \\N{{...}} escape in a string", name, line));
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) v = v * 8 + (s[++i] - '0');
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
      std::string_view text(src_.data() + pos, (tag == std::string::npos ? src_.size() : tag) - pos);
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
        if ((l_pos > 0 || line_starting) && AllPySpace(text.substr(l_pos))) text = text.substr(0, l_pos);
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
    return src_.compare(i, 3, "raw") == 0 && (i + 3 >= src_.size() || !(std::isalnum(static_cast<unsigned char>(src_[i + 3])) || src_[i + 3] == '_'));
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
    static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "[", "]", "(",
                                 ")", "{", "}", ".", ":", ",", "|", "=", "<", ">", ";"};
    while (true) {
      if (pos >= src_.size()) return Err(is_var ? "unexpected end of template: missing '}}'" : "unexpected end of template: missing '%}'");
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
        while (i < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
        if (i + 1 < src_.size() && src_[i] == '.' && std::isdigit(static_cast<unsigned char>(src_[i + 1]))) {
          is_float = true;
          ++i;
          while (i < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
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
        while (i < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
        Emit(out, Tok::kName, src_.substr(pos, i - pos));
        pos = i;
        continue;
      }
      bool matched = false;
      for (const char* op : kOps) {
        size_t n = std::strlen(op);
        if (src_.compare(pos, n, op) == 0) {
          if (n == 1 && (c == '(' || c == '[' || c == '{')) balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
          if (n == 1 && (c == ')' || c == ']' || c == '}')) {
            if (balance.empty() || balance.back() != c) return Err(fmt::format("unexpected '{}'", c));
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

// ---------------------------------------------------------------------------------------
// Parser.

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string name) : t_(std::move(tokens)), name_(std::move(name)) {}

  Result<Body> Template() {
    Body body;
    std::string stop;
    EK_RETURN_IF_ERROR(Statements(&body, {}, &stop));
    if (!stop.empty()) return Err(fmt::format("unexpected '{}'", stop));
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  Status Err(std::string_view what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", name_, Cur().line, what));
  }
  Status Unsupported(std::string_view what) const {
    return UnsupportedError(fmt::format("{}:{}: unsupported: {}", name_, Cur().line, what));
  }

  // Nesting is bounded: blocks, brackets and chains of operators, attributes
  // and filters each add a level to the tree, and rendering and freeing it
  // recurse per level (100,000 '(' overflowed the stack: fuzz/README.md).
  // jinja2 stops far earlier, at Python's recursion limit (about 80 nested
  // parentheses). A DepthScope restores the depth when the function returns.
  static constexpr int kMaxDepth = 256;
  struct DepthScope {
    explicit DepthScope(int* depth) : depth_(depth), saved_(*depth) {}
    ~DepthScope() { *depth_ = saved_; }
    int* depth_;
    int saved_;
  };
  Status Deeper() {
    if (++depth_ > kMaxDepth) return Err(fmt::format("nested deeper than {} levels", kMaxDepth));
    return Status::Ok();
  }
  bool IsOp(std::string_view op) const { return Cur().type == Tok::kOp && Cur().value == op; }
  bool IsName(std::string_view n) const { return Cur().type == Tok::kName && Cur().value == n; }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return Err(fmt::format("expected '{}'", op));
    Next();
    return Status::Ok();
  }
  Status ExpectName(std::string_view n) {
    if (!IsName(n)) return Err(fmt::format("expected '{}'", n));
    Next();
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Err("expected the end of the statement '%}'");
    Next();
    return Status::Ok();
  }
  Result<std::string> Identifier() {
    if (Cur().type != Tok::kName) return Err("expected a name");
    std::string n = Cur().value;
    Next();
    return n;
  }

  // Parses statements until a block tag whose keyword is in `stops`; that keyword goes to *stop
  // (the tag's begin and keyword consumed, the rest of the tag left).
  Status Statements(Body* body, const std::vector<std::string_view>& stops, std::string* stop) {
    stop->clear();
    while (true) {
      const Token& tok = Cur();
      switch (tok.type) {
        case Tok::kEnd:
          if (!stops.empty()) return Err(fmt::format("unexpected end of template: missing '{}'", stops.back()));
          return Status::Ok();
        case Tok::kData: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kText;
          s->line = tok.line;
          s->text = tok.value;
          body->push_back(std::move(s));
          Next();
          break;
        }
        case Tok::kVarBegin: {
          int line = tok.line;
          Next();
          EK_ASSIGN_OR_RETURN(ExprPtr e, TupleExpr());
          if (Cur().type != Tok::kVarEnd) return Err("expected '}}'");
          Next();
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kPrint;
          s->line = line;
          s->expr = std::move(e);
          body->push_back(std::move(s));
          break;
        }
        case Tok::kBlockBegin: {
          Next();
          if (Cur().type != Tok::kName) return Err("expected a statement keyword");
          std::string kw = Cur().value;
          for (auto s : stops) {
            if (kw == s) {
              Next();
              *stop = kw;
              return Status::Ok();
            }
          }
          EK_ASSIGN_OR_RETURN(StmtPtr s, Statement());
          body->push_back(std::move(s));
          break;
        }
        default: return Err("unexpected token");
      }
    }
  }

  Result<StmtPtr> Statement() {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    std::string kw = Cur().value;
    int line = Cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    Next();
    if (kw == "if") {
      s->kind = Stmt::Kind::kIf;
      EK_ASSIGN_OR_RETURN(ExprPtr cond, TupleExpr());
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      while (true) {
        Body b;
        std::string stop;
        EK_RETURN_IF_ERROR(Statements(&b, {"elif", "else", "endif"}, &stop));
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (stop == "endif") break;
        if (stop == "else") {
          EK_RETURN_IF_ERROR(ExpectBlockEnd());
          Body eb;
          EK_RETURN_IF_ERROR(Statements(&eb, {"endif"}, &stop));
          s->branches.emplace_back(nullptr, std::move(eb));
          break;
        }
        EK_ASSIGN_OR_RETURN(cond, TupleExpr());
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "for") {
      s->kind = Stmt::Kind::kFor;
      do {
        EK_ASSIGN_OR_RETURN(std::string n, Identifier());
        s->targets.push_back(std::move(n));
        if (!IsOp(",")) break;
        Next();
      } while (true);
      EK_RETURN_IF_ERROR(ExpectName("in"));
      EK_ASSIGN_OR_RETURN(s->expr, TupleExpr(/*no_cond=*/true));
      if (IsName("if")) {
        Next();
        EK_ASSIGN_OR_RETURN(s->filter, Expression(true));
      }
      if (IsName("recursive")) return Unsupported("recursive for loops");
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"else", "endfor"}, &stop));
      if (stop == "else") {
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
        EK_RETURN_IF_ERROR(Statements(&s->else_body, {"endfor"}, &stop));
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "set") {
      EK_ASSIGN_OR_RETURN(std::string n, Identifier());
      if (IsOp(".")) {
        Next();
        EK_ASSIGN_OR_RETURN(s->attr, Identifier());
      }
      s->targets.push_back(n);
      while (s->attr.empty() && IsOp(",")) {
        Next();
        EK_ASSIGN_OR_RETURN(std::string more, Identifier());
        s->targets.push_back(std::move(more));
      }
      if (IsOp("=")) {
        Next();
        s->kind = Stmt::Kind::kSet;
        EK_ASSIGN_OR_RETURN(s->expr, TupleExpr());
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      if (!s->attr.empty() || s->targets.size() != 1) return Err("expected '=' in set");
      s->kind = Stmt::Kind::kSetBlock;
      while (IsOp("|")) {
        Next();
        EK_ASSIGN_OR_RETURN(ExprPtr f, FilterCall(nullptr));
        s->filters.push_back(std::move(f));
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endset"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "macro") {
      s->kind = Stmt::Kind::kMacro;
      EK_ASSIGN_OR_RETURN(s->name, Identifier());
      EK_RETURN_IF_ERROR(Expect("("));
      while (!IsOp(")")) {
        EK_ASSIGN_OR_RETURN(std::string p, Identifier());
        s->params.push_back(std::move(p));
        if (IsOp("=")) {
          Next();
          EK_ASSIGN_OR_RETURN(ExprPtr d, Expression());
          s->defaults.push_back(std::move(d));
        } else if (!s->defaults.empty()) {
          return Err("non-default macro argument follows a default one");
        }
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect(")"));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endmacro"}, &stop));
      if (Cur().type == Tok::kName) Next();  // {% endmacro name %}
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      do {
        EK_ASSIGN_OR_RETURN(ExprPtr f, FilterCall(nullptr));
        s->filters.push_back(std::move(f));
        if (!IsOp("|")) break;
        Next();
      } while (true);
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endfilter"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "generation") {
      s->kind = Stmt::Kind::kGeneration;
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endgeneration"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    --i_;  // name the keyword's line
    return Unsupported(fmt::format("the '{}' statement", kw));
  }

  // ---------------------------------------------------------------------------------
  // Expressions (precedence as in jinja2's parser).

  ExprPtr Node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // A bare tuple ("a, b") or one expression.
  Result<ExprPtr> TupleExpr(bool no_cond = false) {
    int line = Cur().line;
    EK_ASSIGN_OR_RETURN(ExprPtr first, Expression(!no_cond));
    if (!IsOp(",")) return first;
    auto t = Node(Expr::Kind::kTuple, line);
    t->items.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsName("in") || IsOp(")") || IsOp("=")) break;
      EK_ASSIGN_OR_RETURN(ExprPtr e, Expression(!no_cond));
      t->items.push_back(std::move(e));
    }
    return t;
  }

  Result<ExprPtr> Expression(bool with_cond = true) {
    EK_ASSIGN_OR_RETURN(ExprPtr e, Or());
    if (!with_cond) return e;
    DepthScope scope(&depth_);
    while (IsName("if")) {
      EK_RETURN_IF_ERROR(Deeper());
      int line = Cur().line;
      Next();
      auto c = Node(Expr::Kind::kCond, line);
      EK_ASSIGN_OR_RETURN(c->a, Or());
      c->b = std::move(e);
      if (IsName("else")) {
        Next();
        EK_ASSIGN_OR_RETURN(c->c, Expression());
      }
      e = std::move(c);
    }
    return e;
  }

  Result<ExprPtr> Or() {
    EK_ASSIGN_OR_RETURN(ExprPtr l, And());
    DepthScope scope(&depth_);
    while (IsName("or")) {
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(Expr::Kind::kOr, Cur().line);
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, And());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> And() {
    EK_ASSIGN_OR_RETURN(ExprPtr l, Not());
    DepthScope scope(&depth_);
    while (IsName("and")) {
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(Expr::Kind::kAnd, Cur().line);
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, Not());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> Not() {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    if (IsName("not")) {
      auto n = Node(Expr::Kind::kNot, Cur().line);
      Next();
      EK_ASSIGN_OR_RETURN(n->a, Not());
      return n;
    }
    return Compare();
  }
  Result<ExprPtr> Compare() {
    int line = Cur().line;
    EK_ASSIGN_OR_RETURN(ExprPtr first, Math1());
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp && (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" ||
                                    Cur().value == ">" || Cur().value == "<=" || Cur().value == ">=")) {
        op = Cur().value;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().value == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Node(Expr::Kind::kCompare, line);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      EK_ASSIGN_OR_RETURN(ExprPtr r, Math1());
      cmp->items.push_back(std::move(r));
    }
    if (cmp) return ExprPtr(std::move(cmp));
    return first;
  }
  Result<ExprPtr> Binary(Result<ExprPtr> (Parser::*next)(), std::initializer_list<std::string_view> ops,
                         Expr::Kind kind = Expr::Kind::kBinary) {
    EK_ASSIGN_OR_RETURN(ExprPtr l, (this->*next)());
    DepthScope scope(&depth_);
    while (Cur().type == Tok::kOp) {
      bool hit = false;
      for (auto op : ops) hit = hit || Cur().value == op;
      if (!hit) break;
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(kind, Cur().line);
      n->name = Cur().value;
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, (this->*next)());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> Math1() { return Binary(&Parser::Concat, {"+", "-"}); }
  Result<ExprPtr> Concat() { return Binary(&Parser::Math2, {"~"}, Expr::Kind::kConcat); }
  Result<ExprPtr> Math2() { return Binary(&Parser::Pow, {"*", "/", "//", "%"}); }
  Result<ExprPtr> Pow() { return Binary(&Parser::UnaryWithFilters, {"**"}); }
  Result<ExprPtr> UnaryWithFilters() { return Unary(true); }

  Result<ExprPtr> Unary(bool with_filter) {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto n = Node(Expr::Kind::kUnary, Cur().line);
      n->name = Cur().value;
      Next();
      EK_ASSIGN_OR_RETURN(n->a, Unary(false));
      node = std::move(n);
    } else {
      EK_ASSIGN_OR_RETURN(node, Primary());
    }
    EK_ASSIGN_OR_RETURN(node, Postfix(std::move(node)));
    if (with_filter) {
      EK_ASSIGN_OR_RETURN(node, FilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> Primary() {
    const Token& tok = Cur();
    int line = tok.line;
    if (tok.type == Tok::kName) {
      std::string n = tok.value;
      Next();
      auto e = Node(Expr::Kind::kConst, line);
      if (n == "true" || n == "True") {
        e->value = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        e->value = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = n;
      }
      return e;
    }
    if (tok.type == Tok::kString) {
      std::string s = tok.literal.str();
      Next();
      while (Cur().type == Tok::kString) {  // adjacent literals concatenate
        s += Cur().literal.str();
        Next();
      }
      auto e = Node(Expr::Kind::kConst, line);
      e->value = Value::String(std::move(s));
      return e;
    }
    if (tok.type == Tok::kInt || tok.type == Tok::kFloat) {
      auto e = Node(Expr::Kind::kConst, line);
      e->value = tok.literal;
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return Node(Expr::Kind::kTuple, line);
      }
      EK_ASSIGN_OR_RETURN(ExprPtr e, TupleExpr());
      EK_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      auto l = Node(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        EK_ASSIGN_OR_RETURN(ExprPtr e, Expression());
        l->items.push_back(std::move(e));
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect("]"));
      return l;
    }
    if (IsOp("{")) {
      Next();
      auto d = Node(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        EK_ASSIGN_OR_RETURN(ExprPtr k, Expression());
        EK_RETURN_IF_ERROR(Expect(":"));
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        d->items.push_back(std::move(k));
        d->values.push_back(std::move(v));
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect("}"));
      return d;
    }
    if (tok.type == Tok::kVarEnd || tok.type == Tok::kBlockEnd || tok.type == Tok::kEnd) {
      return Err("unexpected end of an expression");
    }
    return Err(fmt::format("unexpected '{}'", tok.value));
  }

  Result<ExprPtr> Postfix(ExprPtr node) {
    DepthScope scope(&depth_);
    while (true) {
      if (IsOp(".") || IsOp("[") || IsOp("(")) EK_RETURN_IF_ERROR(Deeper());
      if (IsOp(".")) {
        int line = Cur().line;
        Next();
        if (Cur().type == Tok::kName) {
          auto g = Node(Expr::Kind::kGetattr, line);
          g->a = std::move(node);
          g->name = Cur().value;
          Next();
          node = std::move(g);
        } else if (Cur().type == Tok::kInt) {
          auto g = Node(Expr::Kind::kGetitem, line);
          g->a = std::move(node);
          g->b = Node(Expr::Kind::kConst, line);
          g->b->value = Cur().literal;
          Next();
          node = std::move(g);
        } else {
          return Err("expected a name after '.'");
        }
      } else if (IsOp("[")) {
        EK_ASSIGN_OR_RETURN(node, Subscript(std::move(node)));
      } else if (IsOp("(")) {
        EK_ASSIGN_OR_RETURN(node, Call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> Subscript(ExprPtr obj) {
    int line = Cur().line;
    Next();  // [
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!IsOp(":")) {
      EK_ASSIGN_OR_RETURN(start, Expression());
    }
    if (IsOp(":")) {
      is_slice = true;
      Next();
      if (!IsOp(":") && !IsOp("]")) {
        EK_ASSIGN_OR_RETURN(stop, Expression());
      }
      if (IsOp(":")) {
        Next();
        if (!IsOp("]")) {
          EK_ASSIGN_OR_RETURN(step, Expression());
        }
      }
    }
    if (IsOp(",")) return Unsupported("tuple subscripts");
    EK_RETURN_IF_ERROR(Expect("]"));
    auto e = Node(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetitem, line);
    e->a = std::move(obj);
    if (is_slice) {
      e->b = std::move(start);
      e->c = std::move(stop);
      e->items.push_back(std::move(step));
    } else {
      e->b = std::move(start);
    }
    return e;
  }

  Status Args(Expr* call) {
    EK_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) return Unsupported("*args and **kwargs in calls");
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().value == "=") {
        std::string k = Cur().value;
        Next();
        Next();
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        call->kwargs.emplace_back(std::move(k), std::move(v));
      } else {
        if (!call->kwargs.empty()) return Err("positional argument follows keyword argument");
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        call->items.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(")");
  }

  Result<ExprPtr> Call(ExprPtr fn) {
    auto c = Node(Expr::Kind::kCall, Cur().line);
    c->a = std::move(fn);
    EK_RETURN_IF_ERROR(Args(c.get()));
    return c;
  }

  // name[.name][(args)] after '|' ; `operand` may be null (filter blocks).
  Result<ExprPtr> FilterCall(ExprPtr operand) {
    auto f = Node(Expr::Kind::kFilter, Cur().line);
    EK_ASSIGN_OR_RETURN(f->name, Identifier());
    while (IsOp(".")) {
      Next();
      EK_ASSIGN_OR_RETURN(std::string more, Identifier());
      f->name += "." + more;
    }
    f->a = std::move(operand);
    if (IsOp("(")) EK_RETURN_IF_ERROR(Args(f.get()));
    return f;
  }

  Result<ExprPtr> FilterExpr(ExprPtr node) {
    DepthScope scope(&depth_);
    while (true) {
      if (IsOp("|") || IsName("is") || IsOp("(")) EK_RETURN_IF_ERROR(Deeper());
      if (IsOp("|")) {
        Next();
        EK_ASSIGN_OR_RETURN(node, FilterCall(std::move(node)));
      } else if (IsName("is")) {
        int line = Cur().line;
        Next();
        auto t = Node(Expr::Kind::kTest, line);
        if (IsName("not")) {
          t->negate = true;
          Next();
        }
        EK_ASSIGN_OR_RETURN(t->name, Identifier());
        while (IsOp(".")) {
          Next();
          EK_ASSIGN_OR_RETURN(std::string more, Identifier());
          t->name += "." + more;
        }
        t->a = std::move(node);
        if (IsOp("(")) {
          EK_RETURN_IF_ERROR(Args(t.get()));
        } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                    Cur().type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
                   !(IsName("else") || IsName("or") || IsName("and") || IsName("if") || IsName("in") ||
                     IsName("is") || IsName("not"))) {
          EK_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
          EK_ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
          t->items.push_back(std::move(arg));
        }
        node = std::move(t);
      } else if (IsOp("(")) {
        EK_ASSIGN_OR_RETURN(node, Call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  std::string name_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Body> ParseTemplate(std::string_view source, const std::string& name) {
  Lexer lexer(source, name);
  EK_ASSIGN_OR_RETURN(std::vector<Token> tokens, lexer.Run());
  Parser parser(std::move(tokens), name);
  return parser.Template();
}

}  // namespace ek::tmpl
