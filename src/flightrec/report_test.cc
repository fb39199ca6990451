// The verdict on the report's shape and on the real gloo dumps made by
// tools/fr/make_real_dumps.py (PyTorch 2.15 from PyPI, 4 CPU processes).
#include "flightrec/report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "flightrec/test_util.h"

namespace ek::flightrec {
namespace {

TEST(Report, VerdictLineInTheReportsWords) {
  LoadResult load = LoadFixture("type_mismatch");
  Analysis a = Analyze(load.dumps);
  EXPECT_EQ(VerdictLine(load, a),
            "desync at pg 0 (default_pg) seq 3: ranks 0-2 in reduce_scatter [[4,256]]->[[256]]; "
            "rank 3 in all_reduce "
            "(barrier) [[1]]: different collectives at the same slot - conclusive");
  std::string text = RenderText("d", load, a);
  EXPECT_NE(
      text.find("  ranks 0-2 in reduce_scatter [[4,256]]->[[256]]:\n    reduce_scatter at "
                "torch/distributed/distributed_c10d.py:4517\n    train_step at /job/train.py:88\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("  rank 3 in all_reduce (barrier) [[1]]:\n    barrier at"), std::string::npos)
      << text;
  EXPECT_NE(text.find("missing ranks: none"), std::string::npos);
}

TEST(Report, JsonIsValidAndNamesTheCulprit) {
  LoadResult load = LoadFixture("type_mismatch");
  Analysis a = Analyze(load.dumps);
  std::string json = RenderJson("d", load, a);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_FALSE(parser.parse(json).get(root)) << json;
  EXPECT_TRUE(bool(root["desync"].get_bool()));
  EXPECT_TRUE(bool(root["conclusive"].get_bool()));
  simdjson::dom::element f0 = root["findings"].at(0);
  EXPECT_EQ(std::string_view(f0["culprits"].at(0)["error_type"].get_string()),
            "COLLECTIVE_TYPE_MISMATCH");
  EXPECT_EQ(int64_t(f0["culprits"].at(0)["rank"].get_int64()), 3);
  EXPECT_EQ(int64_t(f0["collective_seq_id"].get_int64()), 3);
}

TEST(Report, LaggingRankIsListed) {
  LoadResult load = LoadFixture("missing_rank");
  Analysis a = Analyze(load.dumps);
  EXPECT_NE(
      RenderText("d", load, a)
          .find("lagging ranks: rank 3 last issued seq 2 in pg 0 (default_pg), others reached 3"),
      std::string::npos);
}

TEST(RealDumps, GlooBarrierNamesRank3) {
  // Ranks 0-2 in the gradient reduce_scatter (gloo records reduce_scatter_tensor
  // as an all_reduce of the whole input), rank 3 in dist.barrier().
  for (const char* dir : {"real/gloo_barrier", "real/gloo_barrier/json"}) {
    LoadResult load = LoadFixture(dir);
    ASSERT_EQ(load.dumps.size(), 4u) << dir;
    EXPECT_TRUE(load.bad.empty());
    Analysis a = Analyze(load.dumps);
    const Finding* f = HeadlineFinding(a);
    ASSERT_NE(f, nullptr) << dir;
    EXPECT_EQ(f->kind, FindingKind::kErrors);
    ASSERT_EQ(f->culprits.size(), 1u);
    EXPECT_EQ(f->culprits[0].rank, 3);
    EXPECT_EQ(f->culprits[0].info.state, MatchState::kCollectiveTypeMismatch);
    EXPECT_EQ(f->collective_seq_id, 14);
    EXPECT_EQ(VerdictLine(load, a),
              "desync at pg 0 (default_pg) seq 14: ranks 0-2 in all_reduce [[1024]]; rank 3 in "
              "barrier: different "
              "collectives at the same slot - conclusive");
  }
}

TEST(RealDumps, GlooAllReduceBarrierNamesRank3) {
  // Rank 3 in the 1-element all_reduce an NCCL barrier issues.
  LoadResult load = LoadFixture("real/gloo_allreduce_barrier");
  ASSERT_EQ(load.dumps.size(), 4u);
  Analysis a = Analyze(load.dumps);
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->culprits.size(), 1u);
  EXPECT_EQ(f->culprits[0].rank, 3);
  EXPECT_EQ(f->culprits[0].info.state, MatchState::kSizeOrSyntaxMismatch);
  EXPECT_NE(VerdictLine(load, a).find("rank 3 in all_reduce [[1]]"), std::string::npos);
  // The real pickles carry stack frames; the verdict's entry shows them.
  EXPECT_NE(RenderText("d", load, a).find("save_barrier at"), std::string::npos);
}

}  // namespace
}  // namespace ek::flightrec
