#include "core/json_check.h"

#include <fmt/core.h>

namespace ek {

namespace {

class Checker {
 public:
  explicit Checker(std::string_view t) : t_(t) {}

  std::string Run() {
    SkipWs();
    if (!Value(0)) return Where();
    SkipWs();
    if (i_ != t_.size()) {
      err_ = "unexpected data after the JSON value";
      return Where();
    }
    return "";
  }

 private:
  std::string Where() const { return DescribeOffset(t_, i_) + ": " + err_; }
  void SkipWs() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      ++i_;
  }
  bool Fail(const char* what) {
    err_ = i_ >= t_.size() ? std::string("unexpected end of input (truncated?)") : what;
    return false;
  }
  bool Value(int depth) {
    if (depth > 512) return Fail("nesting too deep");
    if (i_ >= t_.size()) return Fail("expected a value");
    char c = t_[i_];
    if (c == '{') return Object(depth);
    if (c == '[') return Array(depth);
    if (c == '"') return String();
    if (c == '-' || (c >= '0' && c <= '9')) return Number();
    for (std::string_view lit : {"true", "false", "null"}) {
      if (t_.substr(i_, lit.size()) == lit) {
        i_ += lit.size();
        return true;
      }
    }
    return Fail("expected a value");
  }
  bool Object(int depth) {
    ++i_;
    SkipWs();
    if (i_ < t_.size() && t_[i_] == '}') return ++i_, true;
    while (true) {
      SkipWs();
      if (i_ >= t_.size() || t_[i_] != '"') return Fail("expected a string key");
      if (!String()) return false;
      SkipWs();
      if (i_ >= t_.size() || t_[i_] != ':') return Fail("expected ':'");
      ++i_;
      SkipWs();
      if (!Value(depth + 1)) return false;
      SkipWs();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == '}') return ++i_, true;
      return Fail("expected ',' or '}'");
    }
  }
  bool Array(int depth) {
    ++i_;
    SkipWs();
    if (i_ < t_.size() && t_[i_] == ']') return ++i_, true;
    while (true) {
      SkipWs();
      if (!Value(depth + 1)) return false;
      SkipWs();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ']') return ++i_, true;
      return Fail("expected ',' or ']'");
    }
  }
  bool String() {
    ++i_;
    while (i_ < t_.size()) {
      unsigned char c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return Fail("control character in string");
      if (c == '\\') {
        ++i_;
        if (i_ >= t_.size()) break;
        char e = t_[i_];
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (i_ + k >= t_.size() || !isxdigit(static_cast<unsigned char>(t_[i_ + k]))) {
              return Fail("bad \\u escape");
            }
          }
          i_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Fail("bad escape");
        }
      }
      ++i_;
    }
    return Fail("unterminated string");
  }
  bool Number() {
    size_t start = i_;
    if (t_[i_] == '-') ++i_;
    while (i_ < t_.size() && ((t_[i_] >= '0' && t_[i_] <= '9') || t_[i_] == '.' || t_[i_] == 'e' ||
                              t_[i_] == 'E' || t_[i_] == '+' || t_[i_] == '-'))
      ++i_;
    if (i_ == start || (i_ == start + 1 && t_[start] == '-')) return Fail("bad number");
    return true;
  }

  std::string_view t_;
  size_t i_ = 0;
  std::string err_;
};

}  // namespace

std::string LocateJsonError(std::string_view text) { return Checker(text).Run(); }

std::string DescribeOffset(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("line {}, column {} (byte {})", line, col, offset);
}

}  // namespace ek
