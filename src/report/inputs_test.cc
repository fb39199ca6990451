// One file over 600 lines: the input readers' tests share one fixture (HostsTest).
#include "report/inputs.h"

#include <fmt/core.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/file.h"

namespace ek::report {
namespace {

const std::string kTriage = std::string(EK_SOURCE_DIR) + "/testdata/triage";
const std::string kDeadlockA = kTriage + "/healthy_deadlock/node-a.csv";  // 8 GPUs; GPU 3 deadlocks
const std::string kDeadlockB = kTriage + "/healthy_deadlock/node-b.csv";

std::vector<TelemetryFile> Files(std::initializer_list<std::string> args) {
  std::vector<TelemetryFile> out;
  for (const auto& a : args) {
    auto f = ParseTelemetryArg(a);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (f.ok()) out.push_back(*f);
  }
  return out;
}

const Incident* Find(const std::vector<Incident>& incidents, const std::string& kind) {
  for (const auto& i : incidents) {
    if (i.kind == kind) return &i;
  }
  return nullptr;
}

// A scratch directory with a run file and telemetry files named as the test wants.
class HostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ek_report_hosts_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Run(int nodes, int gpus, const std::string& hosts) {
    std::string text = "[run]\nname = \"r\"\n[cluster]\nnodes = " + std::to_string(nodes) +
                       "\ngpus_per_node = " + std::to_string(gpus) + "\n";
    if (!hosts.empty()) text += "hosts = [" + hosts + "]\n";
    return Write("run.toml", text);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(p, text).ok());
    return p;
  }
  std::string Copy(const std::string& from, const std::string& name) {
    auto text = ReadFile(from);
    EXPECT_TRUE(text.ok());
    return Write(name, text.ok() ? *text : "");
  }
  std::string dir_;
};

TEST(ParseTelemetryArgTest, FileOrHostEqualsFile) {
  auto plain = ParseTelemetryArg("dir/a.csv");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->path, "dir/a.csv");
  EXPECT_EQ(plain->host, "");
  auto named = ParseTelemetryArg("n1=dir/a.csv");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->path, "dir/a.csv");
  EXPECT_EQ(named->host, "n1");
  // An '=' after a '/' belongs to the file's name.
  auto eq_in_name = ParseTelemetryArg("./a=b.csv");
  ASSERT_TRUE(eq_in_name.ok());
  EXPECT_EQ(eq_in_name->path, "./a=b.csv");
  EXPECT_EQ(eq_in_name->host, "");
  for (const char* bad : {"=a.csv", "n1=", ""}) {
    auto r = ParseTelemetryArg(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(ParseTelemetryArg("=a.csv").status().message().find("'=a.csv'"), std::string::npos);
}

TEST_F(HostsTest, FilesNotNamedAfterTheRunsHostsAreAnErrorNamingThemAndTheHosts) {
  // The field report's scenario: a 2 x 8 run on n1, n2 and two recordings called a.csv, b.csv.
  ReportInputs in;
  in.run_file = Run(2, 8, "\"n1\", \"n2\"");
  const std::string a = Copy(kDeadlockA, "a.csv"), b = Copy(kDeadlockB, "b.csv");
  in.telemetry = Files({a, b});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = rec.status().message();
  EXPECT_NE(
      m.find("telemetry " + a + ", " + b + " match no host of " + in.run_file + " (hosts: n1, n2)"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("--telemetry n1=" + a + " n2=" + b), std::string::npos) << m;
  // One file alone: "matches", and the hint pairs it with the first host without telemetry.
  in.telemetry = Files({"n1=" + a, b});
  rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("telemetry " + b + " matches no host of " + in.run_file +
                                        " (hosts: n1, n2); name it after its host (n2.csv) or pass "
                                        "--telemetry n2=" +
                                        b),
            std::string::npos)
      << rec.status().message();
}

TEST_F(HostsTest, HostEqualsFileGivesTheRunsRanksAndTheDeadlock) {
  ReportInputs in;
  in.run_file = Run(2, 8, "\"n1\", \"n2\"");
  in.telemetry = Files({"n2=" + Copy(kDeadlockB, "b.csv"), "n1=" + Copy(kDeadlockA, "a.csv")});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->ranks().size(), 16u);
  EXPECT_EQ((*rec)->ranks()[3].host, "n1");
  EXPECT_EQ((*rec)->ranks()[3].gpu, 3);
  EXPECT_EQ((*rec)->ranks()[8].host, "n2");
  EXPECT_EQ((*rec)->ranks()[15].gpu, 7);
  EXPECT_EQ((*rec)->run.world, 16);
  EXPECT_EQ((*rec)->run.hosts, (std::vector<std::string>{"n1", "n2"}));
  const auto incidents = (*rec)->TriageIncidents();
  const Incident* dl = Find(incidents, "deadlock");
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->ranks, std::vector<int>{3});
  EXPECT_EQ(dl->hosts, std::vector<std::string>{"n1"});
  EXPECT_NE(dl->evidence.find("rank 3 at <= 5% while ranks 0-2,4-15 at >= 80%"), std::string::npos)
      << dl->evidence;
  EXPECT_NE(dl->evidence.find("suspected deadlock"), std::string::npos) << dl->evidence;
}

