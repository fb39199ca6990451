#include "telemetry/replay.h"

#include <gtest/gtest.h>

#include "telemetry/nvidia_smi_csv.h"

namespace ek::telemetry {
namespace {

Batch PollAll(ReplaySource* source) {
  Batch b;
  EXPECT_TRUE(source->Poll(0, &b).ok());
  EXPECT_TRUE(b.end);
  return b;
}

std::string Row(double t, int gpu, double util, double power) {
  return FormatTimestamp(t) + ", " + std::to_string(gpu) + ", " + std::to_string(util) + " %, " +
         std::to_string(power) + " W, 80000 MiB\n";
}

TEST(Replay, HostsFromFileNamesInOrderGiven) {
  auto src = ReplaySource::FromTexts(
      {{"dir/node-b.csv", Row(10, 0, 100, 990)}, {"x/node-a.csv", Row(11, 0, 100, 990)}}, {});
  EXPECT_EQ(src->hosts(), (std::vector<std::string>{"node-b", "node-a"}));
  Batch b = PollAll(src.get());
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_EQ(b.samples[0].host, "node-b");
  EXPECT_EQ(HostFromPath("/a/b/gpu01.example.com.csv"), "gpu01.example.com");
}

TEST(Replay, HostColumnOrdersByFirstAppearanceUnlessGiven) {
  std::string text =
      "host, timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n"
      "n2, 10, 0, 100 %, 990 W, 1 MiB\nn1, 10, 0, 100 %, 990 W, 1 MiB\n";
  auto src = ReplaySource::FromTexts({{"all.csv", text}}, {});
  EXPECT_EQ(src->hosts(), (std::vector<std::string>{"n2", "n1"}));
  ReplayOptions opts;
  opts.hosts = {"n1", "n2"};
  EXPECT_EQ(ReplaySource::FromTexts({{"all.csv", text}}, opts)->hosts(),
            (std::vector<std::string>{"n1", "n2"}));
}

TEST(Replay, SamplesAreMergedByTime) {
  auto src = ReplaySource::FromTexts(
      {{"a.csv", Row(10, 0, 100, 990) + Row(12, 0, 100, 990)}, {"b.csv", Row(11, 0, 100, 990)}},
      {});
  Batch b = PollAll(src.get());
  ASSERT_EQ(b.samples.size(), 3u);
  EXPECT_EQ(b.samples[1].host, "b");
}

TEST(Replay, TimeGoingBackwardsIsDroppedAndReported) {
  auto src = ReplaySource::FromTexts({{"a.csv", Row(10, 0, 100, 990) + Row(11, 0, 100, 990) +
                                                    Row(9, 0, 100, 990) + Row(12, 0, 100, 990)}},
                                     {});
  Batch b = PollAll(src.get());
  ASSERT_EQ(b.samples.size(), 3u);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0].where, "a.csv:3");
  EXPECT_NE(b.problems[0].what.find("time goes backwards"), std::string::npos);
}

TEST(Replay, ClockJumpIsReanchoredAndReported) {
  std::string text;
  for (int t = 0; t < 3; ++t) text += Row(100 + t, 0, 100, 990) + Row(100 + t, 1, 100, 990);
  for (int t = 3; t < 5; ++t) text += Row(3700 + t, 0, 100, 990) + Row(3700 + t, 1, 100, 990);
  auto src = ReplaySource::FromTexts({{"a.csv", text}}, {});
  Batch b = PollAll(src.get());
  ASSERT_EQ(b.samples.size(), 10u);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0].where, "a.csv:7");
  EXPECT_NE(b.problems[0].what.find("clock jump of +3600.0 s"), std::string::npos);
  EXPECT_DOUBLE_EQ(b.samples[6].time, 103);
  EXPECT_DOUBLE_EQ(b.samples[9].time, 104);
}

TEST(Replay, BackwardClockJumpIsReanchored) {
  std::string text = Row(5000, 0, 100, 990) + Row(5001, 0, 100, 990) + Row(1002, 0, 100, 990) +
                     Row(1003, 0, 100, 990);
  Batch b = PollAll(ReplaySource::FromTexts({{"a.csv", text}}, {}).get());
  ASSERT_EQ(b.samples.size(), 4u);
  EXPECT_DOUBLE_EQ(b.samples[3].time, 5003);
}

TEST(Replay, OneWildTimestampIsDropped) {
  std::string text = Row(100, 0, 100, 990) + Row(99999, 0, 100, 990) + Row(101, 0, 100, 990);
  Batch b = PollAll(ReplaySource::FromTexts({{"a.csv", text}}, {}).get());
  ASSERT_EQ(b.samples.size(), 2u);
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0].where, "a.csv:2");
  EXPECT_NE(b.problems[0].what.find("one row only"), std::string::npos);
}

TEST(Replay, MissingFileIsAnError) {
  auto r = ReplaySource::Open({"/nonexistent/node-a.csv"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node-a.csv"), std::string::npos);
}

TEST(Replay, EmptyFileStillNamesItsHost) {
  auto src = ReplaySource::FromTexts({{"a.csv", Row(1, 0, 100, 990)}, {"b.csv", ""}}, {});
  EXPECT_EQ(src->hosts(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace ek::telemetry
