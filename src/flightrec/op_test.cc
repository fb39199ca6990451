// The match_one_event and test_all_events vectors of fr_trace's
// test/distributed/flight_recorder/test_fr_analysis.py (pg {0, 1}).
#include "flightrec/op.h"

#include <gtest/gtest.h>

namespace ek::flightrec {
namespace {

struct Event {
  std::string name = "nccl:all_reduce";
  std::string in = "[[4, 4]]", out = "[[4, 4]]";
  std::string in_dtype = "{'float32'}", out_dtype = "{'float32'}";
  std::string state = "scheduled";
  int64_t in_numel0 = 16, out_numel0 = 16;
  int32_t in_tensors = 1, out_tensors = 1;
  FirstShape in0 = FirstShape::kNonEmpty, out0 = FirstShape::kNonEmpty;
};

// fr_trace's rule (FrTraceMatch) by default; `cross_rank` for evenkeel's Match.
MatchInfo MatchInfoOf(const Event& a, const Event& b, bool cross_rank = false,
                      int64_t pg_size = 2) {
  OpName na = ParseOpName(a.name), nb = ParseOpName(b.name);
  Entry ea, eb;
  auto fill = [](const Event& ev, Entry* e) {
    e->input_numel0 = ev.in_numel0;
    e->output_numel0 = ev.out_numel0;
    e->input_numel = ev.in_numel0 * ev.in_tensors;
    e->output_numel = ev.out_numel0 * ev.out_tensors;
    e->input_tensors = ev.in_tensors;
    e->output_tensors = ev.out_tensors;
    e->input0 = ev.in0;
    e->output0 = ev.out0;
  };
  fill(a, &ea);
  fill(b, &eb);
  OpView va{&na, &ea, a.state, a.in, a.out, a.in_dtype, a.out_dtype};
  OpView vb{&nb, &eb, b.state, b.in, b.out, b.in_dtype, b.out_dtype};
  return cross_rank ? Match(va, vb, pg_size) : FrTraceMatch(va, vb, pg_size);
}

MatchState MatchEvents(const Event& a, const Event& b, bool cross_rank = false) {
  return MatchInfoOf(a, b, cross_rank).state;
}

TEST(Match, FrTraceMatchOneEvent) {
  Event ar;
  EXPECT_EQ(MatchEvents(ar, ar), MatchState::kFullyMatched);
  Event ag = ar;
  ag.name = "nccl:all_gather";
  EXPECT_EQ(MatchEvents(ar, ag), MatchState::kCollectiveTypeMismatch);
  Event a2a = ar;
  a2a.name = "nccl:all_to_all";
  EXPECT_EQ(MatchEvents(a2a, a2a), MatchState::kUndecided);
  Event in5 = ar;
  in5.in = "[[5, 4]]";
  EXPECT_EQ(MatchEvents(ar, in5), MatchState::kSizeOrSyntaxMismatch);
  Event out5 = ar;
  out5.out = "[[5, 4]]";
  EXPECT_EQ(MatchEvents(ar, out5), MatchState::kSizeOrSyntaxMismatch);
  EXPECT_EQ(MatchEvents(out5, out5), MatchState::kSizeOrSyntaxMismatch);  // all_reduce in != out
  EXPECT_EQ(MatchEvents(out5, out5, /*cross_rank=*/true),
            MatchState::kFullyMatched);  // the ranks agree
  Event done = ar;
  done.state = "completed";
  EXPECT_EQ(MatchEvents(ar, done), MatchState::kCollectiveStateMismatch);
  Event half = done;
  half.out_dtype = "{'float16'}";
  EXPECT_EQ(MatchEvents(half, done), MatchState::kCollectiveDtypeMismatch);
  EXPECT_EQ(MatchEvents(half, done, /*cross_rank=*/true),
            MatchState::kCollectiveDtypeMismatch);  // outputs differ across ranks
  Event gather = ar;
  gather.name = "nccl:gather";
  gather.out = "[[4, 4], [4, 4]]";
  gather.out_tensors = 2;
  Event gather_empty = gather;
  gather_empty.out = "[[]]";
  gather_empty.out_dtype = "{''}";
  gather_empty.out0 = FirstShape::kEmpty;
  EXPECT_EQ(MatchEvents(gather, gather_empty), MatchState::kFullyMatched);
  Event gather_one = gather;
  gather_one.out = "[[4, 4]]";
  EXPECT_EQ(MatchEvents(gather, gather_one), MatchState::kFullyMatched);
}

TEST(Match, FrTraceAllEventsMatchThemselves) {
  for (const char* name :
       {"broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather", "all_reduce",
        "_all_gather_base", "all_gather_into_tensor_coalesced", "reduce_scatter",
        "reduce_scatter_tensor_coalesced", "_reduce_scatter_base", "gather", "scatter",
        "all_to_all", "all_reduce_barrier", "allreduce_coalesced", "ALLGATHER_coalesced",
        "REDUCE_SCATTER_coalesced"}) {
    Event e;
    e.name = std::string("nccl:") + name;
    std::string t = name;
    if (t.find("reduce_scatter") != std::string::npos) {
      e.out = "[[8]]";
      e.out_numel0 = 8;
    } else if (t.find("all_gather") != std::string::npos) {
      e.out = "[[32]]";
      e.out_numel0 = 32;
    }
    MatchState want = t == "all_to_all" ? MatchState::kUndecided : MatchState::kFullyMatched;
    EXPECT_EQ(MatchEvents(e, e), want) << name;
  }
}

TEST(Match, ReduceScatterNumelIsChecked) {
  Event rs;
  rs.name = "nccl:reduce_scatter";
  rs.in = "[[4, 256]]";
  rs.out = "[[256]]";
  rs.in_numel0 = 1024;
  rs.out_numel0 = 256;
  // pg size 2 in MatchEvents: 1024 != 256 * 2, in flat or list form.
  EXPECT_EQ(MatchEvents(rs, rs), MatchState::kSizeOrSyntaxMismatch);
  EXPECT_EQ(MatchEvents(rs, rs, /*cross_rank=*/true), MatchState::kFullyMatched);
  rs.in_numel0 = 512;
  EXPECT_EQ(MatchEvents(rs, rs), MatchState::kFullyMatched);
}

// The false "conclusive desync" of a save on gloo: both ranks in the same gather
// of a sharded parameter, recorded [[64128, 32]] -> [[1, 64128, 32]]. fr_trace's
// element-count rule holds one rank's input against its own output and fails
// alike on every rank; ranks that record the same sizes do not disagree.
TEST(Match, AllGatherInputOutputNumelOfOneRankIsNotACrossRankMismatch) {
  Event ag;
  ag.name = "gloo:all_gather";
  ag.in = "[[64128, 32]]";
  ag.out = "[[1, 64128, 32]]";
  ag.in_numel0 = ag.out_numel0 = 64128 * 32;
  MatchInfo fr = MatchInfoOf(ag, ag);
  EXPECT_EQ(fr.state, MatchState::kSizeOrSyntaxMismatch);
  EXPECT_EQ(fr.detail,
            "Found input numel '2052096 * pg size 2' does not match output numel '2052096'");
  EXPECT_EQ(MatchEvents(ag, ag, /*cross_rank=*/true), MatchState::kFullyMatched);
  // SelfCheck reports what fr_trace would say about the entry.
  OpName n = ParseOpName(ag.name);
  Entry e;
  e.input_numel0 = e.output_numel0 = ag.in_numel0;
  e.input_numel = e.output_numel = ag.in_numel0;
  e.input_tensors = e.output_tensors = 1;
  e.input0 = e.output0 = FirstShape::kNonEmpty;
  OpView v{&n, &e, ag.state, ag.in, ag.out, ag.in_dtype, ag.out_dtype};
  EXPECT_EQ(SelfCheck(v, 2).state, MatchState::kSizeOrSyntaxMismatch);
  // The flattened form the NCCL backend records passes both.
  Event flat = ag;
  flat.out = "[[128256, 32]]";
  flat.out_numel0 = 2 * 64128 * 32;
  EXPECT_EQ(MatchEvents(flat, flat), MatchState::kFullyMatched);
}

// Sizes that disagree across ranks stay a conclusive SIZE_OR_SYNTAX_MISMATCH, for
// every collective whose sizes fr_trace compares (not scatter's input, gather's
// output, all_to_all's).
TEST(Match, CrossRankSizeMismatchIsAMismatch) {
  for (const char* name :
       {"gloo:all_reduce", "nccl:all_gather", "nccl:_all_gather_base", "nccl:reduce_scatter",
        "nccl:_reduce_scatter_base", "nccl:all_gather_into_tensor_coalesced",
        "nccl:reduce_scatter_tensor_coalesced", "nccl:broadcast", "gloo:allgather_coalesced"}) {
    Event a, b;
    a.name = b.name = name;
    a.in = a.out = "[[10]]";
    b.in = b.out = "[[12]]";
    a.in_numel0 = a.out_numel0 = 10;
    b.in_numel0 = b.out_numel0 = 12;
    MatchInfo info = MatchInfoOf(a, b, /*cross_rank=*/true);
    EXPECT_EQ(info.state, MatchState::kSizeOrSyntaxMismatch) << name;
    EXPECT_EQ(info.detail,
              "Expected input sizes: '[[10]]' does not match found input sizes: '[[12]]'")
        << name;
  }
  Event a2a, other;
  a2a.name = other.name = "nccl:all_to_all";
  other.in = "[[8]]";
  EXPECT_EQ(MatchEvents(a2a, other, /*cross_rank=*/true), MatchState::kUndecided);
}

TEST(Match, SendRecv) {
  Event send, recv;
  send.name = "nccl:send 0->1";
  recv.name = "nccl:recv 1<-0";
  EXPECT_EQ(MatchEvents(send, recv), MatchState::kFullyMatched);
  EXPECT_EQ(MatchEvents(recv, send), MatchState::kFullyMatched);
  Event bigger = recv;
  bigger.out = "[[8]]";
  EXPECT_EQ(MatchEvents(send, bigger), MatchState::kSizeOrSyntaxMismatch);
  EXPECT_EQ(MatchEvents(send, send), MatchState::kSizeOrSyntaxMismatch);
}

TEST(OpName, Parses) {
  OpName s = ParseOpName("nccl:send 2->3");
  EXPECT_EQ(s.op_class, OpClass::kSend);
  EXPECT_EQ(s.src, 2);
  EXPECT_EQ(s.dst, 3);
  OpName r = ParseOpName("gloo:recv 1<-0");
  EXPECT_EQ(r.lib, "gloo");
  EXPECT_EQ(r.src, 0);
  EXPECT_EQ(r.dst, 1);
  EXPECT_EQ(ParseOpName("nccl:coalesced").op_class, OpClass::kCoalescedMarker);
  EXPECT_EQ(ParseOpName("gloo:barrier").op_class, OpClass::kCollective);
  EXPECT_EQ(ParseOpName("nccl:frobnicate").op_class, OpClass::kUnknown);
}

}  // namespace
}  // namespace ek::flightrec