TEST_F(HostsTest, FileNamesMatchTheRunsHostsInTheRunsOrder) {
  // The run puts node-b first: its GPUs are ranks 0-7, node-a's GPU 3 is rank 11.
  ReportInputs in;
  in.run_file = Run(2, 8, "\"node-b\", \"node-a\"");
  in.telemetry = Files({kDeadlockA, kDeadlockB});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->ranks().size(), 16u);
  EXPECT_EQ((*rec)->ranks()[0].host, "node-b");
  EXPECT_EQ((*rec)->ranks()[11].host, "node-a");
  const auto incidents = (*rec)->TriageIncidents();
  const Incident* dl = Find(incidents, "deadlock");
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->ranks, std::vector<int>{11});
}

TEST_F(HostsTest, AHostColumnAssignsRowsToTheRunsHosts) {
  std::string csv = "host, timestamp, index, utilization.gpu [%], power.draw [W]\n";
  for (int t = 0; t < 5; ++t) {
    for (const char* h : {"n2", "n1"}) {
      for (int g = 0; g < 2; ++g) {
        csv += fmt::format("{}, 2026/11/29 10:00:0{}.000, {}, {} %, {} W\n", h, t, g,
                           h[1] == '2' && g == 1 ? 0 : 100, h[1] == '2' && g == 1 ? 150 : 990);
      }
    }
  }
  ReportInputs in;
  in.run_file = Run(2, 2, "\"n1\", \"n2\"");
  in.telemetry = Files({Write("all.csv", csv)});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->ranks().size(), 4u);
  EXPECT_EQ((*rec)->ranks()[2].host, "n2");
  EXPECT_EQ((*rec)->readings(), 20u);
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"rank\":3,\"host\":\"n2\",\"gpu\":1"), std::string::npos);
  // A host column naming a host the run does not have is an error naming the file and the hosts.
  in.run_file = Run(2, 2, "\"n1\", \"n3\"");
  rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("all.csv: its host column names n2, not a host of " +
                                        in.run_file + " (hosts: n1, n3)"),
            std::string::npos)
      << rec.status().message();
  // HOST=FILE is for files without a host column.
  in.telemetry = Files({"n1=" + dir_ + "/all.csv"});
  rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("has a host column (hosts: n2, n1)"), std::string::npos)
      << rec.status().message();
}

TEST_F(HostsTest, HostEqualsANameThatIsNoHostOfTheRunIsAnError) {
  ReportInputs in;
  in.run_file = Run(2, 8, "\"n1\", \"n2\"");
  in.telemetry = Files({"n9=" + Copy(kDeadlockA, "a.csv")});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("n9 is not a host of " + in.run_file + " (hosts: n1, n2)"),
            std::string::npos)
      << rec.status().message();
}

