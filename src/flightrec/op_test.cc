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

MatchState MatchEvents(const Event& a, const Event& b) {
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
  return Match(va, vb, 2).state;
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
  Event done = ar;
  done.state = "completed";
  EXPECT_EQ(MatchEvents(ar, done), MatchState::kCollectiveStateMismatch);
  Event half = done;
  half.out_dtype = "{'float16'}";
  EXPECT_EQ(MatchEvents(half, done), MatchState::kCollectiveDtypeMismatch);
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
  for (const char* name : {"broadcast", "_broadcast_oop", "reduce", "_reduce_oop", "all_gather", "all_reduce",
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
  rs.in_numel0 = 512;
  EXPECT_EQ(MatchEvents(rs, rs), MatchState::kFullyMatched);
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
