// The parsed form of a chat template: statements and expressions, each with
// the template line it came from (errors name it). Produced by parser.cc,
// walked by render.cc; see docs/template.md for what is supported.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace ek::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kConst,
    kName,
    kGetattr,
    kGetitem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kBinary,
    kUnary,
    kCompare,
    kAnd,
    kOr,
    kNot,
    kCond,
    kList,
    kTuple,
    kDict,
    kConcat
  };
  Kind kind;
  int line = 0;
  Value value;       // kConst
  std::string name;  // kName, kGetattr (attribute), kFilter/kTest (name), kBinary/kUnary (operator)
  ExprPtr a, b, c;   // operands: object/left/test/start, key/right/then/stop, else/step
  std::vector<ExprPtr>
      items;  // kCall/kFilter/kTest positional args; kList/kTuple items; kDict keys
  std::vector<ExprPtr> values;                          // kDict values
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall/kFilter/kTest keyword args
  std::vector<std::string> ops;  // kCompare: one operator per comparand in items
  bool negate = false;           // kTest: "is not"
  // kFilter: the filter's implementation, found when the template is checked
  // (an internal FilterFn; null until then).
  const void* filter_fn = nullptr;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,
    kPrint,
    kIf,
    kFor,
    kSet,
    kSetBlock,
    kMacro,
    kFilterBlock,
    kGeneration,
    kBreak,
    kContinue
  };
  Kind kind;
  int line = 0;
  std::string text;                                // kText
  ExprPtr expr;                                    // kPrint, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition or null for else, body)
  std::vector<std::string> targets;                // kFor loop variables; kSet/kSetBlock names
  std::string attr;                 // kSet: namespace attribute (set ns.x = ...): targets[0] is ns
  ExprPtr filter;                   // kFor: "if" condition
  Body body, else_body;             // kFor, kSetBlock, kMacro, kFilterBlock, kGeneration
  std::vector<ExprPtr> filters;     // kFilterBlock / kSetBlock: filter calls applied to the body
                                    // (kFilter exprs with a null operand)
  std::string name;                 // kMacro
  std::vector<std::string> params;  // kMacro
  std::vector<ExprPtr> defaults;    // kMacro: defaults of the last params
};

}  // namespace ek::tmpl