TEST_F(HostsTest, GpuIndicesBeyondGpusPerNodeAreAnError) {
  ReportInputs in;
  in.run_file = Run(4, 4, "\"node-a\", \"node-b\", \"node-c\", \"node-d\"");
  in.telemetry = Files({kDeadlockA});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      rec.status().message().find("telemetry " + kDeadlockA + ": node-a has GPU index 7, but " +
                                  in.run_file + " has gpus_per_node = 4 (indices 0-3)"),
      std::string::npos)
      << rec.status().message();
}

TEST_F(HostsTest, ARunWithoutHostsTakesAtMostItsNodesFromTheTelemetry) {
  ReportInputs in;
  in.run_file = Run(1, 8, "");
  in.telemetry = Files({kDeadlockA, kDeadlockB});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("the telemetry names 2 hosts (node-a, node-b) but " +
                                        in.run_file + " has 1 node (cluster.nodes)"),
            std::string::npos)
      << rec.status().message();
  in.run_file = Run(3, 8, "");
  rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  // The run's world, the telemetry's hosts in order, the third node unnamed and empty.
  ASSERT_EQ((*rec)->ranks().size(), 24u);
  EXPECT_EQ((*rec)->ranks()[8].host, "node-b");
  EXPECT_EQ((*rec)->ranks()[16].host, "node-2");
  std::string notes;
  for (const auto& n : (*rec)->notes) notes += n + "\n";
  EXPECT_NE(notes.find(
                "names no cluster.hosts: node ranks follow the telemetry's order (node-a, node-b)"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("no telemetry for node-2 (ranks 16-23)"), std::string::npos) << notes;
}

TEST_F(HostsTest, AHostWithoutTelemetryKeepsItsRowsAndTheRowsNeverExceedTheWorld) {
  ReportInputs in;
  in.run_file = Run(2, 8, "\"node-a\", \"node-b\"");
  in.telemetry = Files({kDeadlockA, kDeadlockA});  // the same host twice: still 16 rows
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  EXPECT_EQ((*rec)->ranks().size(), 16u);
  EXPECT_EQ((*rec)->run.world, 16);
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_EQ(json.find("\"rank\":16"), std::string::npos);
  bool noted = false;
  for (const auto& n : (*rec)->notes)
    noted |= n.find("no telemetry for node-b (ranks 8-15)") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(HostsTest, DcgmRecordingsFollowTheSameRules) {
  std::string prom;
  for (int t = 0; t < 3; ++t) {
    prom += "# evenkeel-scrape " + std::to_string(1796000000 + t) + "\n";
    prom += "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 990\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 100\n";
  }
  const std::string z = Write("z.prom", prom);
  ReportInputs in;
  in.run_file = Run(2, 2, "\"n1\", \"n2\"");
  in.dcgm = Files({z});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find(
                "telemetry " + z + " matches no host of " + in.run_file +
                " (hosts: n1, n2); name it after its host (n1.prom) or pass --dcgm n1=" + z),
            std::string::npos)
      << rec.status().message();
  in.dcgm = Files({"n2=" + z});
  rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->ranks().size(), 4u);
  EXPECT_EQ((*rec)->readings(), 3u);
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"rank\":3,\"host\":\"n2\",\"gpu\":1"), std::string::npos);
}

