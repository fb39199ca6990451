// Python's str semantics on UTF-8 text, for the template engine: whitespace
// (str.isspace), strip/split/splitlines, case mappings, repr escaping.
// Strings are valid UTF-8 (records and templates are checked on entry);
// offsets are bytes, counts are code points as Python counts them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/utf8.h"

namespace ek::tmpl {

// The UTF-8 codec is core's (core/utf8.h): DecodeUtf8At decodes the code point
// at s[i], *len getting its length; AppendUtf8 encodes one.
using ::ek::AppendUtf8;
using ::ek::DecodeUtf8At;

// str.isspace() of one code point.
bool IsPySpace(uint32_t cp);
// If s[i] starts a whitespace code point, its byte length; else 0.
size_t PySpaceLen(std::string_view s, size_t i);

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
std::string_view PyStrip(std::string_view s, const std::optional<std::string_view>& chars,
                         bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; sep == nullopt splits on whitespace runs.
// An empty sep is an error (Python's ValueError).
Result<std::vector<std::string>> PySplit(std::string_view s,
                                         const std::optional<std::string_view>& sep,
                                         int64_t maxsplit, bool from_right);
// str.splitlines(keepends).
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
// str.replace(old, new, count) (count < 0: all), with Python's empty-`old` rule.
std::string PyReplace(std::string_view s, std::string_view old_s, std::string_view new_s,
                      int64_t count);
// str.find / str.rfind: code-point index or -1.
int64_t PyFind(std::string_view s, std::string_view sub, bool from_right);
// str.count(sub).
int64_t PyCount(std::string_view s, std::string_view sub);

// Case mappings as Python's str methods. A code point whose full mapping Python
// takes from SpecialCasing (ß -> SS, İ -> i̇, final sigma, ...) is refused
// rather than mapped differently.
enum class CaseOp { kUpper, kLower, kTitle, kCapitalize, kSwapcase };
Result<std::string> PyCase(std::string_view s, CaseOp op);
// jinja2's |title filter: the first letter of each word (words begin after
// '-', whitespace, '(', '{', '[', '<') upper-cased, the rest lower-cased.
Result<std::string> JinjaTitle(std::string_view s);
// str.isdigit / isalpha / isalnum / isspace / isupper / islower / isnumeric / isdecimal.
bool PyIsClass(std::string_view s, std::string_view method);

// Python's repr() of a str, escaping as Python does (non-printable code points
// as \xhh, \uhhhh, \Uhhhhhhhh).
std::string PyStrRepr(std::string_view s);

}  // namespace ek::tmpl
