// Attribute access, methods, filters, tests and globals, each as jinja2 3.1
// (and transformers' overrides of tojson, dict, namespace, raise_exception and
// strftime_now) define them. Anything a chat template could name that is not
// here is refused at parse time (filters, tests) or when called (methods,
// globals), never rendered differently.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <sys/time.h>
#include <unordered_map>

#include <utf8proc.h>

#include "core/parse.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl {

namespace {

Status Undef(const Value& v) {
  return InvalidArgumentError(fmt::format("'{}' is undefined", v.name().empty() ? "value" : v.name()));
}

bool IsInt(const Value& v) { return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool; }

Result<std::string_view> StrArg(const CallArgs& a, size_t i, std::string_view name, std::string_view fn) {
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
  if (!v->is_string()) return InvalidArgumentError(fmt::format("{}: argument '{}' must be str or None", fn, name));
  return std::optional<std::string_view>(v->str());
}

Result<int64_t> IntArg(const CallArgs& a, size_t i, std::string_view name, int64_t dflt, std::string_view fn) {
  const Value* v = a.Get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!IsInt(*v)) return InvalidArgumentError(fmt::format("{}: argument '{}' must be an integer", fn, name));
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
    DecodeAt(s, i, &len);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Methods.

bool IsStrMethod(std::string_view n) {
  static const char* const kNames[] = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace", "upper",
      "lower", "title", "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "join", "isdigit",
      "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper", "islower", "partition", "rpartition",
      "removeprefix", "removesuffix", "ljust", "rjust", "center", "zfill", "format", "encode", "casefold",
      "expandtabs", "format_map", "isidentifier", "isprintable", "istitle", "isascii", "maketrans", "translate"};
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
  return n == "index" || n == "count" || n == "copy" || n == "append" || n == "extend" || n == "insert" ||
         n == "pop" || n == "remove" || n == "sort" || n == "reverse" || n == "clear";
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
      return n == "startswith" ? s.compare(0, v.size(), v) == 0 : s.compare(s.size() - v.size(), v.size(), v) == 0;
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
    CaseOp op = n == "upper"   ? CaseOp::kUpper
                : n == "lower" ? CaseOp::kLower
                : n == "title" ? CaseOp::kTitle
                : n == "capitalize" ? CaseOp::kCapitalize
                                    : CaseOp::kSwapcase;
    EK_ASSIGN_OR_RETURN(std::string r, PyCase(s, op));
    return Str(std::move(r));
  }
  if (n == "find" || n == "rfind" || n == "index" || n == "rindex") {
    if (a.positional.size() > 1) return UnsupportedError(fmt::format("unsupported: {}() with start/end", n));
    EK_ASSIGN_OR_RETURN(std::string_view sub, StrArg(a, 0, "sub", n));
    int64_t i = PyFind(s, sub, n[0] == 'r');
    if (i < 0 && (n == "index" || n == "rindex")) return InvalidArgumentError("substring not found");
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
        return InvalidArgumentError(fmt::format("sequence item {}: expected str instance, {} found", i, x.TypeName()));
      }
      if (i) out += s;
      if (out.size() + x.str().size() > kMaxStringBytes) return TooLarge(out.size() + x.str().size(), "string");
      out += x.str();
    }
    return Str(std::move(out));
  }
  if (n.substr(0, 2) == "is" && n != "isidentifier" && n != "isprintable" && n != "istitle" && n != "isascii") {
    return Value::Bool(PyIsClass(s, n));
  }
  if (n == "istitle") {  // Python: upper/titlecase only after uncased, lowercase only after cased
    bool cased = false, prev_cased = false;
    for (size_t i = 0; i < s.size();) {
      size_t len;
      uint32_t cp = DecodeAt(s, i, &len);
      i += len;
      std::string one = s.substr(i - len, len);
      bool upper = PyIsClass(one, "isupper") || utf8proc_category(static_cast<utf8proc_int32_t>(cp)) ==
                                                     UTF8PROC_CATEGORY_LT;
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
    EK_ASSIGN_OR_RETURN(std::string_view x, StrArg(a, 0, n == "removeprefix" ? "prefix" : "suffix", n));
    std::string_view v = s;
    if (n == "removeprefix" && v.substr(0, x.size()) == x) v.remove_prefix(x.size());
    if (n == "removesuffix" && !x.empty() && v.size() >= x.size() && v.substr(v.size() - x.size()) == x) {
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
    if (static_cast<uint64_t>(width) > kMaxStringBytes) return TooLarge(static_cast<size_t>(width), "string");
    int64_t pad = width - len;
    auto rep = [&](int64_t k) {
      std::string r;
      for (int64_t i = 0; i < k; ++i) r += fill;
      return r;
    };
    if (n == "ljust") return Str(s + rep(pad));
    if (n == "rjust") return Str(rep(pad) + s);
    if (n == "zfill") {
      if (!s.empty() && (s[0] == '+' || s[0] == '-')) return Str(s.substr(0, 1) + rep(pad) + s.substr(1));
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
      fmt::format("dict.{}() modifies a dict, which transformers' sandbox (ImmutableSandboxedEnvironment) refuses",
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
      fmt::format("list.{}() modifies a list, which transformers' sandbox (ImmutableSandboxedEnvironment) refuses",
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
  if (n == "previtem") return i > 0 ? (*s.items)[static_cast<size_t>(i - 1)] : Value::Undefined("previtem");
  if (n == "nextitem") return i + 1 < len ? (*s.items)[static_cast<size_t>(i + 1)] : Value::Undefined("nextitem");
  if (n == "cycle" || n == "changed") return Value::Undefined();  // methods; called through CallMethod
  return Value::Undefined(std::string(n));
}

Value BoundMethod(const Value& obj, std::string_view name) {
  std::string n(name);
  return Value::Callable(n, [obj, n](CallArgs& args) -> Result<Value> {
    bool found = false;
    return CallMethod(obj, n, args, &found);
  });
}

// ------------------------------------------------------------------------------------------
// Filters.


Value IgnoreCase(const Value& v) {
  if (!v.is_string()) return v;
  auto r = PyCase(v.str(), CaseOp::kLower);
  return r.ok() ? Value::String(std::move(*r)) : v;
}

// jinja2's make_attrgetter: attribute may be a dotted path or an int; None: the item itself.
Result<Value> KeyOf(const Value& item, const Value* attribute, bool case_sensitive) {
  Value v = item;
  if (attribute && !attribute->is_none()) {
    if (IsInt(*attribute)) {
      EK_ASSIGN_OR_RETURN(v, GetItem(item, *attribute));
    } else if (attribute->is_string()) {
      EK_ASSIGN_OR_RETURN(v, GetAttrPath(item, attribute->str()));
    } else {
      return InvalidArgumentError("attribute must be a string or an integer");
    }
  }
  return case_sensitive ? v : IgnoreCase(v);
}

Result<Value> FLength(const Value& v, CallArgs&) {
  EK_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value::Int(n);
}

Result<Value> FString(const Value& v, CallArgs&) {
  EK_RETURN_IF_ERROR(CheckPrintable(v));
  return Value::String(ToStr(v));
}

Result<Value> FList(const Value& v, CallArgs&) {
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  return Value::ListRef(items);
}

Result<Value> FItems(const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::Generator({});
  if (!v.is_dict()) return InvalidArgumentError("Can only get item pairs from a mapping.");
  return Value::Generator(Pairs(v.dict()));
}

Result<Value> FFirst(const Value& v, CallArgs&) {
  if (v.kind() == Value::Kind::kGenerator) {  // next(): takes one item
    Value item;
    if (!v.Next(&item)) return Value::Undefined("first");
    return item;
  }
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  if (items->empty()) return Value::Undefined("first");
  return items->front();
}

Result<Value> FLast(const Value& v, CallArgs&) {
  if (v.kind() == Value::Kind::kGenerator) return InvalidArgumentError("'generator' object is not reversible");
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  if (items->empty()) return Value::Undefined("last");
  return items->back();
}

Result<Value> FReverse(const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto chars = Chars(v.str());
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Str(std::move(out));
  }
  // reversed(): an iterator; a generator (not reversible) becomes a reversed list.
  bool gen = v.kind() == Value::Kind::kGenerator;
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  List out(items->rbegin(), items->rend());
  return gen ? Value::MakeList(std::move(out)) : Value::Generator(std::move(out));
}

Result<Value> FDefault(const Value& v, CallArgs& a) {
  bool boolean = BoolArg(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.Truthy())) {
    const Value* d = a.Get(0, "default_value");
    return d ? *d : Value::String("");
  }
  return v;
}

Result<Value> FTrim(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(auto chars, OptStr(a, 0, "chars", "trim"));
  if (v.is_string()) {
    std::string_view t = PyStrip(v.str(), chars, true, true);
    if (t.size() == v.str().size()) return v;  // nothing stripped: the same string
    return Str(std::string(t));
  }
  std::string s = ToStr(v);
  return Str(std::string(PyStrip(s, chars, true, true)));
}

Result<Value> FReplace(const Value& v, CallArgs& a) {
  std::string s = ToStr(v);
  const Value* o = a.Get(0, "old");
  const Value* n = a.Get(1, "new");
  if (!o || !n) return InvalidArgumentError("replace takes old and new");
  EK_ASSIGN_OR_RETURN(int64_t count, IntArg(a, 2, "count", -1, "replace"));
  std::string old_s = ToStr(*o), new_s = ToStr(*n);
  EK_RETURN_IF_ERROR(CheckReplace(s, old_s, new_s));
  return Str(PyReplace(s, old_s, new_s, count));
}

Result<Value> CaseFilter(const Value& v, CaseOp op) {
  EK_ASSIGN_OR_RETURN(std::string r, PyCase(ToStr(v), op));
  return Str(std::move(r));
}
Result<Value> FUpper(const Value& v, CallArgs&) { return CaseFilter(v, CaseOp::kUpper); }
Result<Value> FLower(const Value& v, CallArgs&) { return CaseFilter(v, CaseOp::kLower); }
Result<Value> FCapitalize(const Value& v, CallArgs&) { return CaseFilter(v, CaseOp::kCapitalize); }
Result<Value> FTitle(const Value& v, CallArgs&) {
  EK_ASSIGN_OR_RETURN(std::string r, JinjaTitle(ToStr(v)));
  return Str(std::move(r));
}

Result<Value> FTojson(const Value& v, CallArgs& a) {
  bool ensure_ascii = BoolArg(a, 0, "ensure_ascii", false);
  int indent = -1;
  std::string indent_str;
  if (const Value* i = a.Get(1, "indent"); i && !i->is_none()) {
    if (IsInt(*i)) {
      indent = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(i->integer(), 64)));
    } else {
      return UnsupportedError("unsupported: tojson indent that is not an integer");
    }
  }
  std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
  if (const Value* s = a.Get(2, "separators"); s && !s->is_none()) {
    if (!s->is_list() || s->list().size() != 2 || !s->list()[0].is_string() || !s->list()[1].is_string()) {
      return InvalidArgumentError("tojson: separators must be a (item, key) pair of strings");
    }
    item_sep = s->list()[0].str();
    key_sep = s->list()[1].str();
  }
  bool sort_keys = BoolArg(a, 3, "sort_keys", false);
  EK_ASSIGN_OR_RETURN(std::string json, ToJson(v, indent, sort_keys, item_sep, key_sep));
  if (ensure_ascii) {
    std::string out;
    for (size_t i = 0; i < json.size();) {
      size_t len;
      uint32_t cp = DecodeAt(json, i, &len);
      if (cp < 0x80) {
        out += static_cast<char>(cp);
      } else if (cp < 0x10000) {
        out += fmt::format("\\u{:04x}", cp);
      } else {
        uint32_t c = cp - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
      }
      i += len;
      if (out.size() > kMaxStringBytes) return TooLarge(out.size(), "string");
    }
    json = std::move(out);
  }
  return Str(std::move(json));
}

Result<Value> FJoin(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  std::string sep;
  if (const Value* d = a.Get(0, "d")) sep = ToStr(*d);
  const Value* attribute = a.Get(1, "attribute");
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (out.size() > kMaxStringBytes) return TooLarge(out.size(), "string");
    if (i) out += sep;
    if (attribute && !attribute->is_none()) {
      EK_ASSIGN_OR_RETURN(Value x, KeyOf((*items)[i], attribute, true));
      AppendStr(&out, x);
    } else {
      AppendStr(&out, (*items)[i]);
    }
  }
  return Str(std::move(out));
}