TEST_F(HostsTest, WithoutARunFileTheHostsComeFromTheFiles) {
  ReportInputs in;
  in.telemetry = Files({"x=" + Copy(kDeadlockB, "b.csv"), Copy(kDeadlockA, "y.csv")});
  std::vector<std::string> problems;
  auto rec = BuildRecorder(in, &problems);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->ranks().size(), 16u);
  EXPECT_EQ((*rec)->ranks()[0].host, "x");
  EXPECT_EQ((*rec)->ranks()[8].host, "y");
  EXPECT_EQ((*rec)->run.world, 16);
  EXPECT_EQ((*rec)->run.hosts, (std::vector<std::string>{"x", "y"}));
  const auto incidents = (*rec)->TriageIncidents();
  const Incident* dl = Find(incidents, "deadlock");
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->ranks, std::vector<int>{11});
  EXPECT_FALSE(dl->evidence.empty());
}

TEST(InputsTest, TheDeadlockFixtureGetsTheClassifiersVerdicts) {
  ReportInputs in;
  in.telemetry = Files({kDeadlockA, kDeadlockB});
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
  std::string dir =
      std::filesystem::temp_directory_path() / ("ek_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string prom;
  for (int t = 0; t < 5; ++t) {
    prom += "# evenkeel-scrape " + std::to_string(1796000000 + t) + "\n";
    prom += "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"} 990\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 100\n";
    prom += "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"} 190\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 0\n";
  }
  ASSERT_TRUE(WriteFileAtomic(dir + "/node-z.prom", prom).ok());
  // The watcher's log lines as watch/sinks.cc's IncidentJson writes them (times in RFC 3339).
  const std::string incident =
      "\"id\":\"r-deadlock-1\",\"run\":\"r\",\"kind\":\"deadlock\",\"status\":\"firing\","
      "\"severity\":\"critical\","
      "\"summary\":\"rank 3 in "
      "save_barrier\",\"ranks\":[3],\"ranks_compact\":\"3\",\"hosts\":[\"node-a\"],"
      "\"since\":\"2026-11-30T00:53:21.500Z\",\"opened\":\"2026-11-30T00:53:25.000Z\",";
  ASSERT_TRUE(
      WriteFileAtomic(
          dir + "/watch.jsonl",
          "{\"time\":\"2026-11-30T00:53:25.000Z\",\"event\":\"agent_up\",\"run\":\"r\"}\n"
          "{\"time\":\"2026-11-30T00:53:25.000Z\",\"event\":\"incident_opened\",\"run\":\"r\","
          "\"incident\":{" +
              incident +
              "\"evidence\":\"e\",\"gpu_hours\":0.500}}\nnot json\n"
              "{\"time\":\"2026-11-30T00:53:41.000Z\",\"event\":\"incident_resolved\",\"run\":"
              "\"r\","
              "\"incident\":{" +
              incident +
              "\"resolved\":\"2026-11-30T00:53:40.000Z\","
              "\"evidence\":\"e\",\"gpu_hours\":0.500}}\n")
          .ok());
  ReportInputs in;
  in.dcgm = Files({dir + "/node-z.prom"});
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
  ASSERT_TRUE((*rec)->incidents[0].until.has_value());
  EXPECT_DOUBLE_EQ(*(*rec)->incidents[0].until, 1796000020);
  EXPECT_EQ((*rec)->incidents[0].evidence, "e");
  EXPECT_DOUBLE_EQ((*rec)->incidents[0].gpu_hours, 0.5);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("watch.jsonl:3: not JSON (skipped)"), std::string::npos)
      << problems[0];
  // A field missing or mistyped is an error naming the file, line and field, never a 0.
  for (auto [line, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"time\":\"2026-11-30T00:53:25Z\",\"event\":\"incident_opened\",\"incident\":{" +
                incident + "\"gpu_hours\":0.5}}",
            "watch.jsonl:1: incident.evidence: missing"},
           {"{\"time\":\"2026-11-30T00:53:25Z\",\"event\":\"incident_opened\",\"incident\":{" +
                incident + "\"evidence\":\"e\",\"gpu_hours\":\"half\"}}",
            "watch.jsonl:1: incident.gpu_hours: not a number"},
           {"{\"time\":\"yesterday\",\"event\":\"incident_opened\",\"incident\":{}}",
            "watch.jsonl:1: time: 'yesterday' is not a time"},
           {"{\"event\":\"incident_opened\",\"incident\":{}}", "watch.jsonl:1: time: missing"}}) {
    ASSERT_TRUE(WriteFileAtomic(dir + "/watch.jsonl", line + "\n").ok());
    ReportInputs bad_log;
    bad_log.watch_log = dir + "/watch.jsonl";
    auto r = BuildRecorder(bad_log, &problems);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  // The trainer's metrics: time required, the values optional but numbers when present.
  ASSERT_TRUE(
      WriteFileAtomic(dir + "/m.jsonl",
                      "{\"time\":1.5,\"step\":1,\"loss\":2.0}\n{\"time\":2.5,\"tok_s\":9}\n")
          .ok());
  ReportInputs with_metrics;
  with_metrics.metrics = dir + "/m.jsonl";
  auto m = BuildRecorder(with_metrics, &problems);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::string mj = (*m)->ToJson(ModelOptions{});
  EXPECT_NE(
      mj.find(
          "\"series\":{\"tokens_per_s\":[[2.500,9]],\"step\":[[1.500,1]],\"loss\":[[1.500,2]]}"),
      std::string::npos)
      << mj;
  for (auto [line, want] : std::vector<std::pair<std::string, std::string>>{
           {"{\"step\":1}", "m.jsonl:1: time: missing"},
           {"{\"time\":1,\"loss\":\"low\"}", "m.jsonl:1: loss: not a number"}}) {
    ASSERT_TRUE(WriteFileAtomic(dir + "/m.jsonl", line + "\n").ok());
    auto r = BuildRecorder(with_metrics, &problems);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  // A file that is not a recording is an error naming it.
  ASSERT_TRUE(WriteFileAtomic(dir + "/bad.prom", "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 1\n").ok());
  in.dcgm = Files({dir + "/bad.prom"});
  auto bad = BuildRecorder(in, &problems);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.prom: no '# evenkeel-scrape UNIX_TIME' line"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

// summary.json's attempt records as the launcher writes them (launch/launcher.cc
// AttemptToJson), with only the fields in question varied.
std::string AttemptRecord(int attempt, double start, double end, const std::string& outcome,
                          const std::string& decision, const std::string& causes) {
  return fmt::format(
      "{{\"attempt\": {0}, \"start\": {1:.3f}, \"end\": {2:.3f}, \"seconds\": {3:.1f}, "
      "\"outcome\": \"{4}\", "
      "\"step_reached\": 7, \"checkpoint_before\": -1, \"checkpoint_after\": 6, "
      "\"flight_recorder\": {{\"verdict\": "
      "\"no flight-recorder dumps\", \"conclusive\": false}}, \"gpu_hours\": 0.0400, "
      "\"gpu_hours_lost\": 0.0125, "
      "\"decision\": {5}{6}, \"nodes\": []}}",
      attempt, start, end, end - start, outcome, decision, causes);
}

// summary.json's totals as the launcher writes them (launch/launcher_summary.cc Summary).
const std::string kSummaryHead =
    "{\"run\": \"r\", \"run_file\": {\"path\": \"r.toml\", \"xxh3\": \"0123456789abcdef\"}, "
    "\"run_id\": \"1\", "
    "\"nodes\": 2, \"world\": 4, \"outcome\": \"completed\", \"exit_code\": 0, \"steps\": 12, "
    "\"planned_steps\": 12, "
    "\"tokens\": 4096, \"tokens_per_s\": 30.5, \"final_checkpoint\": \"\", \"attempts\": 2, "
    "\"attempts_this_launch\": 2, \"attempts_inferred\": 0, \"gpu_hours_used\": 0.0800, "
    "\"gpu_hours_lost\": 0.0125, "
    "\"evenfix_dropped_blocks\": -1, \"launch_dir\": \"launch\", \"evenkeel_version\": \"0\", ";

class LaunchRecordsTest : public HostsTest {
 protected:
  Result<std::unique_ptr<Recorder>> Build(const std::string& records) {
    Write("launch/summary.json", kSummaryHead + "\"attempt_records\": [" + records +
                                     "], \"causes\": [], \"hangs\": []}\n");
    ReportInputs in;
    in.run_file = Run(2, 2, "\"n1\", \"n2\"");
    in.launch_dir = dir_ + "/launch";
    std::vector<std::string> problems;
    return BuildRecorder(in, &problems);
  }
  void SetUp() override {
    HostsTest::SetUp();
    std::filesystem::create_directories(dir_ + "/launch");
  }
};

const std::string kRestart =
    "{\"attempt\": 1, \"action\": \"restart\", \"exit_code\": 0, \"reason\": "
    "\"rank 2: OSError: [Errno 28] No space left on device; restarting from "
    "checkpoint step 6 after 0 s\", "
    "\"next_attempt\": 2, \"backoff_s\": 0.0}";
const std::string kDone =
    "{\"attempt\": 2, \"action\": \"done\", \"exit_code\": 0, \"reason\": \"final\", "
    "\"next_attempt\": 0, \"backoff_s\": 0.0}";
const std::string kCause =
    "OSError: [Errno 28] No space left on device: '/c/.step-00000008.tmp-7/model-00001-of-00001."
    "safetensors' (in save (step 8))";

TEST_F(LaunchRecordsTest, EachAttemptsDecisionAndCausesAreReadAndAFailedOneIsALauncherIncident) {
  auto rec = Build(AttemptRecord(1, 100, 160, "failed", kRestart,
                                 ", \"causes\": [{\"rank\": 2, \"cause\": \"" + kCause + "\"}]") +
                   ", " + AttemptRecord(2, 170, 300, "completed", kDone, ", \"causes\": []"));
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  const auto& attempts = (*rec)->attempts;
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].decision, "restart");
  EXPECT_EQ(attempts[0].exit_code, 0);
  ASSERT_TRUE(attempts[0].causes_recorded);
  ASSERT_EQ(attempts[0].causes.size(), 1u);
  EXPECT_EQ(attempts[0].causes[0].rank, 2);
  EXPECT_EQ(attempts[0].causes[0].cause, kCause);
  EXPECT_TRUE(attempts[1].causes_recorded);
  EXPECT_TRUE(attempts[1].causes.empty());
  // The failed attempt is the launcher's incident: decision, causes, ranks and their hosts.
  ASSERT_EQ((*rec)->incidents.size(), 1u);
  const Incident& inc = (*rec)->incidents[0];
  EXPECT_EQ(inc.source, "launcher");
  EXPECT_EQ(inc.kind, "attempt failed");
  EXPECT_EQ(inc.summary, "attempt 1 failed: restart: " + attempts[0].reason);
  EXPECT_EQ(inc.ranks, std::vector<int>{2});
  EXPECT_EQ(inc.hosts, std::vector<std::string>{"n2"});
  EXPECT_EQ(inc.evidence, "rank 2: " + kCause + "\nflight recorder: no flight-recorder dumps");
  EXPECT_DOUBLE_EQ(inc.since, 160);
  ASSERT_TRUE(inc.until.has_value());
  EXPECT_DOUBLE_EQ(*inc.until, 170);
  EXPECT_DOUBLE_EQ(inc.gpu_hours, 0.0125);
  // The data model carries them for the page.
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"decision\":\"restart\",\"exit_code\":0,"), std::string::npos) << json;
  EXPECT_NE(
      json.find(
          "\"causes\":[{\"rank\":2,\"cause\":\"OSError: [Errno 28] No space left on device: "),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"decision\":\"done\",\"exit_code\":0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"flight_recorder\":\"no flight-recorder dumps\",\"causes\":[]}"),
            std::string::npos)
      << json;
}

