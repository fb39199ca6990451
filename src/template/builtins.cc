// Attribute access, methods, filters, tests and globals, each as jinja2 3.1
// (and transformers' overrides of tojson, dict, namespace, raise_exception and
// strftime_now) define them. Anything a chat template could name that is not
// here is refused at parse time (filters, tests) or when called (methods,
// globals), never rendered differently. This file holds the argument helpers,
// iteration and the registry that binds each name; the methods, filters, tests
// and globals themselves are in builtins_{methods,filters,tests,globals}.cc.
#include <fmt/core.h>

#include <algorithm>
#include <unordered_map>

#include "template/builtins_internal.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl {

namespace builtin {

Status Undef(const Value& v) {
  return InvalidArgumentError(
      fmt::format("'{}' is undefined", v.name().empty() ? "value" : v.name()));
}

bool IsInt(const Value& v) {
  return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

Result<std::string_view> StrArg(const CallArgs& a, size_t i, std::string_view name,
                                std::string_view fn) {
  const Value* v = a.Get(i, name);
  if (!v || !v->is_string()) {
    return InvalidArgumentError(fmt::format("{}: argument '{}' must be a string", fn, name));
  }
  return std::string_view(v->str());
}

// An optional str argument that may be None.
Result<std::optional<std::string_view>> OptStr(const CallArgs& a, size_t i, std::string_view name,
                                               std::string_view fn) {
  const Value* v = a.Get(i, name);
  if (!v || v->is_none() || v->is_undefined()) return std::optional<std::string_view>();
  if (!v->is_string())
    return InvalidArgumentError(fmt::format("{}: argument '{}' must be str or None", fn, name));
  return std::optional<std::string_view>(v->str());
}

Result<int64_t> IntArg(const CallArgs& a, size_t i, std::string_view name, int64_t dflt,
                       std::string_view fn) {
  const Value* v = a.Get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!IsInt(*v))
    return InvalidArgumentError(fmt::format("{}: argument '{}' must be an integer", fn, name));
  return v->integer();
}

bool BoolArg(const CallArgs& a, size_t i, std::string_view name, bool dflt) {
  const Value* v = a.Get(i, name);
  return v ? v->Truthy() : dflt;
}

Value Str(std::string s) { return Value::String(std::move(s)); }

// Whether replacing every `old_s` in `s` by `new_s` stays under kMaxStringBytes.
Status CheckReplace(std::string_view s, std::string_view old_s, std::string_view new_s) {
  if (new_s.size() <= old_s.size()) return Status::Ok();
  size_t hits = old_s.empty() ? CodePoints(s) + 1 : static_cast<size_t>(PyCount(s, old_s));
  size_t grow = new_s.size() - old_s.size();
  if (hits > (kMaxStringBytes - std::min(s.size(), kMaxStringBytes)) / grow) {
    return TooLarge(s.size() + hits * std::min(grow, kMaxStringBytes), "string");
  }
  return Status::Ok();
}

Value StrList(std::vector<std::string> parts) {
  List l;
  l.reserve(parts.size());
  for (auto& p : parts) l.push_back(Value::String(std::move(p)));
  return Value::MakeList(std::move(l));
}

Value StrTuple(std::vector<std::string> parts) {
  List l;
  for (auto& p : parts) l.push_back(Value::String(std::move(p)));
  return Value::MakeTuple(std::move(l));
}

std::vector<std::string> Chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    DecodeUtf8At(s, i, &len);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace builtin

using namespace builtin;

// ------------------------------------------------------------------------------------------

Status CheckPrintable(const Value& v) {
  if (v.kind() == Value::Kind::kGenerator) {
    return UnsupportedError(
        "unsupported: printing a generator (what map, select, reject, selectattr, rejectattr, "
        "unique, items and "
        "reverse return; Python prints its address): add |list");
  }
  if (v.is_list() && v.seq() == Seq::kRange)
    return UnsupportedError("unsupported: printing a range(): add |list");
  if (v.kind() == Value::Kind::kCallable || v.kind() == Value::Kind::kLoop) {
    return UnsupportedError(fmt::format("unsupported: printing a {}", v.TypeName()));
  }
  return Status::Ok();
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePoints(v.str()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().items.size());
    default:
      return InvalidArgumentError(fmt::format("object of type '{}' has no len()", v.TypeName()));
  }
}