Result<Value> FInt(const Value& v, CallArgs& a) {
  const Value* d = a.Get(0, "default");
  Value dflt = d ? *d : Value::Int(0);
  EK_ASSIGN_OR_RETURN(int64_t base, IntArg(a, 1, "base", 10, "int"));
  if (IsInt(v)) return Value::Int(v.integer());
  if (v.kind() == Value::Kind::kFloat) {
    if (!std::isfinite(v.number()) || std::fabs(v.number()) >= 9.2e18) return dflt;
    return Value::Int(static_cast<int64_t>(v.number()));
  }
  if (v.is_string()) {
    std::string s(PyStrip(v.str(), std::nullopt, true, true));
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    bool neg = !digits.empty() && (digits[0] == '-' || digits[0] == '+') && digits[0] == '-';
    std::string_view body = digits;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
    if (auto n = ParseUint64(body, static_cast<int>(base)); n && *n <= static_cast<uint64_t>(INT64_MAX)) {
      return Value::Int(neg ? -static_cast<int64_t>(*n) : static_cast<int64_t>(*n));
    }
    if (auto f = ParseDouble(s); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(*f));
    }
    return dflt;
  }
  return dflt;
}

Result<Value> FFloat(const Value& v, CallArgs& a) {
  const Value* d = a.Get(0, "default");
  Value dflt = d ? *d : Value::Float(0.0);
  if (v.is_number()) return Value::Float(v.number());
  if (v.is_string()) {
    if (auto f = ParseDouble(PyStrip(v.str(), std::nullopt, true, true))) return Value::Float(*f);
  }
  return dflt;
}