TEST_F(LaunchRecordsTest, AStopsExitCodeIsInTheIncidentsSummary) {
  const std::string stop =
      "{\"attempt\": 1, \"action\": \"stop\", \"exit_code\": 93, \"reason\": \"desync\", "
      "\"next_attempt\": 0, \"backoff_s\": 0.0}";
  auto rec = Build(AttemptRecord(1, 100, 160, "failed", stop, ", \"causes\": []"));
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->incidents.size(), 1u);
  EXPECT_EQ((*rec)->incidents[0].summary, "attempt 1 failed: stop, exit 93: desync");
  EXPECT_TRUE((*rec)->incidents[0].ranks.empty());
  EXPECT_DOUBLE_EQ(*(*rec)->incidents[0].until, 160);  // the last attempt: the launch ended there
}

// Records written before the launcher named causes have none: readable, and said so.
TEST_F(LaunchRecordsTest, AnOlderRecordWithoutCausesIsReadableAndSaysSo) {
  auto rec = Build(AttemptRecord(1, 100, 160, "failed", kRestart, "") + ", " +
                   AttemptRecord(2, 170, 300, "completed", kDone, ""));
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_EQ((*rec)->attempts.size(), 2u);
  EXPECT_FALSE((*rec)->attempts[0].causes_recorded);
  ASSERT_EQ((*rec)->incidents.size(), 1u);
  const std::string& evidence = (*rec)->incidents[0].evidence;
  EXPECT_NE(evidence.find("no causes recorded"), std::string::npos) << evidence;
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_EQ(json.find("\"causes\""), std::string::npos) << json;
}

