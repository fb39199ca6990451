#include "flightrec/op.h"

#include <fmt/format.h>

#include <array>
#include <charconv>

namespace ek::flightrec {

namespace {

// COLLECTIVES of types.py @266e4123 plus the names the newer revision added.
constexpr std::array<std::string_view, 28> kCollectives = {
    "broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather", "all_reduce",
    "_all_gather_base", "all_gather_into_tensor_coalesced", "reduce_scatter",
    "reduce_scatter_tensor_coalesced", "_reduce_scatter_base", "gather", "scatter", "all_to_all",
    "all_reduce_barrier", "allreduce_coalesced", "ALLGATHER_coalesced", "REDUCE_SCATTER_coalesced",
    // newer revision
    "all_gather_single", "all_gather_v", "reduce_scatter_single", "reduce_scatter_v",
    "all_to_all_single", "all_to_all_v_single", "barrier", "split", "new_window",
    "allgather_coalesced"};

bool In(std::string_view t, std::initializer_list<std::string_view> set) {
  for (auto s : set) {
    if (t == s) return true;
  }
  return false;
}

bool ParseInt(std::string_view s, int64_t* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::string_view MatchStateName(MatchState state) {
  switch (state) {
    case MatchState::kFullyMatched:
      return "FULLY_MATCHED";
    case MatchState::kCollectiveTypeMismatch:
      return "COLLECTIVE_TYPE_MISMATCH";
    case MatchState::kSizeOrSyntaxMismatch:
      return "SIZE_OR_SYNTAX_MISMATCH";
    case MatchState::kCollectiveStateMismatch:
      return "COLLECTIVE_STATE_MISMATCH";
    case MatchState::kCollectiveDtypeMismatch:
      return "COLLECTIVE_DTYPE_MISMATCH";
    case MatchState::kUndecided:
      return "UNDECIDED";
  }
  return "?";
}

std::string MatchInfo::ToString() const {
  std::string s = "Error type: " + std::string(MatchStateName(state));
  if (!detail.empty()) s += ", " + detail;
  return s;
}

OpName ParseOpName(std::string_view profiling_name) {
  OpName op;
  std::string_view name = profiling_name;
  if (auto colon = profiling_name.rfind(':'); colon != std::string_view::npos) {
    op.lib = profiling_name.substr(0, colon);
    name = profiling_name.substr(colon + 1);
  }
  auto space = name.find(' ');
  std::string_view type = name.substr(0, space);
  std::string_view meta =
      space == std::string_view::npos ? std::string_view() : name.substr(space + 1);
  op.type = type;
  if (type == "send" || type == "recv") {
    op.op_class = type == "send" ? OpClass::kSend : OpClass::kRecv;
    std::string_view sep = type == "send" ? "->" : "<-";
    auto at = meta.find(sep);
    if (at != std::string_view::npos) {
      int64_t a = -1, b = -1;
      bool a_ok = ParseInt(meta.substr(0, at), &a);
      std::string_view rest = meta.substr(at + 2);
      bool b_ok = ParseInt(rest, &b);
      if (type == "send") {
        if (a_ok) op.src = a;
        if (b_ok) op.dst = b;
      } else {
        if (a_ok) op.dst = a;
        if (b_ok) op.src = b;
        op.any_source = rest == "?";
      }
    }
  } else if (type == "coalesced") {
    op.op_class = OpClass::kCoalescedMarker;
  } else {
    op.op_class = OpClass::kUnknown;
    for (auto c : kCollectives) {
      if (type == c) op.op_class = OpClass::kCollective;
    }
  }
  return op;
}

OpView MakeOpView(const Dump& dump, const Entry& e, const OpName* name) {
  OpView v;
  v.name = name;
  v.entry = &e;
  v.state = dump.sym(e.state);
  v.input_sizes = dump.sym(e.input_sizes);
  v.output_sizes = dump.sym(e.output_sizes);
  v.input_dtype_set = dump.sym(e.input_dtype_set);
  v.output_dtype_set = dump.sym(e.output_dtype_set);
  return v;
}

namespace {

bool DtypeMismatch(const OpView& a, const OpView& b, bool per_rank) {
  const std::string& t = a.name->type;
  const Entry& x = *a.entry;
  const Entry& y = *b.entry;
  auto nonempty = [](FirstShape s) { return s == FirstShape::kNonEmpty; };
  if (per_rank && !In(t, {"scatter", "gather", "broadcast"}) &&
      a.input_dtype_set != a.output_dtype_set && nonempty(x.input0) && nonempty(x.output0)) {
    return true;
  }
  if (!In(t, {"scatter", "broadcast"}) && a.input_dtype_set != b.input_dtype_set &&
      nonempty(x.input0) && nonempty(y.input0)) {
    return true;
  }
  if (t != "gather" && a.output_dtype_set != b.output_dtype_set && nonempty(x.output0) &&
      nonempty(y.output0)) {
    return true;
  }
  return false;
}

MatchInfo Mismatch(MatchState s, std::string detail = {}) { return {s, std::move(detail)}; }

// fr_trace's Op.match; `per_rank` includes the rules that compare one rank's
// input with its own output (op.h).
MatchInfo MatchRules(const OpView& self, const OpView& other, int64_t pg_size, bool per_rank) {
  const OpName& a = *self.name;
  const OpName& b = *other.name;
  if (a.op_class == OpClass::kSend || a.op_class == OpClass::kRecv) {
    bool peer_ok =
        a.op_class == OpClass::kSend ? b.op_class == OpClass::kRecv : b.op_class == OpClass::kSend;
    bool src_ok = a.src == b.src || a.any_source || b.any_source;
    bool sizes_ok = a.op_class == OpClass::kSend ? self.input_sizes == other.output_sizes
                                                 : self.output_sizes == other.input_sizes;
    if (peer_ok && src_ok && a.dst == b.dst && sizes_ok) return {};
    return Mismatch(MatchState::kSizeOrSyntaxMismatch);
  }
  if (a.op_class == OpClass::kCollective || a.op_class == OpClass::kUnknown) {
    const std::string& t = a.type;
    if (a.type != b.type) {
      return Mismatch(
          MatchState::kCollectiveTypeMismatch,
          fmt::format("Expected collective type: '{}' does not match found collective type: '{}'",
                      a.type, b.type));
    }
    bool uneven = In(t, {"all_to_all", "all_to_all_single"});
    if (!uneven && t != "scatter" && self.input_sizes != other.input_sizes) {
      return Mismatch(
          MatchState::kSizeOrSyntaxMismatch,
          fmt::format("Expected input sizes: '{}' does not match found input sizes: '{}'",
                      self.input_sizes, other.input_sizes));
    }
    if (!uneven && t != "gather" && self.output_sizes != other.output_sizes) {
      return Mismatch(
          MatchState::kSizeOrSyntaxMismatch,
          fmt::format("Expected output sizes: '{}' does not match found output sizes: '{}'",
                      self.output_sizes, other.output_sizes));
    }
    if (per_rank && In(t, {"all_reduce", "allreduce_coalesced"}) &&
        self.input_sizes != other.output_sizes) {
      return Mismatch(
          MatchState::kSizeOrSyntaxMismatch,
          fmt::format("Expected input sizes: '{}' does not match found output sizes: '{}'",
                      self.input_sizes, other.output_sizes));
    }
    const Entry& x = *self.entry;
    const Entry& y = *other.entry;
    if (per_rank && In(t, {"all_gather", "_all_gather_base", "all_gather_into_tensor_coalesced"})) {
      bool flat = y.output_numel0 == x.input_numel0 * pg_size;
      bool list = y.output_tensors == pg_size * x.input_tensors &&
                  y.output_numel == x.input_numel * pg_size;
      if (!flat && !list) {
        return Mismatch(
            MatchState::kSizeOrSyntaxMismatch,
            fmt::format("Found input numel '{} * pg size {}' does not match output numel '{}'",
                        y.input_numel0, pg_size, y.output_numel0));
      }
    }
    if (per_rank &&
        In(t, {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"})) {
      bool flat = y.input_numel0 == x.output_numel0 * pg_size;
      bool list = y.input_tensors == pg_size * x.output_tensors &&
                  y.input_numel == x.output_numel * pg_size;
      if (!flat && !list) {
        return Mismatch(
            MatchState::kSizeOrSyntaxMismatch,
            fmt::format("Found input numel '{}' does not match output numel '{} * pg size {}'",
                        y.input_numel0, y.output_numel0, pg_size));
      }
    }
    if (DtypeMismatch(self, other, per_rank)) {
      return Mismatch(MatchState::kCollectiveDtypeMismatch,
                      fmt::format("Expected dtypes: '{}' does not match found dtype: '{}/{}/{}'",
                                  self.input_dtype_set, self.output_dtype_set,
                                  other.input_dtype_set, other.output_dtype_set));
    }
    if (self.state != other.state) {
      return Mismatch(MatchState::kCollectiveStateMismatch,
                      fmt::format("Expected state: '{}' does not match found state: '{}'",
                                  self.state, other.state));
    }
    if (uneven) return Mismatch(MatchState::kUndecided);
    return {};
  }
  // The "coalesced" end marker (ALLGATHER_coalesced and REDUCE_SCATTER_coalesced
  // are in COLLECTIVES and so never reach this branch, as in fr_trace).
  if (a.type == b.type) return {};
  return Mismatch(MatchState::kSizeOrSyntaxMismatch);
}

}  // namespace

MatchInfo Match(const OpView& self, const OpView& other, int64_t pg_size) {
  return MatchRules(self, other, pg_size, /*per_rank=*/false);
}

MatchInfo FrTraceMatch(const OpView& self, const OpView& other, int64_t pg_size) {
  return MatchRules(self, other, pg_size, /*per_rank=*/true);
}

MatchInfo SelfCheck(const OpView& entry, int64_t pg_size) {
  MatchInfo info = FrTraceMatch(entry, entry, pg_size);
  // Against itself only the per-rank rules can fail (and all_to_all is UNDECIDED).
  return info.ok() ? MatchInfo{} : info;
}

}  // namespace ek::flightrec
