// Categories and sequence ids on the fixtures made by tools/fr/make_fixtures.py,
// as fr_trace reports them (docs/fr.md lists the cases).
#include "flightrec/analyzer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "flightrec/report.h"
#include "flightrec/test_util.h"

namespace ek::flightrec {
namespace {

std::vector<int64_t> CulpritRanks(const Finding& f) {
  std::vector<int64_t> r;
  for (const auto& c : f.culprits) r.push_back(c.rank);
  return r;
}

struct Case {
  const char* fixture;
  FindingKind kind;
  MatchState state;  // of the first culprit (ignored for kMissingRanks)
  int64_t seq;
  std::vector<int64_t> culprits;
  size_t matched;
};

class FixtureTest : public ::testing::TestWithParam<Case> {};

TEST_P(FixtureTest, FirstMismatchAsFrTrace) {
  const Case& c = GetParam();
  LoadResult load = LoadFixture(c.fixture);
  ASSERT_TRUE(load.bad.empty()) << load.bad.front().status.message();
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, c.kind);
  EXPECT_EQ(f->collective_seq_id, c.seq);
  EXPECT_EQ(CulpritRanks(*f), c.culprits);
  if (!f->culprits.empty()) {
    EXPECT_EQ(f->culprits[0].info.state, c.state);
  }
  EXPECT_EQ(a.collectives_matched, c.matched);
  EXPECT_EQ(f->reference_rank, f->fr_trace_reference_rank);  // no departure on these
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureTest,
    ::testing::Values(
        Case{"type_mismatch", FindingKind::kErrors, MatchState::kCollectiveTypeMismatch, 3, {3}, 2},
        Case{"type_mismatch_json",
             FindingKind::kErrors,
             MatchState::kCollectiveTypeMismatch,
             3,
             {3},
             2},
        Case{"size_mismatch", FindingKind::kErrors, MatchState::kSizeOrSyntaxMismatch, 3, {3}, 2},
        Case{"state_mismatch",
             FindingKind::kErrors,
             MatchState::kCollectiveStateMismatch,
             3,
             {3},
             2},
        Case{"dtype_mismatch",
             FindingKind::kErrors,
             MatchState::kCollectiveDtypeMismatch,
             2,
             {1},
             1},
        Case{"missing_rank", FindingKind::kMissingRanks, MatchState::kFullyMatched, 3, {}, 2},
        // testBuildDB case 3 (broadcast x2 + coalesced: one passing collective)
        // and case 4 (_broadcast_oop [[5,5]] vs [[4,4]] inside a group: fails).
        Case{"coalesced", FindingKind::kErrors, MatchState::kSizeOrSyntaxMismatch, 2, {1}, 1},
        // two all_reduces, a lone send/recv, a coalesced send/recv batch match;
        // then a send of [[16]] meets a recv of [[8]].
        Case{"p2p", FindingKind::kErrors, MatchState::kSizeOrSyntaxMismatch, 2, {1}, 4},
        Case{"v1_type_mismatch",
             FindingKind::kErrors,
             MatchState::kCollectiveTypeMismatch,
             2,
             {1},
             1}),
    [](const auto& info) { return std::string(info.param.fixture); });

TEST(Analyzer, MissingRankIsNamed) {
  LoadResult load = LoadFixture("missing_rank");
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->missing_ranks, (std::vector<int64_t>{3}));
  EXPECT_TRUE(f->missing_dump_ranks.empty());
}

TEST(Analyzer, CoalescedFailureIsTheOffendingOp) {
  LoadResult load = LoadFixture("coalesced");
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->record_id, 4);  // the second _broadcast_oop of the group
  EXPECT_EQ(f->entries.front().dump->sym(f->entries.front().entry->profiling_name),
            "nccl:_broadcast_oop");
}

