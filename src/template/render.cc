// One file over 600 lines: one interpreter class whose statements and expressions recurse.
// The interpreter: walks the parsed template with jinja2's scoping rules.
//  - `for` bodies, macro bodies, set/filter blocks and {% generation %} bodies
//    get their own scope; a `set` inside one is not seen outside it (and a
//    loop body starts every iteration from the outer values), which is why
//    templates use namespace() to carry state out of loops.
//  - `if` does not open a scope.
//  - Names resolve innermost-first, then the render context, then globals;
//    an unknown name is Undefined, which prints as "" and is false, and any
//    attribute or arithmetic on it is an error (jinja2's default Undefined).
// Output goes to one string; {% generation %} records the byte range it adds,
// measured against the top-level output as transformers measures it.
#include <fmt/core.h>

#include <cmath>
#include <limits>

#include "template/internal.h"
#include "template/parser.h"
#include "template/pystr.h"
#include "template/template.h"

namespace ek::tmpl {

namespace {

struct Scope : std::enable_shared_from_this<Scope> {
  std::shared_ptr<Scope> parent;
  const Dict* context = nullptr;  // the render context, on the root scope
  std::vector<std::pair<std::string, Value>> vars;

  // The variable `n`, or nullptr; *from_context is set when it is one of the
  // render context's (which outlive the render: callers may borrow them).
  const Value* Find(std::string_view n, bool* from_context = nullptr) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars) {
        if (k == n) return &v;
      }
      if (s->context) {
        if (const Value* v = s->context->Find(n)) {
          if (from_context) *from_context = true;
          return v;
        }
      }
    }
    return nullptr;
  }
  void Set(std::string_view n, Value v) {
    for (auto& kv : vars) {
      if (kv.first == n) {
        kv.second = std::move(v);
        return;
      }
    }
    vars.emplace_back(std::string(n), std::move(v));
  }
};

std::shared_ptr<Scope> Child(Scope* parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent->shared_from_this();
  return s;
}

enum class Flow { kNormal, kBreak, kContinue };

constexpr int kMaxCallDepth = 100;

class Interp {
 public:
  Interp(const std::string& name, std::string* root, std::vector<std::pair<size_t, size_t>>* gen)
      : name_(name), root_(root), out_(root), gen_(gen) {}

  Status ExecBody(const Body& body, Scope* scope) {
    for (const auto& s : body) {
      EK_RETURN_IF_ERROR(Exec(*s, scope));
      if (out_->size() > kMaxStringBytes)
        return Err(s->line, TooLarge(out_->size(), "output").message());
      if (flow_ != Flow::kNormal) return Status::Ok();
    }
    return Status::Ok();
  }

