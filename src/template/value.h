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

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable, kLoop };

  Value() = default;  // Undefined
  static Value Undefined(std::string name = "");
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value StringRef(std::shared_ptr<const std::string> s);
  static Value MakeList(List items);
  static Value ListRef(std::shared_ptr<const List> items);
  static Value MakeDict(Dict d);
  static Value Namespace(Dict attrs);
  static Value Callable(std::string name, Function fn);
  static Value Loop(std::shared_ptr<LoopState> state);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool boolean() const { return b_; }
  int64_t integer() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double number() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(integer()); }
  const std::string& str() const { return *s_; }
  const std::shared_ptr<const std::string>& str_ref() const { return s_; }
  const List& list() const { return *l_; }
  const Dict& dict() const { return *d_; }
  Dict& mutable_dict() const { return *d_; }  // namespaces: {% set ns.x = ... %}
  const Function& function() const { return *fn_; }
  const LoopState& loop() const { return *loop_; }
  const std::shared_ptr<const List>& list_ref() const { return l_; }
  const std::string& name() const { return *s_; }  // undefined's or callable's name

  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // "NoneType", "str", ... for messages.
  std::string_view TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> l_;
  std::shared_ptr<Dict> d_;
  std::shared_ptr<Function> fn_;
  std::shared_ptr<LoopState> loop_;
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
