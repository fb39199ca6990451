// The filters, as jinja2 3.1 defines them (and transformers' tojson). The table that
// binds their names is in builtins.cc.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/parse.h"
#include "template/builtins_internal.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl::builtin {

// ------------------------------------------------------------------------------------------
// Filters.

namespace {

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

}  // namespace

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
  if (v.kind() == Value::Kind::kGenerator)
    return InvalidArgumentError("'generator' object is not reversible");
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

namespace {

Result<Value> CaseFilter(const Value& v, CaseOp op) {
  EK_ASSIGN_OR_RETURN(std::string r, PyCase(ToStr(v), op));
  return Str(std::move(r));
}

}  // namespace
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
    if (!s->is_list() || s->list().size() != 2 || !s->list()[0].is_string() ||
        !s->list()[1].is_string()) {
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
      uint32_t cp = DecodeUtf8At(json, i, &len);
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
    if (auto n = ParseUint64(body, static_cast<int>(base));
        n && *n <= static_cast<uint64_t>(INT64_MAX)) {
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
    if (v.integer() == std::numeric_limits<int64_t>::min())
      return InvalidArgumentError("integer overflow");
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
  if (!v.is_number())
    return InvalidArgumentError(fmt::format("round: a number is needed, not {}", v.TypeName()));
  if (method == "common") {
    if (IsInt(v)) return Value::Int(v.integer());  // Python's round(int, n) with n >= 0
    // Python rounds the exact binary value half-to-even; so does printf.
    if (precision < 0 || precision > 300)
      return UnsupportedError("unsupported: round() precision outside 0..300");
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
      ind.assign(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(w->integer(), 4096))),
                 ' ');
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
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Str(std::move(out));
}

Result<Value> FSafe(const Value& v, CallArgs&) { return v; }

Result<Value> FAttr(const Value& v, CallArgs& a) {
  EK_ASSIGN_OR_RETURN(std::string_view name, StrArg(a, 0, "name", "attr"));
  if (v.is_dict())
    return IsDictMethod(name) ? BoundMethod(v, name) : Value::Undefined(std::string(name));
  return GetAttr(v, name);
}

namespace {

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

}  // namespace

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
  if (by != "key" && by != "value")
    return InvalidArgumentError("You can only sort by either 'key' or 'value'");
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

namespace {

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

}  // namespace
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
      if (__builtin_add_overflow(acc.integer(), k.integer(), &r))
        return InvalidArgumentError("integer overflow");
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
  if (!a.positional[0].is_string())
    return InvalidArgumentError("map: the filter name must be a string");
  std::string name = a.positional[0].str();
  if (!KnownFilter(name))
    return UnsupportedError(fmt::format("unsupported: the filter '{}'", name));
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const Value& x : *items) {
    EK_ASSIGN_OR_RETURN(Value r, CallFilter(name, x, rest));
    out.push_back(std::move(r));
  }
  return Value::Generator(std::move(out));
}

namespace {

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
    if (!a.positional[next].is_string())
      return InvalidArgumentError("the test name must be a string");
    test = a.positional[next].str();
    if (!KnownTest(test)) return UnsupportedError(fmt::format("unsupported: the test '{}'", test));
    ++next;
  }
  CallArgs rest;
  rest.positional.assign(
      a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(next, a.positional.size())),
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

}  // namespace
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
    uint32_t cp = DecodeUtf8At(s, i, &len);
    i += len;
    bool w = cp == '_' || (cp < 0x80 ? std::isalnum(static_cast<int>(cp)) != 0 : !IsPySpace(cp));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

}  // namespace ek::tmpl::builtin
