// One file over 600 lines: Value and Python's semantics on it (repr, str, ==, <) agree here.
#include "template/value.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::Find(std::string_view key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value v) {
  if (Value* slot = Find(key)) {
    *slot = std::move(v);
  } else {
    items.emplace_back(std::move(key), std::move(v));
  }
}

namespace {

struct CallableData {
  std::string name;
  Function fn;
};

struct GeneratorData {
  std::shared_ptr<const List> items;
  size_t pos = 0;  // items before it were consumed
};

const std::string kNoName;

}  // namespace

Value Value::Undefined(std::string name) {
  Value v;
  if (!name.empty()) v.p_ = std::make_shared<std::string>(std::move(name));
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::MakeList(List items, Seq seq) {
  Value v;
  v.kind_ = Kind::kList;
  v.seq_ = seq;
  v.p_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::ListRef(std::shared_ptr<const List> items, Seq seq) {
  Value v;
  v.kind_ = Kind::kList;
  v.seq_ = seq;
  v.p_ = std::const_pointer_cast<List>(std::move(items));
  return v;
}
Value Value::Loop(std::shared_ptr<LoopState> state) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.p_ = std::move(state);
  return v;
}
Value Value::MakeDict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.p_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::Namespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.p_ = std::make_shared<Dict>(std::move(attrs));
  return v;
}
Value Value::Callable(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.p_ = std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)});
  return v;
}
Value Value::Generator(List items) {
  Value v;
  v.kind_ = Kind::kGenerator;
  v.p_ = std::make_shared<GeneratorData>(
      GeneratorData{std::make_shared<const List>(std::move(items)), 0});
  return v;
}

const Function& Value::function() const { return static_cast<const CallableData*>(p_.get())->fn; }

const std::string& Value::name() const {
  if (!p_) return kNoName;
  if (kind_ == Kind::kCallable) return static_cast<const CallableData*>(p_.get())->name;
  if (kind_ == Kind::kUndefined || kind_ == Kind::kString)
    return *static_cast<const std::string*>(p_.get());
  return kNoName;
}

std::shared_ptr<const List> Value::Consume() const {
  auto* g = static_cast<GeneratorData*>(p_.get());
  std::shared_ptr<const List> rest;
  if (g->pos == 0) {
    rest = g->items;
  } else {
    rest = std::make_shared<const List>(g->items->begin() + static_cast<std::ptrdiff_t>(g->pos),
                                        g->items->end());
  }
  g->pos = g->items->size();
  return rest;
}

bool Value::Next(Value* item) const {
  auto* g = static_cast<GeneratorData*>(p_.get());
  if (g->pos >= g->items->size()) return false;
  *item = (*g->items)[g->pos++];
  return true;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !list().empty();
    case Kind::kDict:
      return !dict().items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
    case Kind::kLoop:
    case Kind::kGenerator:
      return true;
  }
  return false;
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      switch (seq_) {
        case Seq::kList:
          return "list";
        case Seq::kTuple:
          return "tuple";
        case Seq::kRange:
          return "range";
        case Seq::kDictKeys:
          return "dict_keys";
        case Seq::kDictValues:
          return "dict_values";
        case Seq::kDictItems:
          return "dict_items";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
    case Kind::kGenerator:
      return "generator";
  }
  return "?";
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest round-trip digits, then Python's repr layout: fixed for
  // 1e-4 <= |d| < 1e16, else scientific with at least two exponent digits.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  // Python's repr is fixed for -4 <= exponent < 16: 0.0001 -> '0.0001', 0.00001 -> '1e-05'.
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits +
            std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
            digits.substr(static_cast<size_t>(exp + 1));
    }
    return neg ? "-" + out : out;
  }
  out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  return neg ? "-" + out : out;
}