TEST(Analyzer, MajorityIsReferenceWhenRankZeroIsTheOddOne) {
  // fr_trace with rank 0 listed first blames ranks 1-3; evenkeel names rank 0
  // and records where it departs.
  LoadResult load = LoadFixture("type_mismatch_rank0");
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(CulpritRanks(*f), (std::vector<int64_t>{0}));
  EXPECT_EQ(f->reference_rank, 1);
  EXPECT_EQ(f->fr_trace_reference_rank, 0);
  EXPECT_EQ(f->fr_trace_culprits, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_NE(RenderText("d", load, a).find("note: fr_trace takes the first-listed rank's entry"),
            std::string::npos);
}

TEST(Analyzer, VerdictDoesNotDependOnTheOrderDumpsArrive) {
  // fr_trace's reference is the first-listed rank; here every order of the
  // same four dumps must give the same verdict and the same culprit.
  for (const char* fixture : {"type_mismatch_rank0", "type_mismatch", "size_mismatch"}) {
    LoadResult sorted = LoadFixture(fixture);
    Analysis base = Analyze(sorted.dumps);
    std::string want = VerdictLine(sorted, base);
    std::vector<size_t> perm = {0, 1, 2, 3};
    while (std::next_permutation(perm.begin(), perm.end())) {
      LoadResult shuffled = LoadFixture(fixture);
      std::vector<Dump> dumps;
      for (size_t i : perm) dumps.push_back(std::move(shuffled.dumps[i]));
      shuffled.dumps = std::move(dumps);
      Analysis a = Analyze(shuffled.dumps);
      EXPECT_EQ(VerdictLine(shuffled, a), want) << fixture;
      ASSERT_NE(HeadlineFinding(a), nullptr);
      EXPECT_EQ(CulpritRanks(*HeadlineFinding(a)), CulpritRanks(*HeadlineFinding(base))) << fixture;
    }
  }
}

TEST(Analyzer, HealthyPrefixMatchesEverything) {
  LoadResult load = LoadFixture("type_mismatch");
  // Drop each rank's last entry: what is left is two matching collectives.
  for (Dump& d : load.dumps) d.entries.pop_back();
  Analysis a = Analyze(load.dumps);
  EXPECT_EQ(HeadlineFinding(a), nullptr);
  EXPECT_EQ(a.collectives_matched, 2u);
  EXPECT_EQ(VerdictLine(load, a),
            "no desync: 2 collectives matched across ranks 0-3 (fr_trace finds no mismatch)");
}

TEST(Analyzer, TieBetweenTwoRanksKeepsTheLowerRankAsReference) {
  LoadResult load = LoadFixture("dtype_mismatch");
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->reference_rank, 0);
  EXPECT_EQ(CulpritRanks(*f), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace ek::flightrec

namespace ek::flightrec {
namespace {

std::string P2pEntry(int record, const char* name, bool p2p, int coll_seq, int p2p_seq) {
  return fmt::format(
      R"({{"record_id":{},"pg_id":0,"process_group":["0","default_pg"],"collective_seq_id":{},)"
      R"("p2p_seq_id":{},"op_id":{},"profiling_name":"{}","time_created_ns":1,"input_sizes":[[4]],)"
      R"("input_dtypes":["Float"],"output_sizes":[[4]],"output_dtypes":["Float"],"state":"completed",)"
      R"("is_p2p":{}}})",
      record, coll_seq, p2p_seq, record + 1, name, p2p ? "true" : "false");
}

Dump P2pDump(int rank, const std::vector<std::string>& entries) {
  std::string json =
      R"({"version":"2.10","pg_config":{"0":{"name":"0","desc":"default_pg","ranks":"[0, 1]"}},"entries":[)";
  for (size_t i = 0; i < entries.size(); ++i) json += (i ? "," : "") + entries[i];
  json += "]}";
  auto d = ParseDump(json, "rank" + std::to_string(rank), rank);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? std::move(d).value() : Dump{};
}

// Departure 6 of docs/fr.md: fr_trace looks a coalesced recv's partner up in
// the recv's own list, so a batch whose first op on the lowest rank is a recv
// fails there; evenkeel looks on the sender and pairs it.
TEST(Analyzer, CoalescedBatchStartingWithARecvPairsUp) {
  std::vector<Dump> dumps;
  dumps.push_back(P2pDump(
      0, {P2pEntry(0, "nccl:recv 0<-1", true, 0, 1), P2pEntry(1, "nccl:send 0->1", true, 0, 1),
          P2pEntry(2, "nccl:coalesced", true, 0, 1)}));
  dumps.push_back(P2pDump(
      1, {P2pEntry(0, "nccl:send 1->0", true, 0, 1), P2pEntry(1, "nccl:recv 1<-0", true, 0, 1),
          P2pEntry(2, "nccl:coalesced", true, 0, 1)}));
  Analysis a = Analyze(dumps);
  EXPECT_EQ(HeadlineFinding(a), nullptr);
  EXPECT_EQ(a.collectives_matched, 1u);
}

TEST(Analyzer, CoalescedBatchWithAnUnpairedSendFails) {
  std::vector<Dump> dumps;
  dumps.push_back(P2pDump(
      0, {P2pEntry(0, "nccl:send 0->1", true, 0, 1), P2pEntry(1, "nccl:send 0->1", true, 0, 1),
          P2pEntry(2, "nccl:coalesced", true, 0, 1)}));
  dumps.push_back(P2pDump(
      1, {P2pEntry(0, "nccl:recv 1<-0", true, 0, 1), P2pEntry(1, "nccl:coalesced", true, 0, 1)}));
  Analysis a = Analyze(dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, FindingKind::kP2pMismatch);
  EXPECT_EQ(a.collectives_matched, 0u);
}

// Regression: all_to_all element counts summed over ranks overflowed int64
// (each rank's count fits; two of 2^62 do not). They are compared exactly and
// reported saturated.
TEST(Analyzer, AllToAllCountsSummedPastInt64DoNotOverflow) {
  auto dump = [](int rank, const char* out) {
    std::string json = fmt::format(
        R"({{"version":"2.10","pg_config":{{"0":{{"name":"0","desc":"default_pg","ranks":"[0, 1]"}}}},)"
        R"("pg_status":{{}},"entries":[{{"record_id":0,"pg_id":0,"collective_seq_id":1,"p2p_seq_id":0,"op_id":1,)"
        R"("profiling_name":"nccl:all_to_all","process_group":["0","default_pg"],"is_p2p":false,)"
        R"("input_sizes":[[4611686018427387904]],"output_sizes":[[{}]],"input_dtypes":["Float"],)"
        R"("output_dtypes":["Float"],"state":"completed","time_created_ns":1,"timeout_ms":600000}}]}})",
        out);
    auto d = ParseDump(json, fmt::format("rank{}", rank), rank);
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? std::move(d).value() : Dump{};
  };
  std::vector<Dump> dumps;
  dumps.push_back(dump(0, "4611686018427387904"));
  dumps.push_back(dump(1, "4611686018427387903"));
  Analysis a = Analyze(dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, FindingKind::kAllToAllNumel);
  EXPECT_EQ(f->total_input_numel, std::numeric_limits<int64_t>::max());   // 2^63, saturated
  EXPECT_EQ(f->total_output_numel, std::numeric_limits<int64_t>::max());  // 2^63 - 1
}

}  // namespace
}  // namespace ek::flightrec