Result<Value> FAbs(const Value& v, CallArgs&) {
  if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.number()));
  if (IsInt(v)) {
    if (v.integer() == std::numeric_limits<int64_t>::min()) return InvalidArgumentError("integer overflow");
    return Value::Int(v.integer() < 0 ? -v.integer() : v.integer());
  }
  return InvalidArgumentError(fmt::format("bad operand type for abs(): '{}'", v.TypeName()));
}

Result<Value> FRound(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(int64_t precision, IntArg(a, 0, "precision", 0, "round"));
  std::string method = "common";
  if (const Value* m = a.Get(1, "method")) method = ToStr(*m);
  if (method != "common" && method != "ceil" && method != "floor") {
    return InvalidArgumentError("method must be common, ceil or floor");
  }
  if (!v.is_number()) return InvalidArgumentError(fmt::format("round: a number is needed, not {}", v.TypeName()));
  if (method == "common") {
    if (IsInt(v)) return Value::Int(v.integer());  // Python's round(int, n) with n >= 0
    // Python rounds the exact binary value half-to-even; so does printf.
    if (precision < 0 || precision > 300) return UnsupportedError("unsupported: round() precision outside 0..300");
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.number());
    auto f = ParseDouble(buf);
    return Value::Float(f ? *f : v.number());
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.number() * scale;
  return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Result<Value> FIndent(const Value& v, CallArgs& a) {
  std::string ind;
  if (const Value* w = a.Get(0, "width")) {
    if (w->is_string()) {
      ind = w->str();
    } else if (IsInt(*w)) {
      ind.assign(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(w->integer(), 4096))), ' ');
    } else {
      return InvalidArgumentError("indent: width must be an int or a str");
    }
  } else {
    ind = "    ";
  }
  bool first = BoolArg(a, 1, "first", false);
  bool blank = BoolArg(a, 2, "blank", false);
  std::string s = ToStr(v) + "\n";
  auto lines = PySplitLines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1) rv += "\n";
        if (!lines[i].empty()) rv += ind;
        rv += lines[i];
      }
    }
  }
  if (first) rv = ind + rv;
  return Str(std::move(rv));
}