namespace {

std::string StrRepr(std::string_view s) { return PyStrRepr(s); }

void AppendRepr(std::string* out, const Value& v);

// json.dumps(ensure_ascii=False) escapes, one table entry a byte: its escape's
// length and text (a byte that needs none is itself, length 1). Both loops below
// index the table and never branch on the byte, so a megabyte string (repeated
// tojson doubles one, fuzz/regressions/template) costs a table walk, not a
// compare chain a byte: under the fuzzer's instrumentation that was seconds.
struct JsonEscape {
  char text[8];
  uint8_t len;
};
constexpr std::array<JsonEscape, 256> MakeJsonEscapes() {
  std::array<JsonEscape, 256> t{};
  constexpr char kHex[] = "0123456789abcdef";
  for (int c = 0; c < 256; ++c) {
    JsonEscape& e = t[c];
    auto two = [&e](char x) {
      e.text[0] = '\\';
      e.text[1] = x;
      e.len = 2;
    };
    switch (c) {
      case '"':
        two('"');
        break;
      case '\\':
        two('\\');
        break;
      case '\n':
        two('n');
        break;
      case '\r':
        two('r');
        break;
      case '\t':
        two('t');
        break;
      case '\b':
        two('b');
        break;
      case '\f':
        two('f');
        break;
      default:
        if (c < 0x20) {
          const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          for (int k = 0; k < 6; ++k) e.text[k] = u[k];
          e.len = 6;
        } else {
          e.text[0] = static_cast<char>(c);
          e.len = 1;
        }
    }
  }
  return t;
}
constexpr std::array<JsonEscape, 256> kJsonEscapes = MakeJsonEscapes();

// The length of `s` as a JSON string literal, quotes included.
size_t JsonStringSize(std::string_view s) {
  size_t n = 2;
  for (unsigned char c : s) n += kJsonEscapes[c].len;
  return n;
}

// `n` is JsonStringSize(s), which the caller has already measured against the limit.
void AppendJsonString(std::string* out, std::string_view s, size_t n) {
  size_t at = out->size();
  out->resize(at + n + 8);  // room for the last entry's whole 8-byte copy
  char* p = out->data() + at;
  *p++ = '"';
  for (unsigned char c : s) {
    const JsonEscape& e = kJsonEscapes[c];
    std::memcpy(p, e.text, 8);
    p += e.len;
  }
  *p = '"';
  out->resize(at + n);
}

Status AppendJson(std::string* out, const Value& v, int indent, int depth, bool sort_keys,
                  std::string_view item_sep, std::string_view key_sep) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return Status::Ok();
    case Value::Kind::kBool:
      *out += v.boolean() ? "true" : "false";
      return Status::Ok();
    case Value::Kind::kInt:
      *out += std::to_string(v.integer());
      return Status::Ok();
    case Value::Kind::kFloat: {
      double d = v.number();
      *out += std::isnan(d)   ? "NaN"
              : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                              : FloatRepr(d);
      return Status::Ok();
    }
    case Value::Kind::kString: {
      // Escaping can double a string; repeated tojson would grow it without
      // bound, so the size is known before anything is written.
      size_t size = JsonStringSize(v.str());
      size_t n = out->size() + size;
      if (n > kMaxStringBytes) return TooLarge(n, "string");
      AppendJsonString(out, v.str(), size);
      return Status::Ok();
    }
    case Value::Kind::kList: {
      if (v.seq() != Seq::kList && v.seq() != Seq::kTuple) {
        return InvalidArgumentError(
            fmt::format("Object of type {} is not JSON serializable", v.TypeName()));
      }
      if (v.list().empty()) {
        *out += "[]";
        return Status::Ok();
      }
      out->push_back('[');
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (out->size() > kMaxStringBytes) return TooLarge(out->size(), "string");
        if (i) *out += item_sep;
        newline(depth + 1);
        EK_RETURN_IF_ERROR(
            AppendJson(out, v.list()[i], indent, depth + 1, sort_keys, item_sep, key_sep));
      }
      newline(depth);
      out->push_back(']');
      return Status::Ok();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      if (v.kind() == Value::Kind::kNamespace) {
        return InvalidArgumentError("Object of type Namespace is not JSON serializable");
      }
      if (v.dict().items.empty()) {
        *out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (out->size() > kMaxStringBytes) return TooLarge(out->size(), "string");
        if (i) *out += item_sep;
        newline(depth + 1);
        AppendJsonString(out, items[i]->first, JsonStringSize(items[i]->first));
        *out += key_sep;
        EK_RETURN_IF_ERROR(
            AppendJson(out, items[i]->second, indent, depth + 1, sort_keys, item_sep, key_sep));
      }
      newline(depth);
      out->push_back('}');
      return Status::Ok();
    }
    case Value::Kind::kUndefined:
      return InvalidArgumentError(
          fmt::format("Object of type Undefined is not JSON serializable{}",
                      v.name().empty() ? "" : " ('" + v.name() + "' is undefined)"));
    case Value::Kind::kCallable:
      return InvalidArgumentError("Object of type function is not JSON serializable");
    case Value::Kind::kLoop:
      return InvalidArgumentError("Object of type LoopContext is not JSON serializable");
    case Value::Kind::kGenerator:
      return InvalidArgumentError("Object of type generator is not JSON serializable");
  }
  return Status::Ok();
}

// A lower bound of len(repr(v)), counted only until it passes `cap`: a repr is
// never shorter than its strings' bytes with two quotes each and ", " between
// items (a list of 2**20 references to one 1 MiB string passes 16 MiB at its
// seventeenth item, and the count stops there).
size_t ReprAtLeast(const Value& v, size_t cap) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return v.str().size() + 2;
    case Value::Kind::kList: {
      size_t n = 2;
      for (const Value& x : v.list()) {
        if (n > cap) break;
        n += 2 + ReprAtLeast(x, cap - n);
      }
      return n;
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      size_t n = 2;
      for (const auto& [key, x] : v.dict().items) {
        if (n > cap) break;
        n += 6 + key.size() + ReprAtLeast(x, cap - n);
      }
      return n;
    }
    default:
      return 1;
  }
}

