// The tests (`x is defined`, `n is divisibleby 3`), as jinja2 3.1 defines them.
#include <fmt/core.h>

#include "template/builtins_internal.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl::builtin {

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
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() ||
           v.kind() == K::kGenerator;
  }
  if (n == "sequence") {  // len() and __getitem__: not generators or dict views
    return v.is_string() || v.is_dict() || v.is_undefined() ||
           (v.is_list() &&
            (v.seq() == Seq::kList || v.seq() == Seq::kTuple || v.seq() == Seq::kRange));
  }
  if (n == "callable") return v.kind() == K::kCallable;
  if (n == "escaped") return false;
  if (n == "odd" || n == "even" || n == "divisibleby") {
    if (v.is_undefined()) return Undef(v);
    if (!IsInt(v))
      return UnsupportedError(fmt::format("unsupported: the test '{}' on a {}", n, v.TypeName()));
    int64_t d = 2;
    if (n == "divisibleby") {
      EK_ASSIGN_OR_RETURN(const Value* x, arg());
      if (!IsInt(*x) || x->integer() == 0)
        return InvalidArgumentError("divisibleby: a non-zero integer is needed");
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
    return InvalidArgumentError(
        fmt::format("argument of type '{}' is not iterable", seq->TypeName()));
  }
  if (n == "lower" || n == "upper")
    return PyIsClass(ToStr(v), n == "lower" ? "islower" : "isupper");
  if (n == "sameas") {
    EK_ASSIGN_OR_RETURN(const Value* x, arg());
    if (v.kind() != x->kind()) return false;
    if (v.is_none() || v.is_undefined()) return v.is_none();
    if (v.kind() == K::kBool) return v.boolean() == x->boolean();
    // CPython caches the ints -5..256: equal ones are the same object. Other
    // numbers' identity depends on how they were made; refuse to guess.
    if (v.kind() == K::kInt) {
      if (v.integer() >= -5 && v.integer() <= 256) return v.integer() == x->integer();
      return UnsupportedError(
          "unsupported: 'sameas' on an int outside -5..256 (its identity is a CPython detail)");
    }
    if (v.kind() == K::kFloat) return UnsupportedError("unsupported: 'sameas' on a float");
    return v.identity() == x->identity();
  }
  if (n == "filter") return v.is_string() && KnownFilter(v.str());
  if (n == "test") return v.is_string() && KnownTest(v.str());
  return UnsupportedError(fmt::format("unsupported: the test '{}'", n));
}

}  // namespace ek::tmpl::builtin