TEST_F(LaunchRecordsTest, AMissingOrMistypedFieldIsAnErrorNamingTheFileAndTheField) {
  const std::string causes = ", \"causes\": [{\"rank\": 2, \"cause\": \"x\"}]";
  for (auto [records, want] : std::vector<std::pair<std::string, std::string>>{
           {AttemptRecord(1, 100, 160, "failed",
                          "{\"attempt\": 1, \"action\": \"restart\", \"reason\": \"r\"}", causes),
            "launch/summary.json: attempt_records[0].decision.exit_code: missing"},
           {AttemptRecord(1, 100, 160, "failed",
                          "{\"attempt\": 1, \"action\": \"restart\", \"exit_code\": \"0\", "
                          "\"reason\": \"r\"}",
                          causes),
            "launch/summary.json: attempt_records[0].decision.exit_code: not an integer"},
           {AttemptRecord(1, 100, 160, "failed", kRestart,
                          ", \"causes\": [{\"rank\": \"2\", \"cause\": \"x\"}]"),
            "launch/summary.json: attempt_records[0].causes[0].rank: not an integer"},
           {AttemptRecord(1, 100, 160, "failed", kRestart, ", \"causes\": [{\"rank\": 2}]"),
            "launch/summary.json: attempt_records[0].causes[0].cause: missing"},
           {AttemptRecord(1, 100, 160, "failed", kRestart, ", \"causes\": \"rank 2\""),
            "launch/summary.json: attempt_records[0].causes: not an array"},
           {std::string("{\"attempt\": 1, \"start\": 1, \"end\": 2, \"outcome\": \"failed\", "
                        "\"flight_recorder\": "
                        "{\"verdict\": \"\"}, \"decision\": ") +
                kRestart + "}",
            "launch/summary.json: attempt_records[0].gpu_hours_lost: missing"}}) {
    auto rec = Build(records);
    ASSERT_FALSE(rec.ok()) << records;
    EXPECT_EQ(rec.status().code(), StatusCode::kCorrupt) << rec.status().message();
    EXPECT_NE(rec.status().message().find(want), std::string::npos) << rec.status().message();
  }
}