  // Renders `body` in a child scope into a string of its own.
  Result<std::string> Capture(const Body& body, Scope* scope) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    auto child = Child(scope);
    Status st = ExecBody(body, child.get());
    out_ = saved;
    EK_RETURN_IF_ERROR(st);
    return buf;
  }

 private:
  Status Err(int line, std::string_view msg) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", name_, line, msg));
  }
  // Adds the location to an error from a builtin (errors from nested
  // evaluation already carry one).
  Status Locate(int line, const Status& st) const {
    const std::string& m = st.message();
    if (m.size() > name_.size() && m.compare(0, name_.size(), name_) == 0 && m[name_.size()] == ':')
      return st;
    return Status(st.code(), fmt::format("{}:{}: {}", name_, line, m));
  }

  Status Exec(const Stmt& s, Scope* scope) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out_->append(s.text);
        return Status::Ok();
      case Stmt::Kind::kPrint: {
        if (s.expr->kind == Expr::Kind::kName) {  // printed in place
          if (const Value* v = scope->Find(s.expr->name)) {
            if (Status st = CheckPrintable(*v); !st.ok()) return Locate(s.line, st);
            AppendStr(out_, *v);
            return Status::Ok();
          }
        }
        Value v;
        if (s.expr->kind == Expr::Kind::kBinary && s.expr->name == "+") {
          EK_ASSIGN_OR_RETURN(v,
                              EvalPlus(*s.expr, scope, out_));  // strings go straight to the output
        } else {
          EK_ASSIGN_OR_RETURN(v, Eval(*s.expr, scope));
        }
        if (Status st = CheckPrintable(v); !st.ok()) return Locate(s.line, st);
        AppendStr(out_, v);
        return Status::Ok();
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (cond) {
            EK_ASSIGN_OR_RETURN(Value c, Eval(*cond, scope));
            if (!c.Truthy()) continue;
          }
          return ExecBody(body, scope);
        }
        return Status::Ok();
      case Stmt::Kind::kFor:
        return ExecFor(s, scope);
      case Stmt::Kind::kSet: {
        EK_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
        if (!s.attr.empty()) return SetAttr(s, scope, std::move(v));
        return Assign(s.targets, std::move(v), scope, s.line);
      }
      case Stmt::Kind::kSetBlock: {
        EK_ASSIGN_OR_RETURN(std::string text, Capture(s.body, scope));
        Value v = Value::String(std::move(text));
        for (const auto& f : s.filters) {
          EK_ASSIGN_OR_RETURN(v, ApplyFilter(*f, v, scope));
        }
        scope->Set(s.targets[0], std::move(v));
        return Status::Ok();
      }
      case Stmt::Kind::kMacro: {
        std::weak_ptr<Scope> def = scope->shared_from_this();
        const Stmt* stmt = &s;
        scope->Set(s.name,
                   Value::Callable(s.name, [this, stmt, def](CallArgs& args) -> Result<Value> {
                     return CallMacro(*stmt, def, args);
                   }));
        return Status::Ok();
      }
      case Stmt::Kind::kFilterBlock: {
        EK_ASSIGN_OR_RETURN(std::string text, Capture(s.body, scope));
        Value v = Value::String(std::move(text));
        for (const auto& f : s.filters) {
          EK_ASSIGN_OR_RETURN(v, ApplyFilter(*f, v, scope));
        }
        AppendStr(out_, v);
        return Status::Ok();
      }
      case Stmt::Kind::kGeneration: {
        // transformers: start = len of what the template has yielded so far,
        // end = start + len(the block's output).
        size_t before = root_->size();
        EK_ASSIGN_OR_RETURN(std::string text, Capture(s.body, scope));
        if (out_ == root_) before = root_->size();
        gen_->emplace_back(before, before + text.size());
        out_->append(text);
        return Status::Ok();
      }
      case Stmt::Kind::kBreak:
        flow_ = Flow::kBreak;
        return Status::Ok();
      case Stmt::Kind::kContinue:
        flow_ = Flow::kContinue;
        return Status::Ok();
    }
    return Status::Ok();
  }

  Status Assign(const std::vector<std::string>& targets, Value v, Scope* scope, int line) {
    if (targets.size() == 1) {
      scope->Set(targets[0], std::move(v));
      return Status::Ok();
    }
    auto items = Iterate(v);
    if (!items.ok()) return Locate(line, items.status());
    const List& l = **items;
    if (l.size() != targets.size()) {
      return Err(line,
                 fmt::format("cannot unpack {} values into {} names", l.size(), targets.size()));
    }
    for (size_t i = 0; i < l.size(); ++i) scope->Set(targets[i], l[i]);
    return Status::Ok();
  }

  Status SetAttr(const Stmt& s, Scope* scope, Value v) {
    const Value* ns = scope->Find(s.targets[0]);
    if (!ns || ns->kind() != Value::Kind::kNamespace) {
      return Err(s.line, "cannot assign attribute on non-namespace object");
    }
    if (!s.attr.empty() && s.attr[0] == '_') {
      return Err(
          s.line,
          fmt::format("Chat templates cannot store underscore-prefixed attributes on a namespace, "
                      "but got '{}'",
                      s.attr));
    }
    if (Status st = CheckStorable(v); !st.ok()) return Locate(s.line, st);
    ns->mutable_dict().Set(s.attr, std::move(v));
    return Status::Ok();
  }

  // Nested loops over range(100000) would run for days: the loop bodies of
  // one render are bounded (kMaxLoopIterations, fuzz/README.md).
  Status CountIteration(int line) {
    if (++iterations_ > kMaxLoopIterations) {
      return Err(line,
                 fmt::format("more than {} loop iterations in one render", kMaxLoopIterations));
    }
    return Status::Ok();
  }

  // What a namespace attribute may hold: values at most kMaxValueDepth deep
  // (a loop of `set ns.l = [ns.l]` otherwise nests lists 100,000 deep, and
  // printing, comparing or freeing them overflowed the stack) and no
  // namespace (ns.self = ns is a reference cycle: never freed, printed
  // forever). No chat template stores either.
  static Status CheckStorable(const Value& v, int depth = 0) {
    if (depth > kMaxValueDepth) {
      return InvalidArgumentError(
          fmt::format("a value nested deeper than {} levels", kMaxValueDepth));
    }
    switch (v.kind()) {
      case Value::Kind::kNamespace:
      case Value::Kind::kLoop:
        return InvalidArgumentError("a namespace attribute cannot hold a namespace or loop");
      case Value::Kind::kList:
        for (const Value& x : v.list()) EK_RETURN_IF_ERROR(CheckStorable(x, depth + 1));
        return Status::Ok();
      case Value::Kind::kDict:
        for (const auto& [k, x] : v.dict().items) EK_RETURN_IF_ERROR(CheckStorable(x, depth + 1));
        return Status::Ok();
      default:
        return Status::Ok();
    }
  }

  Status ExecFor(const Stmt& s, Scope* scope) {
    EK_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr, scope));
    auto it = Iterate(seq);
    if (!it.ok()) return Locate(s.line, it.status());
    std::shared_ptr<const List> items = std::move(*it);
    // Items of a list the context or the template holds are borrowed, not copied.
    bool borrow = items.use_count() == 0;
    auto item_of = [borrow](const Value& x) { return borrow ? Value::Borrow(x) : x; };
    auto body_scope = Child(scope);
    if (s.filter) {
      auto kept = std::make_shared<List>();
      for (const Value& item : *items) {
        EK_RETURN_IF_ERROR(CountIteration(s.line));
        body_scope->vars.clear();
        EK_RETURN_IF_ERROR(Assign(s.targets, item_of(item), body_scope.get(), s.line));
        EK_ASSIGN_OR_RETURN(Value c, Eval(*s.filter, body_scope.get()));
        if (c.Truthy()) kept->push_back(item_of(item));
      }
      items = std::move(kept);
    }
    if (items->empty()) {
      if (!s.else_body.empty()) {
        auto else_scope = Child(scope);
        return ExecBody(s.else_body, else_scope.get());
      }
      return Status::Ok();
    }
    auto state = std::make_shared<LoopState>();
    state->items = items;
    Value loop = Value::Loop(state);
    for (size_t i = 0; i < items->size(); ++i) {
      EK_RETURN_IF_ERROR(CountIteration(s.line));
      if (body_scope.use_count() > 1) body_scope = Child(scope);  // a macro kept the last one
      body_scope->vars.clear();
      state->index0 = i;
      EK_RETURN_IF_ERROR(Assign(s.targets, item_of((*items)[i]), body_scope.get(), s.line));
      body_scope->Set("loop", loop);
      EK_RETURN_IF_ERROR(ExecBody(s.body, body_scope.get()));
      if (flow_ == Flow::kBreak) {
        flow_ = Flow::kNormal;
        break;
      }
      flow_ = Flow::kNormal;
    }
    return Status::Ok();
  }

  Result<Value> CallMacro(const Stmt& m, const std::weak_ptr<Scope>& def, CallArgs& args) {
    auto parent = def.lock();
    if (!parent) return Err(m.line, fmt::format("macro '{}' called after its scope ended", m.name));
    if (++depth_ > kMaxCallDepth) {
      --depth_;
      return Err(m.line,
                 fmt::format("macro '{}': recursion deeper than {}", m.name, kMaxCallDepth));
    }
    struct Guard {
      int* d;
      ~Guard() { --*d; }
    } guard{&depth_};
    if (args.positional.size() > m.params.size()) {
      return Err(m.line, fmt::format("macro '{}' takes not more than {} argument(s)", m.name,
                                     m.params.size()));
    }
    auto scope = Child(parent.get());
    size_t first_default = m.params.size() - m.defaults.size();
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Value* given = nullptr;
      if (i < args.positional.size()) {
        given = &args.positional[i];
      } else {
        for (const auto& [k, v] : args.keyword) {
          if (k == m.params[i]) given = &v;
        }
      }
      if (given) {
        scope->Set(m.params[i], *given);
      } else if (i >= first_default) {
        EK_ASSIGN_OR_RETURN(Value d, Eval(*m.defaults[i - first_default], scope.get()));
        scope->Set(m.params[i], std::move(d));
      } else {
        scope->Set(m.params[i], Value::Undefined(m.params[i]));
      }
    }
    for (const auto& [k, v] : args.keyword) {
      bool known = false;
      for (const auto& p : m.params) known = known || p == k;
      if (!known)
        return Err(m.line, fmt::format("macro '{}' has no argument named '{}'", m.name, k));
    }
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    Status st = ExecBody(m.body, scope.get());
    out_ = saved;
    flow_ = Flow::kNormal;
    EK_RETURN_IF_ERROR(st);
    return Value::String(std::move(buf));
  }

  Status EvalArgs(const Expr& e, Scope* scope, CallArgs* args) {
    args->positional.reserve(e.items.size());
    for (const auto& a : e.items) {
      EK_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
      args->positional.push_back(std::move(v));
    }
    for (const auto& [k, a] : e.kwargs) {
      EK_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
      args->keyword.emplace_back(k, std::move(v));
    }
    return Status::Ok();
  }

  Result<Value> ApplyFilter(const Expr& f, const Value& operand, Scope* scope) {
    CallArgs args;
    EK_RETURN_IF_ERROR(EvalArgs(f, scope, &args));
    auto r = f.filter_fn ? reinterpret_cast<FilterFn>(const_cast<void*>(f.filter_fn))(operand, args)
                         : CallFilter(f.name, operand, args);
    if (!r.ok()) return Locate(f.line, r.status());
    return r;
  }

  Result<Value> Call(const Value& fn, CallArgs& args, int line, const Expr& callee) {
    if (fn.kind() == Value::Kind::kCallable) {
      auto r = fn.function()(args);
      if (!r.ok()) return Locate(line, r.status());
      return r;
    }
    if (fn.is_undefined()) {
      return Err(
          line, fmt::format("'{}' is undefined", fn.name().empty() ? Describe(callee) : fn.name()));
    }
    return Err(line, fmt::format("'{}' object is not callable", fn.TypeName()));
  }

  static std::string Describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return e.name;
    if (e.kind == Expr::Kind::kGetattr) return Describe(*e.a) + "." + e.name;
    return "expression";
  }

 public:
  // The common expressions (constants, names, items and attributes) here, in a
  // small stack frame; the rest in EvalOther.
  Result<Value> Eval(const Expr& e, Scope* scope) {
    switch (e.kind) {
      case Expr::Kind::kConst:
        return Value::Borrow(e.value);
      case Expr::Kind::kName: {
        bool from_context = false;
        if (const Value* v = scope->Find(e.name, &from_context))
          return from_context ? Value::Borrow(*v) : *v;
        if (const Value* g = FindGlobal(e.name)) return *g;
        return Value::Undefined(e.name);
      }
      case Expr::Kind::kGetattr:
      case Expr::Kind::kGetitem:
        return EvalItem(e, scope);
      default:
        return EvalOther(e, scope);
    }
  }

 private:
  // obj.name, obj[key]: a variable holding the object is read in place, not
  // copied; a constant key is used as it is.
  Result<Value> EvalItem(const Expr& e, Scope* scope) {
    Value tmp;
    const Value* obj = nullptr;
    bool from_context = false;
    if (e.a->kind == Expr::Kind::kName) obj = scope->Find(e.a->name, &from_context);
    if (!obj || from_context) {
      if (obj) {
        tmp = Value::Borrow(*obj);
      } else {
        EK_ASSIGN_OR_RETURN(tmp, Eval(*e.a, scope));
      }
      obj = &tmp;
    }
    Result<Value> r = Value();
    if (e.kind == Expr::Kind::kGetattr) {
      r = GetAttr(*obj, e.name);
    } else if (e.b->kind == Expr::Kind::kConst) {
      r = GetItem(*obj, e.b->value);
    } else {
      EK_ASSIGN_OR_RETURN(Value key, Eval(*e.b, scope));
      r = GetItem(*obj, key);
    }
    if (!r.ok()) return Locate(e.line, r.status());
    return r;
  }

  __attribute__((noinline)) Result<Value> EvalOther(const Expr& e, Scope* scope) {
    switch (e.kind) {
      case Expr::Kind::kConst:
        return Value::Borrow(e.value);
      case Expr::Kind::kName: {
        bool from_context = false;
        if (const Value* v = scope->Find(e.name, &from_context))
          return from_context ? Value::Borrow(*v) : *v;
        if (const Value* g = FindGlobal(e.name)) return *g;
        return Value::Undefined(e.name);
      }
      case Expr::Kind::kGetattr: {
        EK_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
        auto r = GetAttr(obj, e.name);
        if (!r.ok()) return Locate(e.line, r.status());
        return r;
      }
      case Expr::Kind::kGetitem: {
        EK_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
        EK_ASSIGN_OR_RETURN(Value key, Eval(*e.b, scope));
        auto r = GetItem(obj, key);
        if (!r.ok()) return Locate(e.line, r.status());
        return r;
      }
      case Expr::Kind::kSlice:
        return EvalSlice(e, scope);
      case Expr::Kind::kCall: {
        CallArgs args;
        if (e.a->kind == Expr::Kind::kGetattr) {
          EK_ASSIGN_OR_RETURN(Value obj, Eval(*e.a->a, scope));
          EK_RETURN_IF_ERROR(EvalArgs(e, scope, &args));
          bool found = false;
          auto r = CallMethod(obj, e.a->name, args, &found);
          if (!r.ok()) return Locate(e.line, r.status());
          if (found) return r;
          auto fn = GetAttr(obj, e.a->name);
          if (!fn.ok()) return Locate(e.line, fn.status());
          return Call(*fn, args, e.line, *e.a);
        }
        EK_ASSIGN_OR_RETURN(Value fn, Eval(*e.a, scope));
        EK_RETURN_IF_ERROR(EvalArgs(e, scope, &args));
        return Call(fn, args, e.line, *e.a);
      }
      case Expr::Kind::kFilter: {
        EK_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
        return ApplyFilter(e, v, scope);
      }
      case Expr::Kind::kTest: {
        EK_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
        CallArgs args;
        EK_RETURN_IF_ERROR(EvalArgs(e, scope, &args));
        auto r = CallTest(e.name, v, args);
        if (!r.ok()) return Locate(e.line, r.status());
        return Value::Bool(*r != e.negate);
      }
      case Expr::Kind::kBinary: {
        if (e.name == "+") return EvalPlus(e, scope);
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        EK_ASSIGN_OR_RETURN(Value b, Eval(*e.b, scope));
        auto r = Arith(e.name, a, b);
        if (!r.ok()) return Locate(e.line, r.status());
        return r;
      }
      case Expr::Kind::kUnary: {
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        if (!a.is_number()) {
          if (a.is_undefined()) return Err(e.line, fmt::format("'{}' is undefined", a.name()));
          return Err(e.line,
                     fmt::format("bad operand type for unary {}: '{}'", e.name, a.TypeName()));
        }
        if (e.name == "+") return a.kind() == Value::Kind::kBool ? Value::Int(a.integer()) : a;
        if (a.kind() == Value::Kind::kFloat) return Value::Float(-a.number());
        if (a.integer() == std::numeric_limits<int64_t>::min())
          return Err(e.line, "integer overflow");
        return Value::Int(-a.integer());
      }
      case Expr::Kind::kCompare: {
        EK_ASSIGN_OR_RETURN(Value left, Eval(*e.a, scope));
        for (size_t i = 0; i < e.items.size(); ++i) {
          EK_ASSIGN_OR_RETURN(Value right, Eval(*e.items[i], scope));
          auto r = Compare(e.ops[i], left, right);
          if (!r.ok()) return Locate(e.line, r.status());
          if (!*r) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kAnd: {
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        if (!a.Truthy()) return a;
        return Eval(*e.b, scope);
      }
      case Expr::Kind::kOr: {
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        if (a.Truthy()) return a;
        return Eval(*e.b, scope);
      }
      case Expr::Kind::kNot: {
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        return Value::Bool(!a.Truthy());
      }
      case Expr::Kind::kCond: {
        EK_ASSIGN_OR_RETURN(Value c, Eval(*e.a, scope));
        if (c.Truthy()) return Eval(*e.b, scope);
        if (e.c) return Eval(*e.c, scope);
        return Value::Undefined();
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List l;
        l.reserve(e.items.size());
        for (const auto& i : e.items) {
          EK_ASSIGN_OR_RETURN(Value v, Eval(*i, scope));
          l.push_back(std::move(v));
        }
        return Value::MakeList(std::move(l),
                               e.kind == Expr::Kind::kTuple ? Seq::kTuple : Seq::kList);
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i < e.items.size(); ++i) {
          EK_ASSIGN_OR_RETURN(Value k, Eval(*e.items[i], scope));
          if (!k.is_string())
            return Err(e.line, fmt::format("unsupported: a dict key of type {}", k.TypeName()));
          EK_ASSIGN_OR_RETURN(Value v, Eval(*e.values[i], scope));
          d.Set(k.str(), std::move(v));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Kind::kConcat: {
        EK_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        EK_ASSIGN_OR_RETURN(Value b, Eval(*e.b, scope));
        if (Status st = CheckPrintable(a); !st.ok()) return Locate(e.line, st);
        if (Status st = CheckPrintable(b); !st.ok()) return Locate(e.line, st);
        std::string s;
        AppendStr(&s, a);
        AppendStr(&s, b);
        if (s.size() > kMaxStringBytes) return Err(e.line, TooLarge(s.size(), "string").message());
        return Value::String(std::move(s));
      }
    }
    return Err(e.line, "unknown expression");
  }

 private:
  // a + b + c ...: while the operands are strings, one buffer (not a string
  // per '+'); anything else goes through Arith pairwise, left to right.
  // With `sink`, strings are appended to it directly (what {{ a + b }} prints)
  // and the result is Undefined; a non-string operand takes the text back.
  Result<Value> EvalPlus(const Expr& e, Scope* scope, std::string* sink = nullptr) {
    const Expr* chain[16];
    size_t n = 0;
    const Expr* x = &e;
    while (x->kind == Expr::Kind::kBinary && x->name == "+" && n < 15) {
      chain[n++] = x->b.get();
      x = x->a.get();
    }
    chain[n++] = x;  // the leftmost operand; chain is right-to-left
    EK_ASSIGN_OR_RETURN(Value acc, Eval(*chain[n - 1], scope));
    std::string own;
    std::string* buf_ptr = &own;
    size_t start = 0;
    if (sink) {
      buf_ptr = sink;
      start = sink->size();
    }
    std::string& buf = *buf_ptr;
    bool buffered = false;
    for (size_t i = n - 1; i-- > 0;) {
      EK_ASSIGN_OR_RETURN(Value v, Eval(*chain[i], scope));
      if (v.is_string() && (buffered || acc.is_string())) {
        if (!buffered) {
          if (!sink) buf.reserve(acc.str().size() + v.str().size() + 64);
          buf += acc.str();
          buffered = true;
        }
        buf += v.str();
        continue;
      }
      if (buffered) {
        acc = Value::String(buf.substr(start));
        buf.resize(start);
        buffered = false;
      }
      auto r = Arith("+", acc, v);
      if (!r.ok()) return Locate(e.line, r.status());
      acc = std::move(*r);
    }
    if (buffered) return sink ? Value() : Value::String(std::move(buf));
    return acc;
  }

  Result<Value> EvalSlice(const Expr& e, Scope* scope) {
    EK_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
    auto bound = [&](const ExprPtr& x, std::optional<int64_t>* out) -> Status {
      if (!x) return Status::Ok();
      EK_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
      if (v.is_none()) return Status::Ok();
      if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
        return Err(e.line, "slice indices must be integers or None");
      }
      *out = v.integer();
      return Status::Ok();
    };
    std::optional<int64_t> start, stop, step;
    EK_RETURN_IF_ERROR(bound(e.b, &start));
    EK_RETURN_IF_ERROR(bound(e.c, &stop));
    EK_RETURN_IF_ERROR(bound(e.items[0], &step));
    int64_t st = step.value_or(1);
    if (st == 0) return Err(e.line, "slice step cannot be zero");
    // Python's slice.indices().
    auto indices = [&](int64_t len) {
      auto adjust = [&](std::optional<int64_t> v, int64_t dflt_pos, int64_t dflt_neg) -> int64_t {
        if (!v) return st > 0 ? dflt_pos : dflt_neg;
        int64_t x = *v;
        if (x < 0) {
          x += len;
          if (x < 0) x = st < 0 ? -1 : 0;
        } else if (x >= len) {
          x = st < 0 ? len - 1 : len;
        }
        return x;
      };
      int64_t b = adjust(start, 0, len - 1);
      int64_t en = adjust(stop, len, -1);
      std::vector<int64_t> idx;
      if (st > 0) {
        for (int64_t i = b; i < en; i += st) idx.push_back(i);
      } else {
        for (int64_t i = b; i > en; i += st) idx.push_back(i);
      }
      return idx;
    };
    if (obj.is_list()) {
      Seq seq = obj.seq();
      if (seq != Seq::kList && seq != Seq::kTuple && seq != Seq::kRange)
        return Value::Undefined();  // dict views
      const List& l = obj.list();
      bool borrow = obj.borrowed();
      List out;
      auto idx = indices(static_cast<int64_t>(l.size()));
      out.reserve(idx.size());
      for (int64_t i : idx) {
        const Value& x = l[static_cast<size_t>(i)];
        out.push_back(borrow ? Value::Borrow(x) : x);
      }
      return Value::MakeList(std::move(out), seq);
    }
    if (obj.is_string()) {
      const std::string& s = obj.str();
      std::vector<size_t> starts;
      starts.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
      }
      auto idx = indices(static_cast<int64_t>(starts.size()));
      if (st == 1) {
        if (idx.empty()) return Value::String("");
        size_t b = starts[static_cast<size_t>(idx.front())];
        size_t last = static_cast<size_t>(idx.back());
        size_t en = last + 1 < starts.size() ? starts[last + 1] : s.size();
        return Value::String(s.substr(b, en - b));
      }
      std::string out;
      for (int64_t i : idx) {
        size_t b = starts[static_cast<size_t>(i)];
        size_t en = static_cast<size_t>(i) + 1 < starts.size() ? starts[static_cast<size_t>(i) + 1]
                                                               : s.size();
        out.append(s, b, en - b);
      }
      return Value::String(std::move(out));
    }
    if (obj.is_undefined()) return Err(e.line, fmt::format("'{}' is undefined", obj.name()));
    return Value::Undefined();  // jinja2's getitem turns the TypeError into Undefined
  }

  static Status Undef(const Value& v) {
    return InvalidArgumentError(fmt::format("'{}' is undefined", v.name()));
  }

  static Result<Value> Arith(const std::string& op, const Value& a, const Value& b) {
    if (a.is_undefined()) return Undef(a);
    if (b.is_undefined()) return Undef(b);
    auto unsupported = [&]() {
      return InvalidArgumentError(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'",
                                              op, a.TypeName(), b.TypeName()));
    };
    auto concatenable = [](const Value& v) {
      return v.seq() == Seq::kList || v.seq() == Seq::kTuple;
    };
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        if (a.str().size() + b.str().size() > kMaxStringBytes)
          return TooLarge(a.str().size() + b.str().size(), "string");
        return Value::String(a.str() + b.str());
      }
      if (a.is_list() && b.is_list() && a.seq() == b.seq() && concatenable(a)) {
        if (a.list().size() + b.list().size() > kMaxListItems)
          return TooLarge(a.list().size() + b.list().size(), "list");
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value::MakeList(std::move(l), a.seq());
      }
    }
    if (op == "*") {
      auto repeatable = [&](const Value& v) {
        return v.is_string() || (v.is_list() && concatenable(v));
      };
      const Value* s = repeatable(a) ? &a : repeatable(b) ? &b : nullptr;
      const Value* n = s == &a ? &b : &a;
      if (s && (n->kind() == Value::Kind::kInt || n->kind() == Value::Kind::kBool)) {
        int64_t times = std::max<int64_t>(0, n->integer());
        if (times > (1 << 20)) return InvalidArgumentError("repetition count too large");
        size_t each = s->is_string() ? s->str().size() : s->list().size();
        size_t limit = s->is_string() ? kMaxStringBytes : kMaxListItems;
        if (each && static_cast<size_t>(times) > limit / each) {
          return TooLarge(each * static_cast<size_t>(times), s->is_string() ? "string" : "list");
        }
        if (s->is_string()) {
          std::string out;
          for (int64_t i = 0; i < times; ++i) out += s->str();
          return Value::String(std::move(out));
        }
        List out;
        for (int64_t i = 0; i < times; ++i)
          out.insert(out.end(), s->list().begin(), s->list().end());
        return Value::MakeList(std::move(out), s->seq());
      }
    }
    if (!a.is_number() || !b.is_number()) {
      if (op == "%" && a.is_string())
        return UnsupportedError("unsupported: printf-style '%' string formatting");
      return unsupported();
    }
    bool ints = a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
    if (ints) {
      int64_t x = a.integer(), y = b.integer(), r = 0;
      if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::Int(r);
      if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::Int(r);
      if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::Int(r);
      if (op == "//" || op == "%") {
        if (y == 0) return InvalidArgumentError("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1)
          return InvalidArgumentError("integer overflow");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::Int(op == "//" ? q : m);
      }
      if (op == "**" && y >= 0) {
        // By squaring: 1 ** (2**62) took 2**62 multiplications.
        int64_t acc = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(acc, base, &acc))
            return InvalidArgumentError("integer overflow");
          if (e > 1 && __builtin_mul_overflow(base, base, &base))
            return InvalidArgumentError("integer overflow");
        }
        return Value::Int(acc);
      }
      if (op == "+" || op == "-" || op == "*") return InvalidArgumentError("integer overflow");
    }
    double x = a.number(), y = b.number();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "/") {
      if (y == 0) return InvalidArgumentError("division by zero");
      return Value::Float(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) return InvalidArgumentError("float division or modulo by zero");
      // CPython's float divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == "%") return Value::Float(mod);
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::Float(floordiv);
    }
    if (op == "**") return Value::Float(std::pow(x, y));
    return unsupported();
  }

  static Result<bool> Compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Equal(a, b);
    if (op == "!=") return !Equal(a, b);
    if (op == "in" || op == "notin") {
      bool in = false;
      if (b.is_string()) {
        if (!a.is_string()) {
          return InvalidArgumentError(
              fmt::format("'in <string>' requires string as left operand, not {}", a.TypeName()));
        }
        in = b.str().find(a.str()) != std::string::npos;
      } else if (b.is_list()) {
        for (const Value& x : b.list()) in = in || Equal(a, x);
      } else if (b.kind() == Value::Kind::kGenerator) {
        Value x;  // consumes up to the first match, as Python does
        while (!in && b.Next(&x)) in = Equal(a, x);
      } else if (b.is_dict()) {
        in = a.is_string() && b.dict().Find(a.str()) != nullptr;
      } else if (b.is_undefined()) {
        in = false;
      } else {
        return InvalidArgumentError(
            fmt::format("argument of type '{}' is not iterable", b.TypeName()));
      }
      return op == "in" ? in : !in;
    }
    if (a.is_undefined()) return Undef(a);
    if (b.is_undefined()) return Undef(b);
    if (op == "<") return Less(a, b);
    if (op == ">") return Less(b, a);
    if (op == "<=") {
      EK_ASSIGN_OR_RETURN(bool gt, Less(b, a));
      return !gt;
    }
    if (op == ">=") {
      EK_ASSIGN_OR_RETURN(bool lt, Less(a, b));
      return !lt;
    }
    return InvalidArgumentError(fmt::format("unknown comparison {}", op));
  }

  const std::string& name_;
  std::string* root_;
  std::string* out_;
  std::vector<std::pair<size_t, size_t>>* gen_;
  Flow flow_ = Flow::kNormal;
  int depth_ = 0;
  int64_t iterations_ = 0;
};