Result<Value> FEscape(const Value& v, CallArgs&) {
  std::string s = ToStr(v), out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Str(std::move(out));
}

Result<Value> FSafe(const Value& v, CallArgs&) { return v; }

Result<Value> FAttr(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(std::string_view name, StrArg(a, 0, "name", "attr"));
  if (v.is_dict()) return IsDictMethod(name) ? BoundMethod(v, name) : Value::Undefined(std::string(name));
  return GetAttr(v, name);
}

// Sorting with jinja2's key rules; errors from mixed types surface.
Status SortValues(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  Status err;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& x, const auto& y) {
    if (!err.ok()) return false;
    auto r = reverse ? Less(y.first, x.first) : Less(x.first, y.first);
    if (!r.ok()) {
      err = r.status();
      return false;
    }
    return *r;
  });
  return err;
}

Result<Value> FSort(const Value& v, CallArgs& a) {
  bool reverse = BoolArg(a, 0, "reverse", false);
  bool cs = BoolArg(a, 1, "case_sensitive", false);
  const Value* attribute = a.Get(2, "attribute");
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : *items) {
    EK_ASSIGN_OR_RETURN(Value k, KeyOf(x, attribute, cs));
    keyed.emplace_back(std::move(k), x);
  }
  EK_RETURN_IF_ERROR(SortValues(&keyed, reverse));
  List out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return Value::MakeList(std::move(out));
}

Result<Value> FDictsort(const Value& v, CallArgs& a) {
  if (!v.is_dict()) return InvalidArgumentError("dictsort: a mapping is needed");
  bool cs = BoolArg(a, 0, "case_sensitive", false);
  std::string by = "key";
  if (const Value* b = a.Get(1, "by")) by = ToStr(*b);
  if (by != "key" && by != "value") return InvalidArgumentError("You can only sort by either 'key' or 'value'");
  bool reverse = BoolArg(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, x] : v.dict().items) {
    Value key = by == "key" ? Value::String(k) : x;
    keyed.emplace_back(cs ? key : IgnoreCase(key), Value::MakeTuple({Value::String(k), x}));
  }
  EK_RETURN_IF_ERROR(SortValues(&keyed, reverse));
  List out;
  for (auto& [k, x] : keyed) out.push_back(std::move(x));
  return Value::MakeList(std::move(out));
}