// The summary's totals are required as the launcher's own reader requires them:
// a missing one is an error naming it, not a page that quietly lacks it.
TEST_F(LaunchRecordsTest, AMissingSummaryTotalIsAnErrorNamingIt) {
  const std::string record = AttemptRecord(2, 170, 300, "completed", kDone, ", \"causes\": []");
  ASSERT_TRUE(Build(record).ok());
  auto build = [&](const std::string& summary) {
    Write("launch/summary.json", summary);
    ReportInputs in;
    in.launch_dir = dir_ + "/launch";
    std::vector<std::string> problems;
    return BuildRecorder(in, &problems);
  };
  for (std::string key : {"steps", "tokens", "gpu_hours_lost", "outcome", "final_checkpoint",
                          "evenfix_dropped_blocks"}) {
    std::string head = kSummaryHead;
    const size_t at = head.find("\"" + key + "\": ");
    ASSERT_NE(at, std::string::npos) << key;
    head.erase(at, head.find(", ", at) + 2 - at);
    auto rec = build(head + "\"attempt_records\": [" + record + "]}\n");
    ASSERT_FALSE(rec.ok()) << key;
    EXPECT_EQ(rec.status().code(), StatusCode::kCorrupt) << rec.status().message();
    EXPECT_NE(rec.status().message().find("launch/summary.json: " + key + ": missing"),
              std::string::npos)
        << rec.status().message();
  }
  // attempt_records too: a summary without it is not the launcher's.
  auto rec = build(kSummaryHead + "\"causes\": []}\n");
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("launch/summary.json: attempt_records: missing"),
            std::string::npos)
      << rec.status().message();
}

