// The methods of str, dict, list and loop objects, and attribute and item access
// (jinja2's sandboxed getattr/getitem), as jinja2 3.1 defines them.
#include <fmt/core.h>
#include <utf8proc.h>

#include <algorithm>
#include <limits>

#include "core/parse.h"
#include "template/builtins_internal.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl {

namespace builtin {

// ------------------------------------------------------------------------------------------
// Methods.

bool IsStrMethod(std::string_view n) {
  static const char* const kNames[] = {
      "strip",        "lstrip",       "rstrip",   "split",      "rsplit",     "splitlines",
      "startswith",   "endswith",     "replace",  "upper",      "lower",      "title",
      "capitalize",   "swapcase",     "find",     "rfind",      "index",      "rindex",
      "count",        "join",         "isdigit",  "isdecimal",  "isnumeric",  "isalpha",
      "isalnum",      "isspace",      "isupper",  "islower",    "partition",  "rpartition",
      "removeprefix", "removesuffix", "ljust",    "rjust",      "center",     "zfill",
      "format",       "encode",       "casefold", "expandtabs", "format_map", "isidentifier",
      "isprintable",  "istitle",      "isascii",  "maketrans",  "translate"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}
bool IsDictMethod(std::string_view n) {
  return n == "items" || n == "keys" || n == "values" || n == "get" || n == "copy" || n == "pop" ||
         n == "popitem" || n == "setdefault" || n == "update" || n == "clear" || n == "fromkeys";
}
bool IsListMethod(std::string_view n) {
  return n == "index" || n == "count" || n == "copy" || n == "append" || n == "extend" ||
         n == "insert" || n == "pop" || n == "remove" || n == "sort" || n == "reverse" ||
         n == "clear";
}

// The (key, value) tuples of a dict, as dict.items() yields them.
List Pairs(const Dict& d) {
  List l;
  l.reserve(d.items.size());
  for (const auto& [k, v] : d.items) l.push_back(Value::MakeTuple({Value::String(k), v}));
  return l;
}

Result<Value> StrMethod(const std::string& s, std::string_view n, CallArgs& a) {
  if (n == "strip" || n == "lstrip" || n == "rstrip") {
    EK_ASSIGN_OR_RETURN(auto chars, OptStr(a, 0, "chars", n));
    return Str(std::string(PyStrip(s, chars, n != "rstrip", n != "lstrip")));
  }
  if (n == "split" || n == "rsplit") {
    EK_ASSIGN_OR_RETURN(auto sep, OptStr(a, 0, "sep", n));
    EK_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(a, 1, "maxsplit", -1, n));
    EK_ASSIGN_OR_RETURN(auto parts, PySplit(s, sep, maxsplit, n == "rsplit"));
    return StrList(std::move(parts));
  }
  if (n == "splitlines") return StrList(PySplitLines(s, BoolArg(a, 0, "keepends", false)));
  if (n == "startswith" || n == "endswith") {
    if (a.positional.size() > 1 || a.Get(1, "start") || a.Get(2, "end")) {
      return UnsupportedError(fmt::format("unsupported: {}() with start/end", n));
    }
    const Value* p = a.Get(0, "prefix");
    if (!p) return InvalidArgumentError(fmt::format("{}() takes a prefix", n));
    auto test = [&](const Value& x) -> Result<bool> {
      if (!x.is_string()) return InvalidArgumentError(fmt::format("{}: the prefix must be str", n));
      std::string_view v = x.str();
      if (v.size() > s.size()) return false;
      return n == "startswith" ? s.compare(0, v.size(), v) == 0
                               : s.compare(s.size() - v.size(), v.size(), v) == 0;
    };
    if (p->is_list()) {
      for (const Value& x : p->list()) {
        EK_ASSIGN_OR_RETURN(bool hit, test(x));
        if (hit) return Value::Bool(true);
      }
      return Value::Bool(false);
    }
    EK_ASSIGN_OR_RETURN(bool hit, test(*p));
    return Value::Bool(hit);
  }
  if (n == "replace") {
    EK_ASSIGN_OR_RETURN(std::string_view old_s, StrArg(a, 0, "old", n));
    EK_ASSIGN_OR_RETURN(std::string_view new_s, StrArg(a, 1, "new", n));
    EK_ASSIGN_OR_RETURN(int64_t count, IntArg(a, 2, "count", -1, n));
    EK_RETURN_IF_ERROR(CheckReplace(s, old_s, new_s));
    return Str(PyReplace(s, old_s, new_s, count));
  }
  if (n == "upper" || n == "lower" || n == "title" || n == "capitalize" || n == "swapcase") {
    CaseOp op = n == "upper"        ? CaseOp::kUpper
                : n == "lower"      ? CaseOp::kLower
                : n == "title"      ? CaseOp::kTitle
                : n == "capitalize" ? CaseOp::kCapitalize
                                    : CaseOp::kSwapcase;
    EK_ASSIGN_OR_RETURN(std::string r, PyCase(s, op));
    return Str(std::move(r));
  }
  if (n == "find" || n == "rfind" || n == "index" || n == "rindex") {
    if (a.positional.size() > 1)
      return UnsupportedError(fmt::format("unsupported: {}() with start/end", n));
    EK_ASSIGN_OR_RETURN(std::string_view sub, StrArg(a, 0, "sub", n));
    int64_t i = PyFind(s, sub, n[0] == 'r');
    if (i < 0 && (n == "index" || n == "rindex"))
      return InvalidArgumentError("substring not found");
    return Value::Int(i);
  }
  if (n == "count") {
    if (a.positional.size() > 1) return UnsupportedError("unsupported: count() with start/end");
    EK_ASSIGN_OR_RETURN(std::string_view sub, StrArg(a, 0, "sub", n));
    return Value::Int(PyCount(s, sub));
  }
  if (n == "join") {
    const Value* it = a.Get(0, "iterable");
    if (!it) return InvalidArgumentError("join() takes an iterable");
    EK_ASSIGN_OR_RETURN(auto items, Iterate(*it));
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      const Value& x = (*items)[i];
      if (!x.is_string()) {
        return InvalidArgumentError(
            fmt::format("sequence item {}: expected str instance, {} found", i, x.TypeName()));
      }
      if (i) out += s;
      if (out.size() + x.str().size() > kMaxStringBytes)
        return TooLarge(out.size() + x.str().size(), "string");
      out += x.str();
    }
    return Str(std::move(out));
  }
  if (n.substr(0, 2) == "is" && n != "isidentifier" && n != "isprintable" && n != "istitle" &&
      n != "isascii") {
    return Value::Bool(PyIsClass(s, n));
  }
  if (n == "istitle") {  // Python: upper/titlecase only after uncased, lowercase only after cased
    bool cased = false, prev_cased = false;
    for (size_t i = 0; i < s.size();) {
      size_t len;
      uint32_t cp = DecodeUtf8At(s, i, &len);
      i += len;
      std::string one = s.substr(i - len, len);
      bool upper = PyIsClass(one, "isupper") ||
                   utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_LT;
      bool lower = PyIsClass(one, "islower");
      if (upper) {
        if (prev_cased) return Value::Bool(false);
        prev_cased = cased = true;
      } else if (lower) {
        if (!prev_cased) return Value::Bool(false);
        prev_cased = cased = true;
      } else {
        prev_cased = false;
      }
    }
    return Value::Bool(cased);
  }
  if (n == "isascii") {
    for (unsigned char c : s) {
      if (c >= 0x80) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if (n == "partition" || n == "rpartition") {
    EK_ASSIGN_OR_RETURN(std::string_view sep, StrArg(a, 0, "sep", n));
    if (sep.empty()) return InvalidArgumentError("empty separator");
    size_t hit = n == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return n == "partition" ? StrTuple({s, "", ""}) : StrTuple({"", "", s});
    }
    return StrTuple({s.substr(0, hit), std::string(sep), s.substr(hit + sep.size())});
  }
  if (n == "removeprefix" || n == "removesuffix") {
    EK_ASSIGN_OR_RETURN(std::string_view x,
                        StrArg(a, 0, n == "removeprefix" ? "prefix" : "suffix", n));
    std::string_view v = s;
    if (n == "removeprefix" && v.substr(0, x.size()) == x) v.remove_prefix(x.size());
    if (n == "removesuffix" && !x.empty() && v.size() >= x.size() &&
        v.substr(v.size() - x.size()) == x) {
      v.remove_suffix(x.size());
    }
    return Str(std::string(v));
  }
  if (n == "ljust" || n == "rjust" || n == "center" || n == "zfill") {
    EK_ASSIGN_OR_RETURN(int64_t width, IntArg(a, 0, "width", 0, n));
    std::string fill = " ";
    if (n == "zfill") {
      fill = "0";
    } else if (const Value* f = a.Get(1, "fillchar")) {
      if (!f->is_string() || CodePoints(f->str()) != 1) {
        return InvalidArgumentError("The fill character must be exactly one character long");
      }
      fill = f->str();
    }
    int64_t len = static_cast<int64_t>(CodePoints(s));
    if (width <= len) return Str(s);
    if (static_cast<uint64_t>(width) > kMaxStringBytes)
      return TooLarge(static_cast<size_t>(width), "string");
    int64_t pad = width - len;
    auto rep = [&](int64_t k) {
      std::string r;
      for (int64_t i = 0; i < k; ++i) r += fill;
      return r;
    };
    if (n == "ljust") return Str(s + rep(pad));
    if (n == "rjust") return Str(rep(pad) + s);
    if (n == "zfill") {
      if (!s.empty() && (s[0] == '+' || s[0] == '-'))
        return Str(s.substr(0, 1) + rep(pad) + s.substr(1));
      return Str(rep(pad) + s);
    }
    // Python's center puts the extra space on the left when the string length is odd.
    int64_t left = pad / 2 + (pad & width & 1);
    return Str(rep(left) + s + rep(pad - left));
  }
  return UnsupportedError(fmt::format("unsupported: the str method {}()", n));
}

Result<Value> DictMethod(const Dict& d, std::string_view n, CallArgs& a) {
  if (n == "items") return Value::MakeList(Pairs(d), Seq::kDictItems);
  if (n == "keys" || n == "values") {
    List l;
    for (const auto& [k, v] : d.items) l.push_back(n == "keys" ? Value::String(k) : v);
    return Value::MakeList(std::move(l), n == "keys" ? Seq::kDictKeys : Seq::kDictValues);
  }
  if (n == "get") {
    const Value* k = a.Get(0, "key");
    if (!k) return InvalidArgumentError("get expected at least 1 argument");
    if (k->is_string()) {
      if (const Value* v = d.Find(k->str())) return *v;
    }
    const Value* dflt = a.Get(1, "default");
    return dflt ? *dflt : Value::None();
  }
  if (n == "copy") return Value::MakeDict(d);
  return InvalidArgumentError(
      fmt::format("dict.{}() modifies a dict, which transformers' sandbox "
                  "(ImmutableSandboxedEnvironment) refuses",
                  n));
}

Result<Value> ListMethod(const List& l, std::string_view n, CallArgs& a) {
  if (n == "index" || n == "count") {
    const Value* x = a.Get(0, "value");
    if (!x) return InvalidArgumentError(fmt::format("{}() takes exactly one argument", n));
    int64_t count = 0;
    for (size_t i = 0; i < l.size(); ++i) {
      if (Equal(l[i], *x)) {
        if (n == "index") return Value::Int(static_cast<int64_t>(i));
        ++count;
      }
    }
    if (n == "index") return InvalidArgumentError(fmt::format("{} is not in list", Repr(*x)));
    return Value::Int(count);
  }
  if (n == "copy") return Value::MakeList(l);
  return InvalidArgumentError(
      fmt::format("list.{}() modifies a list, which transformers' sandbox "
                  "(ImmutableSandboxedEnvironment) refuses",
                  n));
}

Result<Value> LoopAttr(const LoopState& s, std::string_view n) {
  int64_t i = static_cast<int64_t>(s.index0), len = static_cast<int64_t>(s.items->size());
  if (n == "index") return Value::Int(i + 1);
  if (n == "index0") return Value::Int(i);
  if (n == "revindex") return Value::Int(len - i);
  if (n == "revindex0") return Value::Int(len - i - 1);
  if (n == "first") return Value::Bool(i == 0);
  if (n == "last") return Value::Bool(i == len - 1);
  if (n == "length") return Value::Int(len);
  if (n == "depth") return Value::Int(1);
  if (n == "depth0") return Value::Int(0);
  if (n == "previtem")
    return i > 0 ? (*s.items)[static_cast<size_t>(i - 1)] : Value::Undefined("previtem");
  if (n == "nextitem")
    return i + 1 < len ? (*s.items)[static_cast<size_t>(i + 1)] : Value::Undefined("nextitem");
  if (n == "cycle" || n == "changed")
    return Value::Undefined();  // methods; called through CallMethod
  return Value::Undefined(std::string(n));
}

Value BoundMethod(const Value& obj, std::string_view name) {
  std::string n(name);
  return Value::Callable(n, [obj, n](CallArgs& args) -> Result<Value> {
    bool found = false;
    return CallMethod(obj, n, args, &found);
  });
}

}  // namespace builtin

