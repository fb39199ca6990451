// One flight-recorder entry as the cross-rank matcher sees it, and the rule
// that compares two of them. The rules are fr_trace's Op.match from
// torch/distributed/flight_recorder/components/types.py @266e4123, in the
// same order and with the same messages, with these departures (docs/fr.md):
//  - any backend prefix ("nccl:", "gloo:", "xccl:", ...) is accepted;
//  - op types torch added later (barrier, all_gather_single, ...) are known
//    collectives, and an unknown type compares as a collective instead of
//    aborting the analysis;
//  - the all_gather/reduce_scatter element-count checks are the newer
//    revision's: `_all_gather_base` is checked (the old code spells it
//    `all_gather_base` and never matches) and the list form
//    (one tensor per rank) is accepted as well as the flattened form;
//  - all_to_all_single is uneven like all_to_all: sizes are not compared;
//  - Match compares ranks with each other only. fr_trace's rules that hold one
//    rank's input against its own output (all_reduce in = out and the
//    all_gather / reduce_scatter element counts, which run after the input
//    and output sizes were found equal across the ranks; the reference's own
//    input dtypes = output dtypes) fire alike on every rank: they say how a
//    backend records the op (gloo records a DTensor gather [[64128, 32]] ->
//    [[1, 64128, 32]]), never that ranks disagree. SelfCheck reports them;
//    FrTraceMatch is the literal rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flightrec/dump.h"

namespace ek::flightrec {

enum class MatchState : uint8_t {
  kFullyMatched,
  kCollectiveTypeMismatch,
  kSizeOrSyntaxMismatch,
  kCollectiveStateMismatch,
  kCollectiveDtypeMismatch,
  kUndecided,
};

// fr_trace's enum names: "COLLECTIVE_TYPE_MISMATCH", ...
std::string_view MatchStateName(MatchState state);

struct MatchInfo {
  MatchState state = MatchState::kFullyMatched;
  std::string detail;  // fr_trace's culprit text, e.g. "Expected collective type: ..."
  bool ok() const { return state == MatchState::kFullyMatched || state == MatchState::kUndecided; }
  // "Error type: COLLECTIVE_TYPE_MISMATCH, Expected ..." (MatchInfo.__str__).
  std::string ToString() const;
};

enum class OpClass : uint8_t { kCollective, kSend, kRecv, kCoalescedMarker, kUnknown };

// A parsed profiling_name: "nccl:send 0->1" -> lib "nccl", type "send", src 0, dst 1.
struct OpName {
  std::string lib;
  std::string type;
  OpClass op_class = OpClass::kUnknown;
  int64_t src = -1;  // group-local ranks for send/recv
  int64_t dst = -1;
  bool any_source = false;  // "recv 1<-?"
};

OpName ParseOpName(std::string_view profiling_name);

// The view Match needs. String fields point into the owning Dump's symbols;
// the view lives no longer than that Dump.
struct OpView {
  const OpName* name = nullptr;
  const Entry* entry = nullptr;
  std::string_view state;
  std::string_view input_sizes, output_sizes;          // Python repr
  std::string_view input_dtype_set, output_dtype_set;  // "{'Float'}"
};

OpView MakeOpView(const Dump& dump, const Entry& entry, const OpName* name);

// Whether `other` disagrees with the reference entry `self`: fr_trace's
// `self.match(other)` without its per-rank rules (above). `pg_size` is the
// number of ranks in the group.
MatchInfo Match(const OpView& self, const OpView& other, int64_t pg_size);

// fr_trace's `self.match(other)` rule for rule, per-rank rules included.
MatchInfo FrTraceMatch(const OpView& self, const OpView& other, int64_t pg_size);

// fr_trace's per-rank rules on one entry: what fr_trace would report for it
// matched against an identical entry of another rank (FULLY_MATCHED when they hold).
MatchInfo SelfCheck(const OpView& entry, int64_t pg_size);

}  // namespace ek::flightrec
