#include "report/inputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/file.h"

namespace ek::report {
namespace {

const std::string kTriage = std::string(EK_SOURCE_DIR) + "/testdata/triage";

TEST(InputsTest, TheDeadlockFixtureGetsTheClassifiersVerdicts) {
  ReportInputs in;
  in.telemetry = {kTriage + "/healthy_deadlock/node-a.csv", kTriage + "/healthy_deadlock/node-b.csv"};
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ((*rec)->ranks().size(), 16u);
  EXPECT_EQ((*rec)->ranks()[8].host, "node-b");
  auto inc = (*rec)->TriageIncidents();
  ASSERT_FALSE(inc.empty());
  const Incident* dl = nullptr;
  for (const auto& i : inc) {
    if (i.kind == "deadlock") dl = &i;
  }
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->ranks, std::vector<int>{3});
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"DEADLOCK_SUSPECT\",\"ranks\":[3]"), std::string::npos);
  // Parts not given are notes, not inventions.
  EXPECT_NE(json.find("no trainer metrics"), std::string::npos);
  EXPECT_NE(json.find("no watcher log"), std::string::npos);
  EXPECT_NE(json.find("\"series\":{\"tokens_per_s\":[]"), std::string::npos);
}

TEST(InputsTest, DcgmRecordingsAndWatcherLogs) {
  std::string dir = std::filesystem::temp_directory_path() / ("ek_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string prom;
  for (int t = 0; t < 5; ++t) {
    prom += "# evenkeel-scrape " + std::to_string(1796000000 + t) + "\n";
    prom += "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 990\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 100\n";
    prom += "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 190\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 0\n";
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/node-z.prom", prom).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/watch.jsonl",
                              "{\"time\":\"2026-11-30T10:00:05Z\",\"event\":\"incident_opened\",\"run\":\"r\","
                              "\"incident\":{\"kind\":\"deadlock\",\"key\":\"deadlock\",\"severity\":\"critical\","
                              "\"summary\":\"rank 3 in save_barrier\",\"ranks\":[3],\"hosts\":[\"node-a\"],"
                              "\"since\":1796000001.5,\"evidence\":\"e\",\"gpu_hours\":0.5}}\nnot json\n")
                  .ok());
  ReportInputs in;
  in.dcgm = {dir + "/node-z.prom"};
  in.watch_log = dir + "/watch.jsonl";
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ((*rec)->ranks().size(), 2u);
  EXPECT_EQ((*rec)->readings(), 10u);
  ASSERT_EQ((*rec)->incidents.size(), 1u);
  EXPECT_EQ((*rec)->incidents[0].source, "watcher");
  EXPECT_EQ((*rec)->incidents[0].ranks, std::vector<int>{3});
  EXPECT_DOUBLE_EQ((*rec)->incidents[0].since, 1796000001.5);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("watch.jsonl:2: not JSON"), std::string::npos) << problems[0];
  // A file that is not a recording is an error naming it.
  ASSERT_TRUE(WriteFileAtomic(dir + "/bad.prom", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n").ok());
  in.dcgm = {dir + "/bad.prom"};
  auto bad = BuildRecorder(in, &problems);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.prom: no '# evenkeel-scrape UNIX_TIME' line"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ek::report
