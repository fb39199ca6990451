// One file over 600 lines: one recursive-descent class whose methods are the grammar.
// The parser for Jinja chat templates, after jinja2 3.1's parser.py with the
// environment transformers uses (loop controls, its {% generation %} tag); the
// lexer (lexer.cc) applies its whitespace rules. Anything outside the supported
// subset is an error naming the construct and the line; nothing is silently
// rendered differently.
#include "template/parser.h"

#include <fmt/core.h>

#include <algorithm>

#include "template/lexer.h"

namespace ek::tmpl {

namespace {

// ---------------------------------------------------------------------------------------
// Parser.

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string name)
      : t_(std::move(tokens)), name_(std::move(name)) {}

  Result<Body> Template() {
    Body body;
    std::string stop;
    EK_RETURN_IF_ERROR(Statements(&body, {}, &stop));
    if (!stop.empty()) return Err(fmt::format("unexpected '{}'", stop));
    return body;
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  Status Err(std::string_view what) const {
    return InvalidArgumentError(fmt::format("{}:{}: {}", name_, Cur().line, what));
  }
  Status Unsupported(std::string_view what) const {
    return UnsupportedError(fmt::format("{}:{}: unsupported: {}", name_, Cur().line, what));
  }

  // Nesting is bounded: blocks, brackets and chains of operators, attributes
  // and filters each add a level to the tree, and rendering and freeing it
  // recurse per level (100,000 '(' overflowed the stack: fuzz/README.md).
  // jinja2 stops far earlier, at Python's recursion limit (about 80 nested
  // parentheses). A DepthScope restores the depth when the function returns.
  static constexpr int kMaxDepth = 256;
  struct DepthScope {
    explicit DepthScope(int* depth) : depth_(depth), saved_(*depth) {}
    ~DepthScope() { *depth_ = saved_; }
    int* depth_;
    int saved_;
  };
  Status Deeper() {
    if (++depth_ > kMaxDepth) return Err(fmt::format("nested deeper than {} levels", kMaxDepth));
    return Status::Ok();
  }
  bool IsOp(std::string_view op) const { return Cur().type == Tok::kOp && Cur().value == op; }
  bool IsName(std::string_view n) const { return Cur().type == Tok::kName && Cur().value == n; }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return Err(fmt::format("expected '{}'", op));
    Next();
    return Status::Ok();
  }
  Status ExpectName(std::string_view n) {
    if (!IsName(n)) return Err(fmt::format("expected '{}'", n));
    Next();
    return Status::Ok();
  }
  Status ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) return Err("expected the end of the statement '%}'");
    Next();
    return Status::Ok();
  }
  Result<std::string> Identifier() {
    if (Cur().type != Tok::kName) return Err("expected a name");
    std::string n = Cur().value;
    Next();
    return n;
  }

  // Parses statements until a block tag whose keyword is in `stops`; that keyword goes to *stop
  // (the tag's begin and keyword consumed, the rest of the tag left).
  Status Statements(Body* body, const std::vector<std::string_view>& stops, std::string* stop) {
    stop->clear();
    while (true) {
      const Token& tok = Cur();
      switch (tok.type) {
        case Tok::kEnd:
          if (!stops.empty())
            return Err(fmt::format("unexpected end of template: missing '{}'", stops.back()));
          return Status::Ok();
        case Tok::kData: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kText;
          s->line = tok.line;
          s->text = tok.value;
          body->push_back(std::move(s));
          Next();
          break;
        }
        case Tok::kVarBegin: {
          int line = tok.line;
          Next();
          EK_ASSIGN_OR_RETURN(ExprPtr e, TupleExpr());
          if (Cur().type != Tok::kVarEnd) return Err("expected '}}'");
          Next();
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kPrint;
          s->line = line;
          s->expr = std::move(e);
          body->push_back(std::move(s));
          break;
        }
        case Tok::kBlockBegin: {
          Next();
          if (Cur().type != Tok::kName) return Err("expected a statement keyword");
          std::string kw = Cur().value;
          for (auto s : stops) {
            if (kw == s) {
              Next();
              *stop = kw;
              return Status::Ok();
            }
          }
          EK_ASSIGN_OR_RETURN(StmtPtr s, Statement());
          body->push_back(std::move(s));
          break;
        }
        default:
          return Err("unexpected token");
      }
    }
  }

  Result<StmtPtr> Statement() {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    std::string kw = Cur().value;
    int line = Cur().line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    Next();
    if (kw == "if") {
      s->kind = Stmt::Kind::kIf;
      EK_ASSIGN_OR_RETURN(ExprPtr cond, TupleExpr());
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      while (true) {
        Body b;
        std::string stop;
        EK_RETURN_IF_ERROR(Statements(&b, {"elif", "else", "endif"}, &stop));
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (stop == "endif") break;
        if (stop == "else") {
          EK_RETURN_IF_ERROR(ExpectBlockEnd());
          Body eb;
          EK_RETURN_IF_ERROR(Statements(&eb, {"endif"}, &stop));
          s->branches.emplace_back(nullptr, std::move(eb));
          break;
        }
        EK_ASSIGN_OR_RETURN(cond, TupleExpr());
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "for") {
      s->kind = Stmt::Kind::kFor;
      do {
        EK_ASSIGN_OR_RETURN(std::string n, Identifier());
        s->targets.push_back(std::move(n));
        if (!IsOp(",")) break;
        Next();
      } while (true);
      EK_RETURN_IF_ERROR(ExpectName("in"));
      EK_ASSIGN_OR_RETURN(s->expr, TupleExpr(/*no_cond=*/true));
      if (IsName("if")) {
        Next();
        EK_ASSIGN_OR_RETURN(s->filter, Expression(true));
      }
      if (IsName("recursive")) return Unsupported("recursive for loops");
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"else", "endfor"}, &stop));
      if (stop == "else") {
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
        EK_RETURN_IF_ERROR(Statements(&s->else_body, {"endfor"}, &stop));
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "set") {
      EK_ASSIGN_OR_RETURN(std::string n, Identifier());
      if (IsOp(".")) {
        Next();
        EK_ASSIGN_OR_RETURN(s->attr, Identifier());
      }
      s->targets.push_back(n);
      while (s->attr.empty() && IsOp(",")) {
        Next();
        EK_ASSIGN_OR_RETURN(std::string more, Identifier());
        s->targets.push_back(std::move(more));
      }
      if (IsOp("=")) {
        Next();
        s->kind = Stmt::Kind::kSet;
        EK_ASSIGN_OR_RETURN(s->expr, TupleExpr());
        EK_RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      if (!s->attr.empty() || s->targets.size() != 1) return Err("expected '=' in set");
      s->kind = Stmt::Kind::kSetBlock;
      while (IsOp("|")) {
        Next();
        EK_ASSIGN_OR_RETURN(ExprPtr f, FilterCall(nullptr));
        s->filters.push_back(std::move(f));
      }
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endset"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "macro") {
      s->kind = Stmt::Kind::kMacro;
      EK_ASSIGN_OR_RETURN(s->name, Identifier());
      EK_RETURN_IF_ERROR(Expect("("));
      while (!IsOp(")")) {
        EK_ASSIGN_OR_RETURN(std::string p, Identifier());
        s->params.push_back(std::move(p));
        if (IsOp("=")) {
          Next();
          EK_ASSIGN_OR_RETURN(ExprPtr d, Expression());
          s->defaults.push_back(std::move(d));
        } else if (!s->defaults.empty()) {
          return Err("non-default macro argument follows a default one");
        }
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect(")"));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endmacro"}, &stop));
      if (Cur().type == Tok::kName) Next();  // {% endmacro name %}
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      do {
        EK_ASSIGN_OR_RETURN(ExprPtr f, FilterCall(nullptr));
        s->filters.push_back(std::move(f));
        if (!IsOp("|")) break;
        Next();
      } while (true);
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endfilter"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "generation") {
      s->kind = Stmt::Kind::kGeneration;
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      std::string stop;
      EK_RETURN_IF_ERROR(Statements(&s->body, {"endgeneration"}, &stop));
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      EK_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    --i_;  // name the keyword's line
    return Unsupported(fmt::format("the '{}' statement", kw));
  }

  // ---------------------------------------------------------------------------------
  // Expressions (precedence as in jinja2's parser).

  ExprPtr Node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // A bare tuple ("a, b") or one expression.
  Result<ExprPtr> TupleExpr(bool no_cond = false) {
    int line = Cur().line;
    EK_ASSIGN_OR_RETURN(ExprPtr first, Expression(!no_cond));
    if (!IsOp(",")) return first;
    auto t = Node(Expr::Kind::kTuple, line);
    t->items.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsName("in") || IsOp(")") ||
          IsOp("="))
        break;
      EK_ASSIGN_OR_RETURN(ExprPtr e, Expression(!no_cond));
      t->items.push_back(std::move(e));
    }
    return t;
  }

  Result<ExprPtr> Expression(bool with_cond = true) {
    EK_ASSIGN_OR_RETURN(ExprPtr e, Or());
    if (!with_cond) return e;
    DepthScope scope(&depth_);
    while (IsName("if")) {
      EK_RETURN_IF_ERROR(Deeper());
      int line = Cur().line;
      Next();
      auto c = Node(Expr::Kind::kCond, line);
      EK_ASSIGN_OR_RETURN(c->a, Or());
      c->b = std::move(e);
      if (IsName("else")) {
        Next();
        EK_ASSIGN_OR_RETURN(c->c, Expression());
      }
      e = std::move(c);
    }
    return e;
  }

  Result<ExprPtr> Or() {
    EK_ASSIGN_OR_RETURN(ExprPtr l, And());
    DepthScope scope(&depth_);
    while (IsName("or")) {
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(Expr::Kind::kOr, Cur().line);
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, And());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> And() {
    EK_ASSIGN_OR_RETURN(ExprPtr l, Not());
    DepthScope scope(&depth_);
    while (IsName("and")) {
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(Expr::Kind::kAnd, Cur().line);
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, Not());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> Not() {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    if (IsName("not")) {
      auto n = Node(Expr::Kind::kNot, Cur().line);
      Next();
      EK_ASSIGN_OR_RETURN(n->a, Not());
      return n;
    }
    return Compare();
  }
  Result<ExprPtr> Compare() {
    int line = Cur().line;
    EK_ASSIGN_OR_RETURN(ExprPtr first, Math1());
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" || Cur().value == ">" ||
           Cur().value == "<=" || Cur().value == ">=")) {
        op = Cur().value;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().value == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Node(Expr::Kind::kCompare, line);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      EK_ASSIGN_OR_RETURN(ExprPtr r, Math1());
      cmp->items.push_back(std::move(r));
    }
    if (cmp) return ExprPtr(std::move(cmp));
    return first;
  }
  Result<ExprPtr> Binary(Result<ExprPtr> (Parser::*next)(),
                         std::initializer_list<std::string_view> ops,
                         Expr::Kind kind = Expr::Kind::kBinary) {
    EK_ASSIGN_OR_RETURN(ExprPtr l, (this->*next)());
    DepthScope scope(&depth_);
    while (Cur().type == Tok::kOp) {
      bool hit = false;
      for (auto op : ops) hit = hit || Cur().value == op;
      if (!hit) break;
      EK_RETURN_IF_ERROR(Deeper());
      auto n = Node(kind, Cur().line);
      n->name = Cur().value;
      Next();
      n->a = std::move(l);
      EK_ASSIGN_OR_RETURN(n->b, (this->*next)());
      l = std::move(n);
    }
    return l;
  }
  Result<ExprPtr> Math1() { return Binary(&Parser::Concat, {"+", "-"}); }
  Result<ExprPtr> Concat() { return Binary(&Parser::Math2, {"~"}, Expr::Kind::kConcat); }
  Result<ExprPtr> Math2() { return Binary(&Parser::Pow, {"*", "/", "//", "%"}); }
  Result<ExprPtr> Pow() { return Binary(&Parser::UnaryWithFilters, {"**"}); }
  Result<ExprPtr> UnaryWithFilters() { return Unary(true); }

  Result<ExprPtr> Unary(bool with_filter) {
    DepthScope scope(&depth_);
    EK_RETURN_IF_ERROR(Deeper());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto n = Node(Expr::Kind::kUnary, Cur().line);
      n->name = Cur().value;
      Next();
      EK_ASSIGN_OR_RETURN(n->a, Unary(false));
      node = std::move(n);
    } else {
      EK_ASSIGN_OR_RETURN(node, Primary());
    }
    EK_ASSIGN_OR_RETURN(node, Postfix(std::move(node)));
    if (with_filter) {
      EK_ASSIGN_OR_RETURN(node, FilterExpr(std::move(node)));
    }
    return node;
  }

  Result<ExprPtr> Primary() {
    const Token& tok = Cur();
    int line = tok.line;
    if (tok.type == Tok::kName) {
      std::string n = tok.value;
      Next();
      auto e = Node(Expr::Kind::kConst, line);
      if (n == "true" || n == "True") {
        e->value = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        e->value = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = n;
      }
      return e;
    }
    if (tok.type == Tok::kString) {
      std::string s = tok.literal.str();
      Next();
      while (Cur().type == Tok::kString) {  // adjacent literals concatenate
        s += Cur().literal.str();
        Next();
      }
      auto e = Node(Expr::Kind::kConst, line);
      e->value = Value::String(std::move(s));
      return e;
    }
    if (tok.type == Tok::kInt || tok.type == Tok::kFloat) {
      auto e = Node(Expr::Kind::kConst, line);
      e->value = tok.literal;
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return Node(Expr::Kind::kTuple, line);
      }
      EK_ASSIGN_OR_RETURN(ExprPtr e, TupleExpr());
      EK_RETURN_IF_ERROR(Expect(")"));
      return e;
    }
    if (IsOp("[")) {
      Next();
      auto l = Node(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        EK_ASSIGN_OR_RETURN(ExprPtr e, Expression());
        l->items.push_back(std::move(e));
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect("]"));
      return l;
    }
    if (IsOp("{")) {
      Next();
      auto d = Node(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        EK_ASSIGN_OR_RETURN(ExprPtr k, Expression());
        EK_RETURN_IF_ERROR(Expect(":"));
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        d->items.push_back(std::move(k));
        d->values.push_back(std::move(v));
        if (!IsOp(",")) break;
        Next();
      }
      EK_RETURN_IF_ERROR(Expect("}"));
      return d;
    }
    if (tok.type == Tok::kVarEnd || tok.type == Tok::kBlockEnd || tok.type == Tok::kEnd) {
      return Err("unexpected end of an expression");
    }
    return Err(fmt::format("unexpected '{}'", tok.value));
  }

  Result<ExprPtr> Postfix(ExprPtr node) {
    DepthScope scope(&depth_);
    while (true) {
      if (IsOp(".") || IsOp("[") || IsOp("(")) EK_RETURN_IF_ERROR(Deeper());
      if (IsOp(".")) {
        int line = Cur().line;
        Next();
        if (Cur().type == Tok::kName) {
          auto g = Node(Expr::Kind::kGetattr, line);
          g->a = std::move(node);
          g->name = Cur().value;
          Next();
          node = std::move(g);
        } else if (Cur().type == Tok::kInt) {
          auto g = Node(Expr::Kind::kGetitem, line);
          g->a = std::move(node);
          g->b = Node(Expr::Kind::kConst, line);
          g->b->value = Cur().literal;
          Next();
          node = std::move(g);
        } else {
          return Err("expected a name after '.'");
        }
      } else if (IsOp("[")) {
        EK_ASSIGN_OR_RETURN(node, Subscript(std::move(node)));
      } else if (IsOp("(")) {
        EK_ASSIGN_OR_RETURN(node, Call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> Subscript(ExprPtr obj) {
    int line = Cur().line;
    Next();  // [
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!IsOp(":")) {
      EK_ASSIGN_OR_RETURN(start, Expression());
    }
    if (IsOp(":")) {
      is_slice = true;
      Next();
      if (!IsOp(":") && !IsOp("]")) {
        EK_ASSIGN_OR_RETURN(stop, Expression());
      }
      if (IsOp(":")) {
        Next();
        if (!IsOp("]")) {
          EK_ASSIGN_OR_RETURN(step, Expression());
        }
      }
    }
    if (IsOp(",")) return Unsupported("tuple subscripts");
    EK_RETURN_IF_ERROR(Expect("]"));
    auto e = Node(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetitem, line);
    e->a = std::move(obj);
    if (is_slice) {
      e->b = std::move(start);
      e->c = std::move(stop);
      e->items.push_back(std::move(step));
    } else {
      e->b = std::move(start);
    }
    return e;
  }

  Status Args(Expr* call) {
    EK_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) return Unsupported("*args and **kwargs in calls");
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().value == "=") {
        std::string k = Cur().value;
        Next();
        Next();
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        call->kwargs.emplace_back(std::move(k), std::move(v));
      } else {
        if (!call->kwargs.empty()) return Err("positional argument follows keyword argument");
        EK_ASSIGN_OR_RETURN(ExprPtr v, Expression());
        call->items.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return Expect(")");
  }

  Result<ExprPtr> Call(ExprPtr fn) {
    auto c = Node(Expr::Kind::kCall, Cur().line);
    c->a = std::move(fn);
    EK_RETURN_IF_ERROR(Args(c.get()));
    return c;
  }

  // name[.name][(args)] after '|' ; `operand` may be null (filter blocks).
  Result<ExprPtr> FilterCall(ExprPtr operand) {
    auto f = Node(Expr::Kind::kFilter, Cur().line);
    EK_ASSIGN_OR_RETURN(f->name, Identifier());
    while (IsOp(".")) {
      Next();
      EK_ASSIGN_OR_RETURN(std::string more, Identifier());
      f->name += "." + more;
    }
    f->a = std::move(operand);
    if (IsOp("(")) EK_RETURN_IF_ERROR(Args(f.get()));
    return f;
  }

  Result<ExprPtr> FilterExpr(ExprPtr node) {
    DepthScope scope(&depth_);
    while (true) {
      if (IsOp("|") || IsName("is") || IsOp("(")) EK_RETURN_IF_ERROR(Deeper());
      if (IsOp("|")) {
        Next();
        EK_ASSIGN_OR_RETURN(node, FilterCall(std::move(node)));
      } else if (IsName("is")) {
        int line = Cur().line;
        Next();
        auto t = Node(Expr::Kind::kTest, line);
        if (IsName("not")) {
          t->negate = true;
          Next();
        }
        EK_ASSIGN_OR_RETURN(t->name, Identifier());
        while (IsOp(".")) {
          Next();
          EK_ASSIGN_OR_RETURN(std::string more, Identifier());
          t->name += "." + more;
        }
        t->a = std::move(node);
        if (IsOp("(")) {
          EK_RETURN_IF_ERROR(Args(t.get()));
        } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString ||
                    Cur().type == Tok::kInt || Cur().type == Tok::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !(IsName("else") || IsName("or") || IsName("and") || IsName("if") ||
                     IsName("in") || IsName("is") || IsName("not"))) {
          EK_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
          EK_ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
          t->items.push_back(std::move(arg));
        }
        node = std::move(t);
      } else if (IsOp("(")) {
        EK_ASSIGN_OR_RETURN(node, Call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  std::string name_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Body> ParseTemplate(std::string_view source, const std::string& name) {
  EK_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source, name));
  Parser parser(std::move(tokens), name);
  return parser.Template();
}

}  // namespace ek::tmpl