using namespace builtin;

namespace {

// An item of `container`: borrowed when the container is (it lives as long).
Value Item(const Value& container, const Value& item) {
  return container.borrowed() ? Value::Borrow(item) : item;
}

// Methods that modify their object: the sandbox hides them (unsafe_undefined).
bool Mutates(std::string_view n) {
  return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" ||
         n == "sort" || n == "reverse" || n == "clear" || n == "popitem" || n == "setdefault" ||
         n == "update";
}

bool HasListMethod(const Value& l, std::string_view name) {
  if (l.seq() == Seq::kList) return IsListMethod(name);
  if (l.seq() == Seq::kTuple || l.seq() == Seq::kRange) return name == "index" || name == "count";
  return false;
}

}  // namespace

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return InvalidArgumentError(fmt::format("'{}' is undefined (reading its attribute '{}')",
                                              obj.name().empty() ? "value" : obj.name(), name));
    case Value::Kind::kDict: {
      if (IsDictMethod(name))
        return Mutates(name) ? Value::Undefined(std::string(name)) : BoundMethod(obj, name);
      if (const Value* v = obj.dict().Find(name)) return Item(obj, *v);
      return Value::Undefined(std::string(name));
    }
    case Value::Kind::kNamespace: {
      if (const Value* v = obj.dict().Find(name)) return *v;
      return Value::Undefined(std::string(name));
    }
    case Value::Kind::kLoop:
      if (name == "cycle" || name == "changed") return BoundMethod(obj, name);
      return LoopAttr(obj.loop(), name);
    case Value::Kind::kString:
      if (IsStrMethod(name)) return BoundMethod(obj, name);
      return Value::Undefined(std::string(name));
    case Value::Kind::kList:
      if (HasListMethod(obj, name) && !Mutates(name)) return BoundMethod(obj, name);
      return Value::Undefined(std::string(name));
    default:
      return Value::Undefined(std::string(name));
  }
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return InvalidArgumentError(fmt::format("'{}' is undefined (reading an item)",
                                              obj.name().empty() ? "value" : obj.name()));
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (IsInt(key)) {
        int64_t i = key.integer();
        if (obj.is_list()) {
          if (obj.seq() != Seq::kList && obj.seq() != Seq::kTuple && obj.seq() != Seq::kRange) {
            return Value::Undefined();  // dict views are not subscriptable
          }
          int64_t n = static_cast<int64_t>(obj.list().size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) return Value::Undefined();
          return Item(obj, obj.list()[static_cast<size_t>(i)]);
        }
        int64_t n = static_cast<int64_t>(CodePoints(obj.str()));
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::Undefined();
        size_t b = ByteOffsetOfCodePoint(obj.str(), static_cast<size_t>(i));
        size_t len;
        DecodeUtf8At(obj.str(), b, &len);
        return Value::String(obj.str().substr(b, len));
      }
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined();
    }
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = obj.dict().Find(key.str())) return Item(obj, *v);
        return GetAttr(obj, key.str());
      }
      return Value::Undefined();
    case Value::Kind::kNamespace:
    case Value::Kind::kLoop:
      if (key.is_string()) return GetAttr(obj, key.str());
      return Value::Undefined();
    default:
      return Value::Undefined();
  }
}

