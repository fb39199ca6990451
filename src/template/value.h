// Values of the chat-template engine: Python's types as Jinja templates see
// them (None, bool, int, float, str, list, dict), plus Jinja's Undefined,
// namespace() objects, macros and callables. Strings, lists and dicts are
// shared by reference, as in Python; lists are immutable (transformers renders
// templates in Jinja's ImmutableSandboxedEnvironment, which refuses append).
//
// Formatting follows Python exactly where output depends on it: str() of a
// float is its shortest round-trip repr ("1.0", "1e-05", "1e+16"), str() of a
// list or dict is its repr, json is json.dumps(ensure_ascii=False).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ek::tmpl {

class Value;
using List = std::vector<Value>;

// An insertion-ordered str -> Value map (templates and JSON only use str keys).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  void Set(std::string key, Value v);
};

struct CallArgs;
using Function = std::function<Result<Value>(CallArgs& args)>;

// The state behind a for loop's `loop` variable (loop.index, loop.last, ...).
struct LoopState {
  std::shared_ptr<const List> items;  // what the loop iterates, after its `if` filter
  size_t index0 = 0;
};

// What a kList stands for in Python: it decides how the value prints
// ("[1]", "(1,)", "dict_items([...])"), compares and which operations apply.
enum class Seq : uint8_t { kList, kTuple, kRange, kDictKeys, kDictValues, kDictItems };

class Value {
 public:
  // kGenerator: a one-shot iterator (what jinja2's map, select, reject,
  // selectattr, rejectattr, unique, items filters and |reverse of a list
  // return): always true, no len(), iterating it consumes it.
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
    kLoop,
    kGenerator
  };

  Value() = default;  // Undefined
  static Value Undefined(std::string name = "");
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value MakeList(List items, Seq seq = Seq::kList);
  static Value ListRef(std::shared_ptr<const List> items, Seq seq = Seq::kList);
  static Value MakeTuple(List items) { return MakeList(std::move(items), Seq::kTuple); }
  static Value MakeDict(Dict d);
  static Value Namespace(Dict attrs);
  static Value Callable(std::string name, Function fn);
  static Value Loop(std::shared_ptr<LoopState> state);
  static Value Generator(List items);
  // A copy of `v` that does not own what it refers to: no reference count is
  // touched, and it is valid only while `v` lives. The interpreter hands out
  // borrowed values for the template's constants and the render context, which
  // outlive every value a render creates.
  static Value Borrow(const Value& v) {
    Value b;
    b.kind_ = v.kind_;
    b.seq_ = v.seq_;
    b.b_ = v.b_;
    b.i_ = v.i_;
    // The aliasing constructor with an empty owner: a pointer without a control block.
    if (v.p_) b.p_ = std::shared_ptr<void>(std::shared_ptr<void>(), v.p_.get());
    return b;
  }

  Kind kind() const { return kind_; }
  Seq seq() const { return seq_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  // Whether this value refers to something it does not own (see Borrow).
  bool borrowed() const { return p_ && p_.use_count() == 0; }

  bool boolean() const { return b_; }
  int64_t integer() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double number() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(integer()); }
  const std::string& str() const { return *static_cast<const std::string*>(p_.get()); }
  const List& list() const { return *static_cast<const List*>(p_.get()); }
  const Dict& dict() const { return *static_cast<const Dict*>(p_.get()); }
  Dict& mutable_dict() const {
    return *static_cast<Dict*>(p_.get());
  }  // namespaces: {% set ns.x = ... %}
  const Function& function() const;
  const LoopState& loop() const { return *static_cast<const LoopState*>(p_.get()); }
  // The list, sharing ownership with this value (or borrowing when it borrows).
  std::shared_ptr<const List> list_ref() const { return {p_, static_cast<const List*>(p_.get())}; }
  // A generator's items not yet consumed; marks them consumed.
  std::shared_ptr<const List> Consume() const;
  // A generator's next item (consumed), or false when it is exhausted.
  bool Next(Value* item) const;
  // The identity of what this value refers to (Python's `is`).
  const void* identity() const { return p_.get(); }
  const std::string& name() const;  // undefined's or callable's name

  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // "NoneType", "str", ... for messages.
  std::string_view TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  Seq seq_ = Seq::kList;
  bool b_ = false;
  union {
    int64_t i_ = 0;
    double f_;
  };
  // The string, list, dict, callable, loop or generator state; an undefined
  // value's name (or null).
  std::shared_ptr<void> p_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword `name`, or positional `index`, or nullptr.
  const Value* Get(size_t index, std::string_view name) const;
};

// Python's str(v): what {{ v }} prints. Undefined prints as "".
std::string ToStr(const Value& v);
void AppendStr(std::string* out, const Value& v);
// Python's repr(v) (strings quoted the way Python quotes them).
std::string Repr(const Value& v);
// Python's repr of a float.
std::string FloatRepr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...)
// as transformers' tojson filter calls it. indent < 0: None.
Result<std::string> ToJson(const Value& v, int indent, bool sort_keys, std::string_view item_sep,
                           std::string_view key_sep);

// Python ==.
bool Equal(const Value& a, const Value& b);
// Python <, for numbers, strings and lists; an error for other types.
Result<bool> Less(const Value& a, const Value& b);

// Strings are UTF-8; Python counts and slices code points.
size_t CodePoints(std::string_view s);
// Byte offset of code point `index` (index may equal the count: the end).
size_t ByteOffsetOfCodePoint(std::string_view s, size_t index);

}  // namespace ek::tmpl
