// The globals (range, dict, namespace, and transformers' raise_exception and
// strftime_now). The table that binds their names is in builtins.cc.
#include <fmt/core.h>
#include <sys/time.h>

#include <cstdio>
#include <ctime>
#include <limits>

#include "core/parse.h"
#include "template/builtins_internal.h"
#include "template/internal.h"
#include "template/pystr.h"

namespace ek::tmpl::builtin {

// ------------------------------------------------------------------------------------------
// Globals.

Result<Value> GRange(CallArgs& a) {
  if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) {
    return InvalidArgumentError("range() takes 1 to 3 integer arguments");
  }
  for (const Value& x : a.positional) {
    if (!IsInt(x))
      return InvalidArgumentError(
          fmt::format("'{}' object cannot be interpreted as an integer", x.TypeName()));
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
      return InvalidArgumentError(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::Int(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // past INT64_MAX/MIN: past stop too
  }
  return Value::MakeList(std::move(out), Seq::kRange);
}

namespace {

Status CheckNamespaceName(std::string_view name) {
  if (!name.empty() && name[0] == '_') {
    return InvalidArgumentError(fmt::format(
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'",
        name));
  }
  return Status::Ok();
}

Result<Dict> DictFromArgs(CallArgs& a, std::string_view fn) {
  Dict d;
  if (a.positional.size() > 1)
    return InvalidArgumentError(fmt::format("{}() takes at most 1 positional argument", fn));
  if (!a.positional.empty()) {
    const Value& p = a.positional[0];
    if (p.is_dict() || p.kind() == Value::Kind::kNamespace) {
      d = p.dict();
    } else if (p.is_list()) {
      for (const Value& kv : p.list()) {
        if (!kv.is_list() || kv.list().size() != 2 || !kv.list()[0].is_string()) {
          return UnsupportedError(
              fmt::format("unsupported: {}() from a sequence that is not (str, value) pairs", fn));
        }
        d.Set(kv.list()[0].str(), kv.list()[1]);
      }
    } else {
      return InvalidArgumentError(
          fmt::format("{}(): cannot convert a {} to a dict", fn, p.TypeName()));
    }
  }
  for (auto& [k, v] : a.keyword) d.Set(k, v);
  return d;
}

}  // namespace

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
  return FailedPreconditionError(
      fmt::format("the template raised an exception: {}", m ? ToStr(*m) : ""));
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
  std::string fmt_s =
      PyReplace(f->str(), "%f", fmt::format("{:06d}", static_cast<int>(tv.tv_usec)), -1);
  if (fmt_s.empty()) return Value::String("");
  std::string buf(256 + fmt_s.size() * 8, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt_s.c_str(), &tm);
  buf.resize(n);
  return Value::String(std::move(buf));
}

Result<Value> GUnsupported(std::string_view name) {
  return UnsupportedError(fmt::format("unsupported: the global {}()", name));
}

}  // namespace ek::tmpl::builtin
