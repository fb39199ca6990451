#include "run/toml_hazards.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>

namespace ek::run {

Status CheckTomlppHazards(std::string_view t, const std::string& name) {
  int line = 1;
  auto refuse = [&](std::string_view where) {
    return InvalidArgumentError(
        fmt::format("{}: line {}: a non-ASCII character {}", name, line, where));
  };
  size_t i = t.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a UTF-8 byte order mark
  char prev = '\n';  // the last character outside strings that was not a space
  // Where a quote may open a string depends on whether a key or a value comes
  // next: a dot opens one only inside a key, an = only as the pair's one
  // separator. `open` holds the brackets of values (and of a table header).
  bool key = true;
  bool bare = false;  // inside a bare value (a number, a date, junk) up to its terminator
  std::string open;
  while (i < t.size()) {
    char c = t[i];
    // A value that is not a string, array or inline table: toml++ tests every character of
    // it with is_value_terminator (whitespace first) up to whitespace ] } , or #, whatever it
    // holds (quotes, brackets, dots and = included).
    const bool ends_bare = std::string_view(" \t\r\n]},#").find(c) != std::string_view::npos;
    if (!bare && !key && !ends_bare &&
        std::string_view("=[,\n").find(prev) != std::string_view::npos && c != '"' && c != '\'' &&
        c != '[' && c != '{') {
      bare = true;
    }
    if (bare && !ends_bare) {
      if (static_cast<unsigned char>(c) >= 0x80) return refuse("outside a string or comment");
      prev = 'x';
      ++i;
      continue;
    }
    bare = false;
    const char top = open.empty() ? '\0' : open.back();
    if (c == '\n') {
      if (open.empty() || top == 'h') key = true, open.clear();
    } else if (c == '=') {
      if (!key) c = 'x';  // a second =, or one inside a value: not a separator
      key = false;
    } else if (c == '.') {
      if (!key) c = 'x';  // a number's point
    } else if (c == '[') {
      open.push_back((open.empty() && key) || (top == 'h' && prev == '[') ? 'h' : '[');  // [[x]]
      if (open.back() == '[') key = false;
    } else if (c == '{') {
      open.push_back('{');
      key = true;
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
      key = false;
    } else if (c == ',') {
      key = top == '{';
    }
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    } else if (c == '#') {
      while (i < t.size() && t[i] != '\n') ++i;
      continue;
    } else if ((c == '"' || c == '\'') &&
               std::string_view("\n=[{,.").find(prev) != std::string_view::npos) {
      bool multi = i + 2 < t.size() && t[i + 1] == c && t[i + 2] == c;
      i += multi ? 3 : 1;
      while (i < t.size()) {
        if (t[i] == '\n') {
          if (!multi) break;  // an unterminated string: toml++ reports it
          ++line;
        }
        if (c == '"' && t[i] == '\\') {
          size_t j = i + 1;
          if (j < t.size() && static_cast<unsigned char>(t[j]) >= 0x80) {
            return refuse(
                "after a backslash in a string (not an escape)");  // toml++ tests it for whitespace
          }
          while (multi && j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
          if (j > i + 1 && j < t.size() && static_cast<unsigned char>(t[j]) >= 0x80) {
            // "\ <non-ASCII>": toml++ skips the spaces as a line-ending backslash's and
            // tests what follows for whitespace.
            return refuse("after a backslash in a string (not an escape)");
          }
          if (multi && j < t.size() && (t[j] == '\n' || t[j] == '\r')) {
            // A line-ending backslash: toml++ trims what follows as whitespace.
            while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r' || t[j] == '\n')) {
              if (t[j] == '\n') ++line;
              ++j;
            }
            if (j < t.size() && static_cast<unsigned char>(t[j]) >= 0x80) {
              return refuse(R"(after a line-ending backslash in a """ string (not supported))");
            }
            i = j;
          } else {
            i += 2;  // an escape: \" does not end the string
          }
          continue;
        }
        if (t[i] == c) {
          size_t run = 1;
          while (i + run < t.size() && t[i + run] == c) ++run;
          if (!multi) {
            ++i;
            break;
          }
          if (run >= 3) {  // """ ends it; up to two more quotes before it are content
            i += std::min<size_t>(run, 5);
            break;
          }
          i += run;
          continue;
        }
        ++i;
      }
      c = '"';
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return refuse("outside a string or comment");
    } else {
      ++i;
    }
    prev = c;
  }
  return Status::Ok();
}

}  // namespace ek::run
