// The verdict on real gloo dumps of the reference trainer (FSDP2, 2 CPU ranks,
// PyTorch 2.15) failing in each phase, recorded by tools/fr/record_gloo_dumps.py
// into testdata/fr/gloo/<case>/, and on the synthetic size cases of
// tools/fr/make_fixtures.py. A rank that raised is a rank that stopped: never a
// conclusive desync (a restart may well get past it). Only the uneven-data
// deadlock, where live ranks sit in different collectives, is conclusive.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "flightrec/analyzer.h"
#include "flightrec/report.h"
#include "flightrec/test_util.h"

namespace ek::flightrec {
namespace {

struct PhaseCase {
  const char* dir;
  int64_t stopped_rank;  // the rank that raised
  int64_t stopped_seq;   // its last collective
  const char* waiting;   // what the other rank waits in, as the verdict prints it
};

class GlooPhaseTest : public ::testing::TestWithParam<PhaseCase> {};

TEST_P(GlooPhaseTest, AnExceptionIsARankThatStoppedNotADesync) {
  const PhaseCase& c = GetParam();
  LoadResult load = LoadFixture(std::string("gloo/") + c.dir);
  ASSERT_EQ(load.dumps.size(), 2u);
  ASSERT_TRUE(load.bad.empty());
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(Conclusive(a)) << VerdictLine(load, a);
  EXPECT_TRUE(RankStopped(*f));
  EXPECT_EQ(f->kind, FindingKind::kMissingRanks);
  ASSERT_EQ(f->stopped.size(), 1u);
  EXPECT_EQ(f->stopped[0].rank, c.stopped_rank);
  EXPECT_EQ(f->stopped[0].last_seq, c.stopped_seq);
  EXPECT_EQ(f->collective_seq_id, c.stopped_seq + 1);
  int64_t other = 1 - c.stopped_rank;
  EXPECT_EQ(
      VerdictLine(load, a),
      fmt::format(
          "rank {} stopped issuing collectives at pg 0 (default_pg) seq {} (exited, or hangs "
          "outside a "
          "collective); rank {} waits in seq {} {}: a rank stopped, not a desync - inconclusive",
          c.stopped_rank, c.stopped_seq, other, c.stopped_seq + 1, c.waiting));
  // The text shows where the stopped rank was last seen (the dumps carry frames).
  EXPECT_NE(RenderText("d", load, a)
                .find(fmt::format("stack frames of rank {}'s last entry (seq {} ", c.stopped_rank,
                                  c.stopped_seq)),
            std::string::npos);
  // Every collective before the stop matched on both ranks.
  EXPECT_EQ(a.collectives_matched, static_cast<size_t>(c.stopped_seq));
}

INSTANTIATE_TEST_SUITE_P(
    Phases, GlooPhaseTest,
    ::testing::Values(PhaseCase{"forward", 1, 65, "all_gather [[4861984]]->[[2,4861984]]"},
                      PhaseCase{"backward", 0, 68, "all_gather [[4861984]]->[[2,4861984]]"},
                      PhaseCase{"optimizer", 1, 78, "all_gather [[4861984]]->[[2,4861984]]"},
                      PhaseCase{"save_gather", 0, 98, "all_gather [[16,64]]->[[1,16,64]]"},
                      PhaseCase{"save_write", 0, 96, "all_gather [[32,64]]->[[1,32,64]]"},
                      PhaseCase{"barrier", 1, 94, "barrier"}),
    [](const auto& info) { return std::string(info.param.dir); });

TEST(GlooDumps, TheSavesGathersAreNotASizeMismatch) {
  // The save gathers each parameter with DTensor.full_tensor(), which gloo
  // records as all_gather [[N, 64]] -> [[1, N, 64]] on every rank: fr_trace's
  // per-rank element-count rule fails alike on both; it is a note, not a finding.
  LoadResult load = LoadFixture("gloo/save_write");
  Analysis a = Analyze(load.dumps);
  for (const Finding& f : a.findings) {
    for (const Culprit& c : f.culprits)
      EXPECT_NE(c.info.state, MatchState::kSizeOrSyntaxMismatch) << c.info.detail;
  }
  EXPECT_TRUE(std::any_of(a.notes.begin(), a.notes.end(), [](const std::string& n) {
    return n.find("fr_trace reports Error type: SIZE_OR_SYNTAX_MISMATCH, Found input numel") !=
               std::string::npos &&
           n.find("on every rank alike") != std::string::npos;
  })) << fmt::format("{}", fmt::join(a.notes, "\n"));
}

TEST(GlooDumps, TheUnevenDataDeadlockStaysConclusive) {
  // evenfix off, blocks [12, 8]: rank 1 runs out of data and enters the final
  // save's barrier while rank 0 enters step 5's forward all_gather.
  LoadResult load = LoadFixture("gloo/deadlock");
  ASSERT_EQ(load.dumps.size(), 2u);
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(Conclusive(a)) << VerdictLine(load, a);
  EXPECT_EQ(f->kind, FindingKind::kErrors);
  ASSERT_EQ(f->culprits.size(), 1u);
  EXPECT_EQ(f->culprits[0].info.state, MatchState::kCollectiveTypeMismatch);
  std::string line = VerdictLine(load, a);
  EXPECT_NE(line.find("rank 0 in all_gather"), std::string::npos) << line;
  EXPECT_NE(line.find("rank 1 in barrier"), std::string::npos) << line;
  EXPECT_TRUE(line.ends_with("different collectives at the same slot - conclusive")) << line;
}

TEST(SizeRules, CrossRankSizeMismatchIsConclusive) {
  LoadResult load = LoadFixture("cross_rank_size");
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(Conclusive(a));
  ASSERT_EQ(f->culprits.size(), 1u);
  EXPECT_EQ(f->culprits[0].rank, 1);
  EXPECT_EQ(f->culprits[0].info.state, MatchState::kSizeOrSyntaxMismatch);
  EXPECT_EQ(VerdictLine(load, a),
            "desync at pg 0 (default_pg) seq 2: rank 0 in all_reduce [[10]]; rank 1 in all_reduce "
            "[[12]]: same "
            "collective, different sizes - conclusive");
}

TEST(SizeRules, OneRanksAllGatherInputOutputNumelIsNotAMismatch) {
  LoadResult load = LoadFixture("allgather_own_numel");
  Analysis a = Analyze(load.dumps);
  EXPECT_EQ(HeadlineFinding(a), nullptr) << VerdictLine(load, a);
  EXPECT_FALSE(Conclusive(a));
  EXPECT_EQ(a.collectives_matched, 2u);
  EXPECT_EQ(VerdictLine(load, a),
            "no desync: 2 collectives matched across ranks 0-1 (fr_trace finds no mismatch)");
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find(
                "Found input numel '2052096 * pg size 2' does not match output numel '2052096'"),
            std::string::npos)
      << a.notes[0];
}

TEST(SizeRules, ARankWithoutADumpIsNamedWhereTheOthersWait) {
  // A SIGSTOPped rank writes no dump: say where the dumps present end.
  LoadResult full = LoadFixture("gloo/forward");
  ASSERT_EQ(full.dumps.size(), 2u);
  LoadResult load;
  load.prefix = full.prefix;
  load.world_size = full.world_size;
  load.dumps.push_back(std::move(full.dumps[0]));
  Analysis a = Analyze(load.dumps);
  EXPECT_FALSE(Conclusive(a));
  EXPECT_EQ(VerdictLine(load, a),
            "undecided: rank 1 left no dump (stopped progressing, or killed before it could write "
            "one); rank 0 last in "
            "pg 0 (default_pg) seq 66 all_gather [[4861984]]->[[2,4861984]]: no mismatch among the "
            "dumps present - "
            "inconclusive");
}

// Drops rank `drop`'s dump from a fixture, as if that rank had left none.
LoadResult Without(const char* fixture, int64_t drop) {
  LoadResult full = LoadFixture(fixture);
  LoadResult load;
  load.prefix = full.prefix;
  load.world_size = full.world_size;
  for (Dump& d : full.dumps) {
    if (d.rank != drop) load.dumps.push_back(std::move(d));
  }
  return load;
}

TEST(MissingDumps, AMissingDumpDoesNotHideADesyncAmongTheOthers) {
  // The report's desync (rank 3 in the barrier, ranks 0-2 in reduce_scatter at
  // seq 3) with rank 1's dump lost: ranks 0, 2 and 3 still disagree.
  LoadResult load = Without("type_mismatch", 1);
  ASSERT_EQ(load.dumps.size(), 3u);
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, FindingKind::kErrors);
  EXPECT_EQ(f->collective_seq_id, 3);
  EXPECT_TRUE(Conclusive(a));
  EXPECT_EQ(
      VerdictLine(load, a),
      "desync at pg 0 (default_pg) seq 3: ranks 0,2 in reduce_scatter [[4,256]]->[[256]]; rank 3 "
      "in all_reduce "
      "(barrier) [[1]]; rank 1 left no dump: different collectives at the same slot - conclusive");
}

