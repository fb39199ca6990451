// Shared by the files of the builtins (builtins*.cc) and nothing else: argument
// helpers, the methods the filters reuse, and each filter, test and global, which
// the registry in builtins.cc binds to its name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "template/value.h"

namespace ek::tmpl::builtin {

// Arguments (builtins.cc). Each error names the function `fn` and the argument.
Status Undef(const Value& v);
bool IsInt(const Value& v);
Result<std::string_view> StrArg(const CallArgs& a, size_t i, std::string_view name,
                                std::string_view fn);
// An optional str argument that may be None.
Result<std::optional<std::string_view>> OptStr(const CallArgs& a, size_t i, std::string_view name,
                                               std::string_view fn);
Result<int64_t> IntArg(const CallArgs& a, size_t i, std::string_view name, int64_t dflt,
                       std::string_view fn);
bool BoolArg(const CallArgs& a, size_t i, std::string_view name, bool dflt);
Value Str(std::string s);
// Whether replacing every `old_s` in `s` by `new_s` stays under kMaxStringBytes.
Status CheckReplace(std::string_view s, std::string_view old_s, std::string_view new_s);
Value StrList(std::vector<std::string> parts);
Value StrTuple(std::vector<std::string> parts);
// A string's code points, each as its own UTF-8 string.
std::vector<std::string> Chars(std::string_view s);

// Methods (builtins_methods.cc).
bool IsStrMethod(std::string_view n);
bool IsDictMethod(std::string_view n);
bool IsListMethod(std::string_view n);
// The (key, value) tuples of a dict, as dict.items() yields them.
List Pairs(const Dict& d);
Result<Value> StrMethod(const std::string& s, std::string_view n, CallArgs& a);
// obj.name as a callable that calls the method.
Value BoundMethod(const Value& obj, std::string_view name);

// Filters (builtins_filters.cc), one per jinja2 filter; aliases share one.
Result<Value> FLength(const Value& v, CallArgs&);
Result<Value> FString(const Value& v, CallArgs&);
Result<Value> FList(const Value& v, CallArgs&);
Result<Value> FItems(const Value& v, CallArgs&);
Result<Value> FFirst(const Value& v, CallArgs&);
Result<Value> FLast(const Value& v, CallArgs&);
Result<Value> FReverse(const Value& v, CallArgs&);
Result<Value> FDefault(const Value& v, CallArgs& a);
Result<Value> FTrim(const Value& v, CallArgs& a);
Result<Value> FReplace(const Value& v, CallArgs& a);
Result<Value> FUpper(const Value& v, CallArgs&);
Result<Value> FLower(const Value& v, CallArgs&);
Result<Value> FCapitalize(const Value& v, CallArgs&);
Result<Value> FTitle(const Value& v, CallArgs&);
Result<Value> FTojson(const Value& v, CallArgs& a);
Result<Value> FJoin(const Value& v, CallArgs& a);
Result<Value> FInt(const Value& v, CallArgs& a);
Result<Value> FFloat(const Value& v, CallArgs& a);
Result<Value> FAbs(const Value& v, CallArgs&);
Result<Value> FRound(const Value& v, CallArgs& a);
Result<Value> FIndent(const Value& v, CallArgs& a);
Result<Value> FEscape(const Value& v, CallArgs&);
Result<Value> FSafe(const Value& v, CallArgs&);
Result<Value> FAttr(const Value& v, CallArgs& a);
Result<Value> FSort(const Value& v, CallArgs& a);
Result<Value> FDictsort(const Value& v, CallArgs& a);
Result<Value> FUnique(const Value& v, CallArgs& a);
Result<Value> FMin(const Value& v, CallArgs& a);
Result<Value> FMax(const Value& v, CallArgs& a);
Result<Value> FSum(const Value& v, CallArgs& a);
Result<Value> FMap(const Value& v, CallArgs& a);
Result<Value> FSelect(const Value& v, CallArgs& a);
Result<Value> FReject(const Value& v, CallArgs& a);
Result<Value> FSelectattr(const Value& v, CallArgs& a);
Result<Value> FRejectattr(const Value& v, CallArgs& a);
Result<Value> FCenter(const Value& v, CallArgs& a);
Result<Value> FWordcount(const Value& v, CallArgs&);

// Tests (builtins_tests.cc): `v is n(a)`.
Result<bool> Test(std::string_view n, const Value& v, CallArgs& a);

// Globals (builtins_globals.cc).
Result<Value> GRange(CallArgs& a);
Result<Value> GDict(CallArgs& a);
Result<Value> GNamespace(CallArgs& a);
Result<Value> GRaise(CallArgs& a);
Result<Value> GStrftimeNow(CallArgs& a);
Result<Value> GUnsupported(std::string_view name);

}  // namespace ek::tmpl::builtin
