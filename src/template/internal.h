// Shared between the interpreter (render.cc) and the builtins (builtins.cc).
// Errors from these functions carry no template location; the interpreter
// adds "NAME:LINE: " where it calls them.
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "core/status.h"
#include "template/value.h"

namespace ek::tmpl {

// Bounds on what one render may build, so that a hostile template is an error
// instead of an exhausted memory ('a' * 2**20 * 2**20, 'x'|center(10**11) and
// the like, found by fuzz/fuzz_template). Far above what any chat template
// needs (a long conversation renders to well under 1 MB), and low enough that
// reaching a bound costs seconds, not minutes (repr of 16 MiB: ~3 s under ASan).
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;  // any string, the output included
inline constexpr size_t kMaxListItems = size_t{1} << 22;
inline constexpr int64_t kMaxLoopIterations = 1'000'000;  // for-loop bodies run, per render
inline constexpr int kMaxValueDepth = 512;                // lists, dicts, namespaces nested
inline Status TooLarge(size_t n, std::string_view what) {
  return InvalidArgumentError(fmt::format("{} too large: {} (the limit is {})", what, n,
                                          what == "string" ? kMaxStringBytes : kMaxListItems));
}

// jinja2's sandboxed getattr (obj.name) and getitem (obj[key]) as transformers
// sees them: a dict's methods shadow its keys for '.', a missing key or index
// on a defined object is Undefined, any access on Undefined is an error.
Result<Value> GetAttr(const Value& obj, std::string_view name);
Result<Value> GetItem(const Value& obj, const Value& key);
// A dotted attribute path as filters take it ("a.b", "0.name").
Result<Value> GetAttrPath(const Value& obj, std::string_view path);

// What `for x in v` iterates: a list's items, a dict's keys, a string's
// characters, nothing for Undefined; anything else is an error.
Result<std::shared_ptr<const List>> Iterate(const Value& v);

// obj.name(args) for str, list, dict and loop methods. *found is false when
// `obj` has no such method (the caller then looks the attribute up instead).
Result<Value> CallMethod(const Value& obj, std::string_view name, CallArgs& args, bool* found);

// Filters, tests and globals by name. Known* tell the parser-time check which
// names exist; an unimplemented one is reported as unsupported.
bool KnownFilter(std::string_view name);
bool KnownTest(std::string_view name);
Result<Value> CallFilter(std::string_view name, const Value& operand, CallArgs& args);
// A filter's implementation by name (nullptr when unknown), for the parse-time check to keep.
using FilterFn = Result<Value> (*)(const Value&, CallArgs&);
FilterFn FindFilter(std::string_view name);
Result<bool> CallTest(std::string_view name, const Value& v, CallArgs& args);
// The global `name`, or nullptr.
const Value* FindGlobal(std::string_view name);

// Printing a generator or a range: Python prints an object address or
// "range(a, b)"; evenkeel refuses both rather than print something else.
Status CheckPrintable(const Value& v);

// Python's len() (code points for str); an error for types without one.
Result<int64_t> Length(const Value& v);

}  // namespace ek::tmpl