Result<std::shared_ptr<const List>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list_ref();
    case Value::Kind::kUndefined:
      return std::make_shared<const List>();
    case Value::Kind::kDict: {
      auto l = std::make_shared<List>();
      for (const auto& [k, x] : v.dict().items) l->push_back(Value::String(k));
      return std::shared_ptr<const List>(std::move(l));
    }
    case Value::Kind::kString: {
      auto l = std::make_shared<List>();
      for (auto& c : Chars(v.str())) l->push_back(Value::String(std::move(c)));
      return std::shared_ptr<const List>(std::move(l));
    }
    case Value::Kind::kGenerator:
      return v.Consume();
    default:
      return InvalidArgumentError(fmt::format("'{}' object is not iterable", v.TypeName()));
  }
}

// ------------------------------------------------------------------------------------------
// The registry: every name a template can call, bound to its implementation.

namespace {

const std::unordered_map<std::string_view, FilterFn>& Filters() {
  static const auto* m = new std::unordered_map<std::string_view, FilterFn>{
      {"abs", FAbs},
      {"attr", FAttr},
      {"capitalize", FCapitalize},
      {"center", FCenter},
      {"count", FLength},
      {"d", FDefault},
      {"default", FDefault},
      {"dictsort", FDictsort},
      {"e", FEscape},
      {"escape", FEscape},
      {"first", FFirst},
      {"float", FFloat},
      {"forceescape", FEscape},
      {"indent", FIndent},
      {"int", FInt},
      {"items", FItems},
      {"join", FJoin},
      {"last", FLast},
      {"length", FLength},
      {"list", FList},
      {"lower", FLower},
      {"map", FMap},
      {"max", FMax},
      {"min", FMin},
      {"reject", FReject},
      {"rejectattr", FRejectattr},
      {"replace", FReplace},
      {"reverse", FReverse},
      {"round", FRound},
      {"safe", FSafe},
      {"select", FSelect},
      {"selectattr", FSelectattr},
      {"sort", FSort},
      {"string", FString},
      {"sum", FSum},
      {"title", FTitle},
      {"tojson", FTojson},
      {"trim", FTrim},
      {"unique", FUnique},
      {"upper", FUpper},
      {"wordcount", FWordcount},
  };
  return *m;
}

}  // namespace

bool KnownFilter(std::string_view name) { return Filters().count(name) != 0; }

FilterFn FindFilter(std::string_view name) {
  auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

bool KnownTest(std::string_view n) {
  static const char* const kTests[] = {
      "defined", "undefined", "none",   "boolean",     "true",     "false",    "integer",
      "float",   "number",    "string", "mapping",     "iterable", "sequence", "callable",
      "escaped", "odd",       "even",   "divisibleby", "eq",       "equalto",  "ne",
      "lt",      "lessthan",  "gt",     "greaterthan", "le",       "ge",       "in",
      "lower",   "upper",     "sameas", "filter",      "test"};
  for (const char* t : kTests) {
    if (n == t) return true;
  }
  return false;
}

Result<Value> CallFilter(std::string_view name, const Value& operand, CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end())
    return UnsupportedError(fmt::format("unsupported: the filter '{}'", name));
  return it->second(operand, args);
}

Result<bool> CallTest(std::string_view name, const Value& v, CallArgs& args) {
  return Test(name, v, args);
}

const Value* FindGlobal(std::string_view name) {
  static const auto* globals = [] {
    auto* g = new Dict;
    g->Set("range", Value::Callable("range", GRange));
    g->Set("dict", Value::Callable("dict", GDict));
    g->Set("namespace", Value::Callable("namespace", GNamespace));
    g->Set("raise_exception", Value::Callable("raise_exception", GRaise));
    g->Set("strftime_now", Value::Callable("strftime_now", GStrftimeNow));
    for (const char* n : {"lipsum", "cycler", "joiner"}) {
      std::string name(n);
      g->Set(name, Value::Callable(name, [name](CallArgs&) { return GUnsupported(name); }));
    }
    return g;
  }();
  return globals->Find(name);
}

}  // namespace ek::tmpl