// Parse-time check: every filter and test the template names exists, so an
// unsupported one fails before any record renders.
Status Check(Body& body, const std::string& name, bool* has_generation);

Status CheckExpr(Expr* e, const std::string& name) {
  if (!e) return Status::Ok();
  if (e->kind == Expr::Kind::kFilter) {
    FilterFn fn = FindFilter(e->name);
    if (!fn)
      return UnsupportedError(
          fmt::format("{}:{}: unsupported: the filter '{}'", name, e->line, e->name));
    e->filter_fn = reinterpret_cast<const void*>(fn);
  }
  if (e->kind == Expr::Kind::kTest && !KnownTest(e->name)) {
    return UnsupportedError(
        fmt::format("{}:{}: unsupported: the test '{}'", name, e->line, e->name));
  }
  EK_RETURN_IF_ERROR(CheckExpr(e->a.get(), name));
  EK_RETURN_IF_ERROR(CheckExpr(e->b.get(), name));
  EK_RETURN_IF_ERROR(CheckExpr(e->c.get(), name));
  for (auto& x : e->items) EK_RETURN_IF_ERROR(CheckExpr(x.get(), name));
  for (auto& x : e->values) EK_RETURN_IF_ERROR(CheckExpr(x.get(), name));
  for (auto& [k, x] : e->kwargs) EK_RETURN_IF_ERROR(CheckExpr(x.get(), name));
  return Status::Ok();
}

