// Verdict timelines of the fixtures made by tools/triage/gen_fixtures.py
// (16 ranks on node-a and node-b, the field report's B300 numbers). Window k
// closes k seconds after the first sample (10:00:00.000); node-b samples
// 0.25 s after node-a, so a window sees node-a's sample of second k and
// node-b's of second k-1.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/replay.h"
#include "triage/session.h"

namespace ek::triage {
namespace {

using V = Verdict;

struct Trace {
  std::vector<Assessment> windows;
  std::vector<telemetry::Problem> problems;
  telemetry::Topology topology;
  // Window by its second after 10:00:00 (1-based).
  const Assessment& at(int second) const { return windows.at(static_cast<size_t>(second - 1)); }
  std::string Runs() const;
};

char Letter(V v) {
  switch (v) {
    case V::kHealthy:
      return 'H';
    case V::kCheckpoint:
      return 'C';
    case V::kDeadlockSuspect:
      return 'D';
    case V::kStarvation:
      return 'S';
    case V::kCommunication:
      return 'M';
    case V::kIdle:
      return 'I';
    case V::kUnknown:
      return 'U';
  }
  return '?';
}

// "H19 U1 C100": run-length verdict timeline.
std::string Trace::Runs() const {
  std::string out;
  for (size_t i = 0; i < windows.size();) {
    size_t j = i;
    while (j < windows.size() && windows[j].verdict == windows[i].verdict) ++j;
    if (!out.empty()) out += ' ';
    out += Letter(windows[i].verdict) + std::to_string(j - i);
    i = j;
  }
  return out;
}

std::string Dir(const std::string& scenario) {
  return std::string(EK_SOURCE_DIR) + "/testdata/triage/" + scenario;
}

std::vector<std::string> CsvFiles(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = ::opendir(dir.c_str());
  EXPECT_NE(d, nullptr) << dir << " (run tools/triage/gen_fixtures.py)";
  if (!d) return files;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 4 && n.substr(n.size() - 4) == ".csv") files.push_back(dir + "/" + n);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

Trace Replay(const std::string& scenario, SessionOptions options = {}) {
  Trace trace;
  auto source = telemetry::ReplaySource::Open(CsvFiles(Dir(scenario)), {});
  EXPECT_TRUE(source.ok()) << source.status().message();
  if (!source.ok()) return trace;
  Session session(source->get(), Clock::Default(), B300Profile(), options);
  for (;;) {
    auto w = session.Next();
    EXPECT_TRUE(w.ok());
    if (!w.ok() || !w->has_value()) break;
    trace.windows.push_back((*w)->assessment);
    for (auto& p : (*w)->problems) trace.problems.push_back(p);
  }
  trace.topology = session.topology();
  return trace;
}

const double kT0 = *telemetry::ParseTimestamp("2026/11/29 10:00:00.000");

int Second(const Assessment& a) { return static_cast<int>(std::lround(a.time - kT0)); }

int Count(const Trace& t, V v) {
  return static_cast<int>(std::count_if(t.windows.begin(), t.windows.end(),
                                        [&](const Assessment& a) { return a.verdict == v; }));
}

TEST(Fixtures, EachStateAlone) {
  Trace healthy = Replay("healthy");
  EXPECT_EQ(healthy.topology.world(), 16);
  EXPECT_EQ(healthy.Runs(), "H60");
  EXPECT_TRUE(healthy.problems.empty());

  EXPECT_EQ(Replay("checkpoint").Runs(), "C60");  // csv,nounits
  // Deadlock and the mid bands need two samples; the first window is UNKNOWN.
  Trace deadlock = Replay("deadlock");  // one file with a host column
  EXPECT_EQ(deadlock.Runs(), "U1 D59");
  EXPECT_EQ(deadlock.at(2).ranks, std::vector<int>{3});
  EXPECT_EQ(deadlock.topology.hosts(), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(Replay("starvation").Runs(), "U1 S59");  // csv,noheader
  EXPECT_EQ(Replay("communication").Runs(), "U1 M59");
  EXPECT_EQ(Replay("idle").Runs(), "I29");  // the report's query: no timestamps
}

TEST(Fixtures, HealthyCheckpointHealthyNeverReportsDeadlock) {
  Trace t = Replay("healthy_checkpoint_healthy");
  EXPECT_EQ(Count(t, V::kDeadlockSuspect), 0);
  // Checkpoint phase: seconds 21-120; ramps at 20 and 121 (node-b a second later).
  EXPECT_EQ(t.Runs(), "H19 U1 C100 U2 H20");
  EXPECT_EQ(t.at(21).verdict, V::kCheckpoint);
  EXPECT_EQ(t.at(21).ranks, std::vector<int>{0});
  EXPECT_FALSE(t.at(120).overdue);  // 100 s, planned 120 s
  // Counted from the ramp sample, when rank 0 dropped to 0%.
  EXPECT_NE(t.at(120).reason.find("for 101 samples, 1m40s"), std::string::npos) << t.at(120).reason;
}

TEST(Fixtures, CheckpointFarPastThePlanIsFlagged) {
  SessionOptions o;
  o.classifier.checkpoint_planned_s = 20;  // overdue after 60 s
  Trace t = Replay("healthy_checkpoint_healthy", o);
  EXPECT_EQ(Count(t, V::kDeadlockSuspect), 0);
  EXPECT_FALSE(t.at(80).overdue);  // 60 s since rank 0 dropped to 0% at 20 s
  EXPECT_TRUE(t.at(81).overdue);
  EXPECT_NE(t.at(81).reason.find("OVERDUE"), std::string::npos);
  EXPECT_TRUE(t.at(120).overdue);
}

TEST(Fixtures, HealthyToDeadlockWithinTwoSamplesOfOnset) {
  Trace t = Replay("healthy_deadlock");
  const int onset = 30;  // first sample with rank 3 at 0% (power still falling)
  int first = -1;
  for (const auto& a : t.windows) {
    if (a.verdict == V::kDeadlockSuspect) {
      first = Second(a);
      break;
    }
  }
  ASSERT_GT(first, 0) << t.Runs();
  EXPECT_GE(first, onset);
  EXPECT_LE(first, onset + 1);  // the onset sample and the next
  EXPECT_EQ(t.Runs(), "H29 U1 D41");
  EXPECT_EQ(t.at(onset + 1).ranks, std::vector<int>{3});
  EXPECT_EQ(t.at(71).verdict, V::kDeadlockSuspect);
  EXPECT_NE(t.at(71).reason.find("rank 3 at <= 5% while ranks 0-2,4-15 at >= 80%"),
            std::string::npos);
}

TEST(Fixtures, HealthyToStarvation) {
  Trace t = Replay("healthy_starvation");
  EXPECT_EQ(t.Runs(), "H29 U1 S41");
  EXPECT_EQ(t.at(31).band, Band::kMid);
  EXPECT_GT(t.at(40).util_sd, 15);
}

TEST(Fixtures, SampleNoiseStaysHealthy) {
  Trace t = Replay("noise");
  EXPECT_EQ(t.Runs(), "H90");
  EXPECT_TRUE(t.problems.empty());  // [N/A] is missing data, not bad input
}

TEST(Fixtures, MissingHostIsUnknownNeverHealthy) {
  Trace t = Replay("missing_host");
  // node-b's last sample is at 30.25 s: fresh for 3 s.
  EXPECT_EQ(t.Runs(), "H33 U26");
  std::vector<int> node_b = {8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_EQ(t.at(34).ranks, node_b);
  EXPECT_NE(t.at(59).reason.find("ranks 8-15"), std::string::npos);
}

TEST(Fixtures, LateSamples) {
  Trace t = Replay("late_sample");
  // A 2 s stall (and an out-of-order row) is within staleness; a 5 s stall is not.
  EXPECT_EQ(t.Runs(), "H42 U3 H15");
  EXPECT_EQ(t.at(43).ranks.front(), 8);
  EXPECT_TRUE(t.problems.empty());
}

TEST(Fixtures, ClockJumpsAreReportedAndBridged) {
  Trace t = Replay("clock_jump");
  EXPECT_EQ(t.Runs(), "H60");
  ASSERT_EQ(t.problems.size(), 2u);
  std::map<std::string, std::string> by_file;
  for (const auto& p : t.problems) by_file[p.where.substr(0, p.where.find(':'))] = p.what;
  EXPECT_NE(by_file["node-a.csv"].find("clock jump of -600.0 s"), std::string::npos)
      << by_file["node-a.csv"];
  EXPECT_NE(by_file["node-b.csv"].find("clock jump of +3600.0 s"), std::string::npos)
      << by_file["node-b.csv"];
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

TEST(Fixtures, BadInputIsReportedWithFileAndLineAndNeverHealthy) {
  Trace t = Replay("bad_input");
  // Healthy 0-24 s, deadlock (rank 3) from 25 s; rank 5's power reads
  // negative 12-21 s, so it is missing from 15 s (3 s after its last good one).
  EXPECT_EQ(t.Runs(), "H14 U7 H3 U1 D20");
  EXPECT_EQ(t.at(15).ranks, std::vector<int>{5});
  for (int s = 25; s <= 45; ++s) EXPECT_NE(t.at(s).verdict, V::kHealthy) << s;
  // Every problem names a line that holds planted bad input.
  const std::map<std::string, std::vector<std::string>> planted = {
      {"node-a.csv",
       {"-12.00 W", "48000.00 W", "250 %", "-5.00 W", "2026/13/45", ", x, ", "hello world",
        "garbage", "####", "10:00:02.000, 6,", "$ W"}},  // "$": the row ends there
      {"node-b.csv", {"10:00:14.000, 0,", ", 1, 2"}}};
  std::map<std::string, int> per_file;
  for (const auto& p : t.problems) {
    std::string file = p.where.substr(0, p.where.find(':'));
    int line = std::stoi(p.where.substr(p.where.find(':') + 1));
    std::vector<std::string> lines = Lines(Dir("bad_input") + "/" + file);
    ASSERT_LE(line, static_cast<int>(lines.size())) << p.ToString();
    const std::string& text = lines[static_cast<size_t>(line - 1)];
    bool found = false;
    for (const auto& token : planted.at(file)) {
      if (token[0] == '$') {
        found |= text.size() >= token.size() - 1 &&
                 text.compare(text.size() - (token.size() - 1), token.size() - 1, token, 1) == 0;
      } else {
        found |= text.find(token) != std::string::npos;
      }
    }
    EXPECT_TRUE(found) << p.ToString() << "\n  line: " << text;
    ++per_file[file];
  }
  // node-a: 12 planted lines, the negative power on 10 of them; node-b: 2.
  EXPECT_EQ(per_file["node-a.csv"], 21);
  EXPECT_EQ(per_file["node-b.csv"], 2);
}

}  // namespace
}  // namespace ek::triage