Result<Value> FUnique(const Value& v, CallArgs& a) {
  bool cs = BoolArg(a, 0, "case_sensitive", false);
  const Value* attribute = a.Get(1, "attribute");
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  List out, seen;
  for (const Value& x : *items) {
    EK_ASSIGN_OR_RETURN(Value k, KeyOf(x, attribute, cs));
    bool dup = false;
    for (const Value& s : seen) dup = dup || Equal(s, k);
    if (!dup) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value::Generator(std::move(out));
}

Result<Value> MinMax(const Value& v, CallArgs& a, bool max) {
  bool cs = BoolArg(a, 0, "case_sensitive", false);
  const Value* attribute = a.Get(1, "attribute");
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  if (items->empty()) return Value::Undefined(max ? "max" : "min");
  size_t best = 0;
  EK_ASSIGN_OR_RETURN(Value best_key, KeyOf((*items)[0], attribute, cs));
  for (size_t i = 1; i < items->size(); ++i) {
    EK_ASSIGN_OR_RETURN(Value k, KeyOf((*items)[i], attribute, cs));
    EK_ASSIGN_OR_RETURN(bool better, max ? Less(best_key, k) : Less(k, best_key));
    if (better) {
      best = i;
      best_key = std::move(k);
    }
  }
  return (*items)[best];
}
Result<Value> FMin(const Value& v, CallArgs& a) { return MinMax(v, a, false); }
Result<Value> FMax(const Value& v, CallArgs& a) { return MinMax(v, a, true); }

Result<Value> FSum(const Value& v, CallArgs& a) {
  const Value* attribute = a.Get(0, "attribute");
  const Value* start = a.Get(1, "start");
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  Value acc = start ? *start : Value::Int(0);
  for (const Value& x : *items) {
    EK_ASSIGN_OR_RETURN(Value k, KeyOf(x, attribute, true));
    if (!acc.is_number() || !k.is_number()) {
      return UnsupportedError(fmt::format("unsupported: sum over {} values", k.TypeName()));
    }
    if (acc.kind() == Value::Kind::kFloat || k.kind() == Value::Kind::kFloat) {
      acc = Value::Float(acc.number() + k.number());
    } else {
      int64_t r;
      if (__builtin_add_overflow(acc.integer(), k.integer(), &r)) return InvalidArgumentError("integer overflow");
      acc = Value::Int(r);
    }
  }
  return acc;
}

// map / select / reject / selectattr / rejectattr
Result<Value> FMap(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  List out;
  if (a.positional.empty()) {
    const Value* attribute = nullptr;
    const Value* dflt = nullptr;
    for (const auto& [k, x] : a.keyword) {
      if (k == "attribute") attribute = &x;
      if (k == "default") dflt = &x;
    }
    if (!attribute) return InvalidArgumentError("map: give a filter name or attribute=");
    for (const Value& x : *items) {
      EK_ASSIGN_OR_RETURN(Value r, KeyOf(x, attribute, true));
      if (r.is_undefined() && dflt) r = *dflt;
      out.push_back(std::move(r));
    }
    return Value::Generator(std::move(out));
  }
  if (!a.positional[0].is_string()) return InvalidArgumentError("map: the filter name must be a string");
  std::string name = a.positional[0].str();
  if (!KnownFilter(name)) return UnsupportedError(fmt::format("unsupported: the filter '{}'", name));
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& x : *items) {
    EK_ASSIGN_OR_RETURN(Value r, CallFilter(name, x, rest));
    out.push_back(std::move(r));
  }
  return Value::Generator(std::move(out));
}

Result<Value> SelectImpl(const Value& v, CallArgs& a, bool by_attr, bool keep) {
  EK_ASSIGN_OR_RETURN(auto items, Iterate(v));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty() || !a.positional[0].is_string()) {
      return InvalidArgumentError("selectattr/rejectattr: the attribute name must be a string");
    }
    attr = a.positional[0].str();
    next = 1;
  }
  std::string test;
  if (a.positional.size() > next) {
    if (!a.positional[next].is_string()) return InvalidArgumentError("the test name must be a string");
    test = a.positional[next].str();
    if (!KnownTest(test)) return UnsupportedError(fmt::format("unsupported: the test '{}'", test));
    ++next;
  }
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(next, a.positional.size())),
                         a.positional.end());
  rest.keyword = a.keyword;
  List out;
  for (const Value& x : *items) {
    Value subject = x;
    if (by_attr) {
      EK_ASSIGN_OR_RETURN(subject, GetAttrPath(x, attr));
    }
    bool pass;
    if (test.empty()) {
      pass = subject.Truthy();
    } else {
      EK_ASSIGN_OR_RETURN(pass, CallTest(test, subject, rest));
    }
    if (pass == keep) out.push_back(x);
  }
  return Value::Generator(std::move(out));
}
Result<Value> FSelect(const Value& v, CallArgs& a) { return SelectImpl(v, a, false, true); }
Result<Value> FReject(const Value& v, CallArgs& a) { return SelectImpl(v, a, false, false); }
Result<Value> FSelectattr(const Value& v, CallArgs& a) { return SelectImpl(v, a, true, true); }
Result<Value> FRejectattr(const Value& v, CallArgs& a) { return SelectImpl(v, a, true, false); }