Status Check(Body& body, const std::string& name, bool* has_generation) {
  for (auto& s : body) {
    if (s->kind == Stmt::Kind::kGeneration) *has_generation = true;
    EK_RETURN_IF_ERROR(CheckExpr(s->expr.get(), name));
    EK_RETURN_IF_ERROR(CheckExpr(s->filter.get(), name));
    for (auto& [c, b] : s->branches) {
      EK_RETURN_IF_ERROR(CheckExpr(c.get(), name));
      EK_RETURN_IF_ERROR(Check(b, name, has_generation));
    }
    for (auto& f : s->filters) EK_RETURN_IF_ERROR(CheckExpr(f.get(), name));
    for (auto& d : s->defaults) EK_RETURN_IF_ERROR(CheckExpr(d.get(), name));
    EK_RETURN_IF_ERROR(Check(s->body, name, has_generation));
    EK_RETURN_IF_ERROR(Check(s->else_body, name, has_generation));
  }
  return Status::Ok();
}

}  // namespace

Result<Template> Template::Parse(std::string_view source, std::string name) {
  EK_ASSIGN_OR_RETURN(Body body, ParseTemplate(source, name));
  Template t;
  EK_RETURN_IF_ERROR(Check(body, name, &t.has_generation_));
  t.body_ = std::make_shared<const Body>(std::move(body));
  t.name_ = std::make_shared<const std::string>(std::move(name));
  return t;
}

Result<Rendered> Template::Render(const Dict& vars) const {
  Rendered out;
  auto root = std::make_shared<Scope>();
  root->context = &vars;
  Interp interp(*name_, &out.text, &out.generation);
  EK_RETURN_IF_ERROR(interp.ExecBody(*body_, root.get()));
  return out;
}

}  // namespace ek::tmpl