Result<Value> GetAttrPath(const Value& obj, std::string_view path) {
  Value v = obj;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string_view part =
        path.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
    auto idx = ParseUint64(part, 10);
    if (idx && *idx <= static_cast<uint64_t>(INT64_MAX)) {
      EK_ASSIGN_OR_RETURN(v, GetItem(v, Value::Int(static_cast<int64_t>(*idx))));
    } else {
      EK_ASSIGN_OR_RETURN(v, GetItem(v, Value::String(std::string(part))));
    }
    if (dot == std::string_view::npos) return v;
    pos = dot + 1;
  }
}

Result<Value> CallMethod(const Value& obj, std::string_view name, CallArgs& args, bool* found) {
  *found = false;
  switch (obj.kind()) {
    case Value::Kind::kString:
      if (!IsStrMethod(name)) return Value::Undefined();
      *found = true;
      return StrMethod(obj.str(), name, args);
    case Value::Kind::kDict:
      if (!IsDictMethod(name)) return Value::Undefined();
      *found = true;
      if (name == "fromkeys") return UnsupportedError("unsupported: dict.fromkeys()");
      return DictMethod(obj.dict(), name, args);
    case Value::Kind::kList:
      if (!HasListMethod(obj, name)) return Value::Undefined();
      *found = true;
      return ListMethod(obj.list(), name, args);
    case Value::Kind::kLoop:
      if (name == "cycle") {
        *found = true;
        if (args.positional.empty()) return InvalidArgumentError("no items for cycling given");
        return args.positional[obj.loop().index0 % args.positional.size()];
      }
      if (name == "changed") {
        *found = true;
        return UnsupportedError("unsupported: loop.changed()");
      }
      return Value::Undefined();
    default:
      return Value::Undefined();
  }
}

}  // namespace ek::tmpl
