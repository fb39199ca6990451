#include "flightrec/loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "flightrec/report.h"
#include "flightrec/test_util.h"

namespace ek::flightrec {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("ek_fr_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(SplitRankName, FollowsFrTraceRegex) {
  std::string prefix;
  int64_t rank;
  ASSERT_TRUE(SplitRankName("nccl_trace_rank_12", &prefix, &rank));
  EXPECT_EQ(prefix, "nccl_trace_rank_");
  EXPECT_EQ(rank, 12);
  ASSERT_TRUE(SplitRankName("dump.rank_3", &prefix, &rank));  // '.' is not in [\w-]
  EXPECT_EQ(prefix, "rank_");
  EXPECT_EQ(rank, 3);
  EXPECT_FALSE(SplitRankName("README", &prefix, &rank));
}

TEST(Loader, BadFilesAreReportedOneErrorEachAndTheRestAnalysed) {
  LoadResult load = LoadFixture("bad_input");
  ASSERT_EQ(load.dumps.size(), 2u);
  EXPECT_EQ(load.dumps[0].rank, 0);
  EXPECT_EQ(load.dumps[1].rank, 1);
  EXPECT_EQ(load.world_size, 6);
  ASSERT_EQ(load.bad.size(), 4u);
  EXPECT_EQ(load.bad[0].rank, 2);
  EXPECT_NE(load.bad[0].status.message().find("nccl_trace_rank_2: byte"), std::string::npos);
  EXPECT_NE(load.bad[0].status.message().find("truncated"), std::string::npos);
  EXPECT_EQ(load.bad[1].rank, 3);
  EXPECT_NE(load.bad[1].status.message().find(
                "nccl_trace_rank_3: byte 418: opcode 0x63 (GLOBAL) is not allowed"),
            std::string::npos);
  EXPECT_EQ(load.bad[2].rank, 4);
  EXPECT_NE(load.bad[2].status.message().find("unknown dump version '3.0'"), std::string::npos);
  EXPECT_EQ(load.bad[3].rank, 5);
  EXPECT_NE(load.bad[3].status.message().find("world size 8 differs from 6"), std::string::npos);
  Analysis a = Analyze(load.dumps);
  EXPECT_EQ(a.missing_dump_ranks, (std::vector<int64_t>{2, 3, 4, 5}));
  const Finding* f = HeadlineFinding(a);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kind, FindingKind::kMissingDumps);
  std::string text = RenderText("d", load, a);
  EXPECT_NE(text.find("missing ranks: 2-5\n"), std::string::npos);
  EXPECT_NE(text.find("verdict: undecided: ranks 2-5 left no dump (stopped progressing, or killed "
                      "before it could write "
                      "one); ranks 0-1 last in pg 0 (default_pg) seq 2 all_reduce [[16]]: no "
                      "mismatch among the dumps "
                      "present - inconclusive\n"),
            std::string::npos)
      << text;
}

TEST(Loader, EmptyDirIsAnError) {
  fs::path dir = TempDir("empty");
  auto r = LoadDumps(dir.string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no flight-recorder dumps"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Loader, MissingDirIsAnError) { EXPECT_FALSE(LoadDumps("/nonexistent/fr", {}).ok()); }

TEST(Loader, SeveralPrefixesNeedDashPrefix) {
  fs::path dir = TempDir("prefixes");
  fs::copy_file(FixtureDir("type_mismatch") + "/nccl_trace_rank_0", dir / "a_0");
  fs::copy_file(FixtureDir("type_mismatch") + "/nccl_trace_rank_1", dir / "b_1");
  auto r = LoadDumps(dir.string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("several prefixes"), std::string::npos);
  LoadOptions opts;
  opts.prefix = "b_";
  auto only_b = LoadDumps(dir.string(), opts);
  ASSERT_TRUE(only_b.ok());
  ASSERT_EQ(only_b->dumps.size(), 1u);
  EXPECT_EQ(only_b->dumps[0].rank, 1);
  fs::remove_all(dir);
}

TEST(Loader, SecondFileForARankIsBad) {
  fs::path dir = TempDir("dup");
  fs::copy_file(FixtureDir("type_mismatch") + "/nccl_trace_rank_1", dir / "r_1");
  fs::copy_file(FixtureDir("type_mismatch") + "/nccl_trace_rank_1", dir / "r_01");
  auto r = LoadDumps(dir.string(), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dumps.size(), 1u);
  ASSERT_EQ(r->bad.size(), 1u);
  EXPECT_NE(r->bad[0].status.message().find("a second file for rank 1"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Loader, EmptyAndGarbageFilesAreBadNotFatal) {
  fs::path dir = TempDir("garbage");
  for (int r = 0; r < 4; ++r) {
    fs::copy_file(FixtureDir("type_mismatch") + "/nccl_trace_rank_" + std::to_string(r),
                  dir / ("t_" + std::to_string(r)));
  }
  std::ofstream(dir / "t_4").close();
  std::ofstream(dir / "t_5") << "not a dump";
  auto r = LoadDumps(dir.string(), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dumps.size(), 4u);
  EXPECT_EQ(r->bad.size(), 2u);
  fs::remove_all(dir);
}

TEST(Loader, ParallelAndSerialLoadsAgree) {
  LoadOptions one;
  one.threads = 1;
  LoadOptions many;
  many.threads = 8;
  auto a = LoadDumps(FixtureDir("type_mismatch"), one);
  auto b = LoadDumps(FixtureDir("type_mismatch"), many);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(RenderJson("d", *a, Analyze(a->dumps)), RenderJson("d", *b, Analyze(b->dumps)));
}

}  // namespace
}  // namespace ek::flightrec