// Python's repr of lists and dicts. Stops early past kMaxStringBytes; the
// caller's size check then reports it (render.cc). When the lower bound above
// already passes the limit, strings go in raw, unescaped and in single quotes:
// the text is then never shorter than it would have been, the caller refuses it
// just the same, and megabytes are not escaped only to be refused.
class ReprWriter {
 public:
  ReprWriter(std::string* out, const Value& v) : out_(out) {
    size_t budget = kMaxStringBytes - std::min(out->size(), kMaxStringBytes);
    raw_ = ReprAtLeast(v, budget) > budget;
  }

  void Dict(const ek::tmpl::Dict& d) {
    out_->push_back('{');
    for (size_t i = 0; i < d.items.size() && out_->size() <= kMaxStringBytes; ++i) {
      if (i) *out_ += ", ";
      String(d.items[i].first);
      *out_ += ": ";
      Any(d.items[i].second);
    }
    out_->push_back('}');
  }

  void Any(const Value& v) {
    if (out_->size() > kMaxStringBytes) return;
    switch (v.kind()) {
      case Value::Kind::kString:
        String(v.str());
        return;
      case Value::Kind::kList:
        List(v);
        return;
      case Value::Kind::kDict:
        Dict(v.dict());
        return;
      default:
        AppendStr(out_, v);
    }
  }

 private:
  void String(const std::string& s) {
    if (!raw_) {
      *out_ += StrRepr(s);
      return;
    }
    out_->push_back('\'');
    out_->append(s);
    out_->push_back('\'');
  }

  void List(const Value& v) {
    const ek::tmpl::List& l = v.list();
    const char* open = "[";
    const char* close = "]";
    switch (v.seq()) {
      case Seq::kList:
        break;
      case Seq::kTuple:
        open = "(";
        close = l.size() == 1 ? ",)" : ")";
        break;
      case Seq::kRange:
        open = "<range ";
        close = ">";
        break;  // refused before printing
      case Seq::kDictKeys:
        open = "dict_keys([";
        close = "])";
        break;
      case Seq::kDictValues:
        open = "dict_values([";
        close = "])";
        break;
      case Seq::kDictItems:
        open = "dict_items([";
        close = "])";
        break;
    }
    *out_ += open;
    for (size_t i = 0; i < l.size() && out_->size() <= kMaxStringBytes; ++i) {
      if (i) *out_ += ", ";
      Any(l[i]);
    }
    *out_ += close;
  }

  std::string* out_;
  bool raw_;
};

void AppendRepr(std::string* out, const Value& v) { ReprWriter(out, v).Any(v); }

}  // namespace

void AppendStr(std::string* out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      *out += "None";
      return;
    case Value::Kind::kBool:
      *out += v.boolean() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.integer());
      return;
    case Value::Kind::kFloat:
      *out += FloatRepr(v.number());
      return;
    case Value::Kind::kString:
      *out += v.str();
      return;
    case Value::Kind::kList:
    case Value::Kind::kDict:
      AppendRepr(out, v);
      return;
    case Value::Kind::kNamespace: {  // jinja2's Namespace.__repr__
      *out += "<Namespace ";
      ReprWriter(out, v).Dict(v.dict());
      *out += ">";
      return;
    }
    case Value::Kind::kCallable:
      *out += "<function " + v.name() + ">";
      return;
    case Value::Kind::kLoop:
      *out += "<LoopContext>";
      return;
    case Value::Kind::kGenerator:
      *out += "<generator object>";
      return;  // refused before printing
  }
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendStr(&out, v);
  return out;
}

std::string Repr(const Value& v) {
  std::string out;
  if (v.is_undefined()) return "Undefined";
  AppendRepr(&out, v);
  return out;
}

Result<std::string> ToJson(const Value& v, int indent, bool sort_keys, std::string_view item_sep,
                           std::string_view key_sep) {
  std::string out;
  EK_RETURN_IF_ERROR(AppendJson(&out, v, indent, 0, sort_keys, item_sep, key_sep));
  if (out.size() > kMaxStringBytes) return TooLarge(out.size(), "string");
  return out;
}

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.seq() != b.seq()) return false;
      if (a.seq() == Seq::kDictValues)
        return a.identity() == b.identity();  // Python compares views by identity
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().Find(k);
        if (!o || !Equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
    case Value::Kind::kGenerator:
    case Value::Kind::kCallable:
    case Value::Kind::kLoop:
      return a.identity() == b.identity();
    default:
      return false;
  }
}

Result<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return a.number() < b.number();
    return a.integer() < b.integer();
  }
  if (a.is_string() && b.is_string()) {
    // Python compares code points; UTF-8 byte order is the same order.
    return a.str() < b.str();
  }
  if (a.is_list() && b.is_list() && a.seq() == b.seq() &&
      (a.seq() == Seq::kList || a.seq() == Seq::kTuple)) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return InvalidArgumentError(fmt::format("'<' not supported between instances of '{}' and '{}'",
                                          a.TypeName(), b.TypeName()));
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

size_t ByteOffsetOfCodePoint(std::string_view s, size_t index) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == index) return i;
      ++n;
    }
  }
  return s.size();
}

}  // namespace ek::tmpl