Result<Value> FCenter(const Value& v, CallArgs& a) {
  CallArgs b;
  b.positional.push_back(a.Get(0, "width") ? *a.Get(0, "width") : Value::Int(80));
  return StrMethod(ToStr(v), "center", b);
}

Result<Value> FWordcount(const Value& v, CallArgs&) {
  // len(re.findall(r"\w+", s)): runs of letters, digits, marks and underscore.
  std::string s = ToStr(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    uint32_t cp = DecodeAt(s, i, &len);
    i += len;
    bool w = cp == '_' || (cp < 0x80 ? std::isalnum(static_cast<int>(cp)) != 0 : !IsPySpace(cp));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

const std::unordered_map<std::string_view, FilterFn>& Filters() {
  static const auto* m = new std::unordered_map<std::string_view, FilterFn>{
      {"abs", FAbs},           {"attr", FAttr},         {"capitalize", FCapitalize}, {"center", FCenter},
      {"count", FLength},      {"d", FDefault},         {"default", FDefault},       {"dictsort", FDictsort},
      {"e", FEscape},          {"escape", FEscape},     {"first", FFirst},           {"float", FFloat},
      {"forceescape", FEscape}, {"indent", FIndent},    {"int", FInt},               {"items", FItems},
      {"join", FJoin},         {"last", FLast},         {"length", FLength},         {"list", FList},
      {"lower", FLower},       {"map", FMap},           {"max", FMax},               {"min", FMin},
      {"reject", FReject},     {"rejectattr", FRejectattr}, {"replace", FReplace},   {"reverse", FReverse},
      {"round", FRound},       {"safe", FSafe},         {"select", FSelect},         {"selectattr", FSelectattr},
      {"sort", FSort},         {"string", FString},     {"sum", FSum},               {"title", FTitle},
      {"tojson", FTojson},     {"trim", FTrim},         {"unique", FUnique},         {"upper", FUpper},
      {"wordcount", FWordcount},
  };
  return *m;
}

// ------------------------------------------------------------------------------------------
// Tests.

Result<bool> Test(std::string_view n, const Value& v, CallArgs& a) {
  auto arg = [&]() -> Result<const Value*> {
    const Value* x = a.Get(0, "other");
    if (!x) x = a.Get(0, "value");
    if (!x) return InvalidArgumentError(fmt::format("the test '{}' takes an argument", n));
    return x;
  };
  using K = Value::Kind;
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.kind() == K::kBool;
  if (n == "true") return v.kind() == K::kBool && v.boolean();
  if (n == "false") return v.kind() == K::kBool && !v.boolean();
  if (n == "integer") return v.kind() == K::kInt;
  if (n == "float") return v.kind() == K::kFloat;
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_dict();
  if (n == "iterable") {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.kind() == K::kGenerator;
  }
  if (n == "sequence") {  // len() and __getitem__: not generators or dict views
    return v.is_string() || v.is_dict() || v.is_undefined() ||
           (v.is_list() && (v.seq() == Seq::kList || v.seq() == Seq::kTuple || v.seq() == Seq::kRange));
  }
  if (n == "callable") return v.kind() == K::kCallable;
  if (n == "escaped") return false;
  if (n == "odd" || n == "even" || n == "divisibleby") {
    if (v.is_undefined()) return Undef(v);
    if (!IsInt(v)) return UnsupportedError(fmt::format("unsupported: the test '{}' on a {}", n, v.TypeName()));
    int64_t d = 2;
    if (n == "divisibleby") {
      EK_ASSIGN_OR_RETURN(const Value* x, arg());
      if (!IsInt(*x) || x->integer() == 0) return InvalidArgumentError("divisibleby: a non-zero integer is needed");
      d = x->integer();
    }
    int64_t m = v.integer() % d;
    if (n == "odd") return m != 0;
    return m == 0;
  }
  if (n == "eq" || n == "equalto" || n == "ne") {
    EK_ASSIGN_OR_RETURN(const Value* x, arg());
    return Equal(v, *x) == (n != "ne");
  }
  if (n == "lt" || n == "lessthan" || n == "gt" || n == "greaterthan" || n == "le" || n == "ge") {
    EK_ASSIGN_OR_RETURN(const Value* x, arg());
    if (v.is_undefined()) return Undef(v);
    if (x->is_undefined()) return Undef(*x);
    if (n == "lt" || n == "lessthan") return Less(v, *x);
    if (n == "gt" || n == "greaterthan") return Less(*x, v);
    if (n == "le") {
      EK_ASSIGN_OR_RETURN(bool gt, Less(*x, v));
      return !gt;
    }
    EK_ASSIGN_OR_RETURN(bool lt, Less(v, *x));
    return !lt;
  }
  if (n == "in") {
    const Value* seq = a.Get(0, "seq");
    if (!seq) return InvalidArgumentError("the test 'in' takes a sequence");
    if (seq->is_string()) return v.is_string() && seq->str().find(v.str()) != std::string::npos;
    if (seq->is_dict()) return v.is_string() && seq->dict().Find(v.str()) != nullptr;
    if (seq->is_list()) {
      for (const Value& x : seq->list()) {
        if (Equal(v, x)) return true;
      }
      return false;
    }
    return InvalidArgumentError(fmt::format("argument of type '{}' is not iterable", seq->TypeName()));
  }
  if (n == "lower" || n == "upper") return PyIsClass(ToStr(v), n == "lower" ? "islower" : "isupper");
  if (n == "sameas") {
    EK_ASSIGN_OR_RETURN(const Value* x, arg());
    if (v.kind() != x->kind()) return false;
    if (v.is_none() || v.is_undefined()) return v.is_none();
    if (v.kind() == K::kBool) return v.boolean() == x->boolean();
    // CPython caches the ints -5..256: equal ones are the same object. Other
    // numbers' identity depends on how they were made; refuse to guess.
    if (v.kind() == K::kInt) {
      if (v.integer() >= -5 && v.integer() <= 256) return v.integer() == x->integer();
      return UnsupportedError("unsupported: 'sameas' on an int outside -5..256 (its identity is a CPython detail)");
    }
    if (v.kind() == K::kFloat) return UnsupportedError("unsupported: 'sameas' on a float");
    return v.identity() == x->identity();
  }
  if (n == "filter") return v.is_string() && KnownFilter(v.str());
  if (n == "test") return v.is_string() && KnownTest(v.str());
  return UnsupportedError(fmt::format("unsupported: the test '{}'", n));
}

// ------------------------------------------------------------------------------------------
// Globals.

Result<Value> GRange(CallArgs& a) {
  if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) {
    return InvalidArgumentError("range() takes 1 to 3 integer arguments");
  }
  for (const Value& x : a.positional) {
    if (!IsInt(x)) return InvalidArgumentError(fmt::format("'{}' object cannot be interpreted as an integer", x.TypeName()));
  }
  int64_t start = 0, stop, step = 1;
  if (a.positional.size() == 1) {
    stop = a.positional[0].integer();
  } else {
    start = a.positional[0].integer();
    stop = a.positional[1].integer();
    if (a.positional.size() == 3) step = a.positional[2].integer();
  }
  if (step == 0) return InvalidArgumentError("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (out.size() >= 100000) {
      return InvalidArgumentError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::Int(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // past INT64_MAX/MIN: past stop too
  }
  return Value::MakeList(std::move(out), Seq::kRange);
}

Status CheckNamespaceName(std::string_view name) {
  if (!name.empty() && name[0] == '_') {
    return InvalidArgumentError(fmt::format(
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'", name));
  }
  return Status::Ok();
}

Result<Dict> DictFromArgs(CallArgs& a, std::string_view fn) {
  Dict d;
  if (a.positional.size() > 1) return InvalidArgumentError(fmt::format("{}() takes at most 1 positional argument", fn));
  if (!a.positional.empty()) {
    const Value& p = a.positional[0];
    if (p.is_dict() || p.kind() == Value::Kind::kNamespace) {
      d = p.dict();
    } else if (p.is_list()) {
      for (const Value& kv : p.list()) {
        if (!kv.is_list() || kv.list().size() != 2 || !kv.list()[0].is_string()) {
          return UnsupportedError(fmt::format("unsupported: {}() from a sequence that is not (str, value) pairs", fn));
        }
        d.Set(kv.list()[0].str(), kv.list()[1]);
      }
    } else {
      return InvalidArgumentError(fmt::format("{}(): cannot convert a {} to a dict", fn, p.TypeName()));
    }
  }
  for (auto& [k, v] : a.keyword) d.Set(k, v);
  return d;
}

Result<Value> GDict(CallArgs& a) {
  EK_ASSIGN_OR_RETURN(Dict d, DictFromArgs(a, "dict"));
  return Value::MakeDict(std::move(d));
}

Result<Value> GNamespace(CallArgs& a) {
  EK_ASSIGN_OR_RETURN(Dict d, DictFromArgs(a, "namespace"));
  for (const auto& [k, v] : d.items) EK_RETURN_IF_ERROR(CheckNamespaceName(k));
  return Value::Namespace(std::move(d));
}

Result<Value> GRaise(CallArgs& a) {
  const Value* m = a.Get(0, "message");
  return FailedPreconditionError(fmt::format("the template raised an exception: {}", m ? ToStr(*m) : ""));
}

Result<Value> GStrftimeNow(CallArgs& a) {
  const Value* f = a.Get(0, "format");
  if (!f || !f->is_string()) return InvalidArgumentError("strftime_now() takes a format string");
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  time_t secs = tv.tv_sec;
  localtime_r(&secs, &tm);
  // datetime.strftime handles %f itself; the rest goes to the C library as in Python.
  std::string fmt_s = PyReplace(f->str(), "%f", fmt::format("{:06d}", static_cast<int>(tv.tv_usec)), -1);
  if (fmt_s.empty()) return Value::String("");
  std::string buf(256 + fmt_s.size() * 8, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt_s.c_str(), &tm);
  buf.resize(n);
  return Value::String(std::move(buf));
}

Result<Value> GUnsupported(std::string_view name) {
  return UnsupportedError(fmt::format("unsupported: the global {}()", name));
}

}  // namespace

// ------------------------------------------------------------------------------------------

Status CheckPrintable(const Value& v) {
  if (v.kind() == Value::Kind::kGenerator) {
    return UnsupportedError(
        "unsupported: printing a generator (what map, select, reject, selectattr, rejectattr, unique, items and "
        "reverse return; Python prints its address): add |list");
  }
  if (v.is_list() && v.seq() == Seq::kRange) return UnsupportedError("unsupported: printing a range(): add |list");
  if (v.kind() == Value::Kind::kCallable || v.kind() == Value::Kind::kLoop) {
    return UnsupportedError(fmt::format("unsupported: printing a {}", v.TypeName()));
  }
  return Status::Ok();
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(CodePoints(v.str()));
    case Value::Kind::kList: return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: return InvalidArgumentError(fmt::format("object of type '{}' has no len()", v.TypeName()));
  }
}

Result<std::shared_ptr<const List>> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList: return v.list_ref();
    case Value::Kind::kUndefined: return std::make_shared<const List>();
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
    case Value::Kind::kGenerator: return v.Consume();
    default: return InvalidArgumentError(fmt::format("'{}' object is not iterable", v.TypeName()));
  }
}