TEST(MissingDumps, ARankThatStoppedIsNamedWhenAnotherDumpIsMissing) {
  // missing_rank: rank 3's entries end at seq 2; ranks 0-2 are in seq 3. Rank 0's dump is lost.
  LoadResult load = Without("missing_rank", 0);
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(RankStopped(*f));
  EXPECT_FALSE(Conclusive(a));
  EXPECT_EQ(VerdictLine(load, a),
            "rank 3 stopped issuing collectives at pg 0 (default_pg) seq 2 (exited, or hangs "
            "outside a collective); "
            "ranks 1-2 wait in seq 3 reduce_scatter [[4,256]]->[[256]]; rank 0 left no dump: a "
            "rank stopped, not a "
            "desync - inconclusive");
}

TEST(MissingDumps, AgreeingSlotsAreNotFindingsOnlyTheLastIs) {
  // fr_trace logs "cannot decide" for every slot and stops at its mismatch cap;
  // here the slots the dumps present agree on are one finding, at the last.
  LoadResult load = Without("type_mismatch", 3);
  Analysis a = Analyze(load.dumps);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].kind, FindingKind::kMissingDumps);
  EXPECT_EQ(a.findings[0].collective_seq_id, 3);
  EXPECT_FALSE(a.stopped_at_cap);
  EXPECT_FALSE(Conclusive(a));
}

}  // namespace
}  // namespace ek::flightrec