// summary.json's goodput (launcher_summary.cc, heartbeat/goodput_account.h): read into the
// summary and handed to the page; an older summary without it reads; present, it is strict.
TEST_F(LaunchRecordsTest, TheGoodputSplitIsReadStrictlyForThePage) {
  const std::string record = AttemptRecord(2, 170, 300, "completed", kDone, ", \"causes\": []");
  const std::string goodput =
      "\"goodput\": {\"ratio\": 0.5, \"wall_s\": 100.000, \"training_s\": 50.000, "
      "\"redone_s\": 21.000, \"restart_s\": {\"detection\": 1.000, \"stopping\": 2.000, "
      "\"rendezvous\": 8.000, \"startup\": 4.000}, \"save_blocked_s\": 1.000, "
      "\"other_s\": 13.000}, ";
  auto build = [&](const std::string& summary) {
    Write("launch/summary.json", summary);
    ReportInputs in;
    in.launch_dir = dir_ + "/launch";
    std::vector<std::string> problems;
    return BuildRecorder(in, &problems);
  };
  auto old = build(kSummaryHead + "\"attempt_records\": [" + record + "]}\n");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_FALSE((*old)->summary.goodput);
  EXPECT_EQ((*old)->ToJson(ModelOptions{}).find("\"goodput\""), std::string::npos);
  auto rec = build(kSummaryHead + goodput + "\"attempt_records\": [" + record + "]}\n");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  ASSERT_TRUE((*rec)->summary.goodput);
  EXPECT_DOUBLE_EQ((*rec)->summary.goodput->redone_s, 21);
  EXPECT_DOUBLE_EQ((*rec)->summary.goodput->rendezvous_s, 8);
  EXPECT_DOUBLE_EQ((*rec)->summary.goodput->Ratio(), 0.5);
  std::string json = (*rec)->ToJson(ModelOptions{});
  EXPECT_NE(json.find("\"goodput\":{\"ratio\":0.500000,\"wall_s\":100.000,\"training_s\":50.000,"),
            std::string::npos)
      << json;
  std::string bad = goodput;
  bad.replace(bad.find("\"startup\": 4.000"), 16, "\"startup\": \"4\"");
  auto wrong = build(kSummaryHead + bad + "\"attempt_records\": [" + record + "]}\n");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(
      wrong.status().message().find("launch/summary.json: goodput.restart_s.startup: not a number"),
      std::string::npos)
      << wrong.status().message();
}

}  // namespace
}  // namespace ek::report