namespace {

// An item of `container`: borrowed when the container is (it lives as long).
Value Item(const Value& container, const Value& item) {
  return container.borrowed() ? Value::Borrow(item) : item;
}

// Methods that modify their object: the sandbox hides them (unsafe_undefined).
bool Mutates(std::string_view n) {
  return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "remove" || n == "sort" ||
         n == "reverse" || n == "clear" || n == "popitem" || n == "setdefault" || n == "update";
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
      if (IsDictMethod(name)) return Mutates(name) ? Value::Undefined(std::string(name)) : BoundMethod(obj, name);
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
    default: return Value::Undefined(std::string(name));
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
        DecodeAt(obj.str(), b, &len);
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
    default: return Value::Undefined();
  }
}

Result<Value> GetAttrPath(const Value& obj, std::string_view path) {
  Value v = obj;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string_view part = path.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
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
    default: return Value::Undefined();
  }
}

bool KnownFilter(std::string_view name) { return Filters().count(name) != 0; }

FilterFn FindFilter(std::string_view name) {
  auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

bool KnownTest(std::string_view n) {
  static const char* const kTests[] = {
      "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number", "string", "mapping",
      "iterable", "sequence", "callable", "escaped", "odd", "even", "divisibleby", "eq", "equalto", "ne", "lt",
      "lessthan", "gt", "greaterthan", "le", "ge", "in", "lower", "upper", "sameas", "filter", "test"};
  for (const char* t : kTests) {
    if (n == t) return true;
  }
  return false;
}

Result<Value> CallFilter(std::string_view name, const Value& operand, CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end()) return UnsupportedError(fmt::format("unsupported: the filter '{}'", name));
  return it->second(operand, args);
}

Result<bool> CallTest(std::string_view name, const Value& v, CallArgs& args) { return Test(name, v, args); }

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
