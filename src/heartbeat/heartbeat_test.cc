#include "heartbeat/heartbeat.h"

#include <gtest/gtest.h>

#include "core/file.h"
#include "core/scratch_dir_testing.h"

namespace ek::heartbeat {
namespace {

TEST(Heartbeat, ParsesWhatThePythonSideWrites) {
  auto hb = ParseHeartbeat(
      R"({"v":1,"rank":3,"local_rank":1,"pid":42,"host":"node-b","step":120,"tokens":983040,)"
      R"("time":1700000000.5,"step_time":1700000000.25,"step_s":4.9,"tok_s":1672.1,"phase":"train","total_steps":3854})",
      "rank-3.json");
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_EQ(hb->rank, 3);
  EXPECT_EQ(hb->local_rank, 1);
  EXPECT_EQ(hb->step, 120);
  EXPECT_EQ(hb->tokens, 983040);
  EXPECT_DOUBLE_EQ(hb->step_time, 1700000000.25);
  EXPECT_DOUBLE_EQ(hb->tok_s, 1672.1);
  EXPECT_EQ(hb->total_steps, 3854);
  auto again = ParseHeartbeat(HeartbeatToJson(*hb), "x");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->step, 120);
  EXPECT_EQ(again->phase, "train");
}

// The goodput fields (docs/heartbeat_format.md): optional (an older trainer's file reads,
// with 0s), strictly typed when present, and kept through a write and a read.
TEST(Heartbeat, GoodputFieldsAreOptionalStrictAndRoundTrip) {
  auto old = ParseHeartbeat(R"({"v":1,"rank":0,"step":4,"time":100})", "hb/rank-0.json");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->started, 0);
  EXPECT_EQ(old->train_start, 0);
  EXPECT_EQ(old->save_blocked_s, 0);
  EXPECT_EQ(old->saves, 0);
  auto hb =
      ParseHeartbeat(R"({"v":1,"rank":0,"step":4,"time":100,"started":90.5,"train_start":95.25,)"
                     R"("save_blocked_s":1.75,"saves":2})",
                     "hb/rank-0.json");
  ASSERT_TRUE(hb.ok()) << hb.status().message();
  EXPECT_DOUBLE_EQ(hb->started, 90.5);
  EXPECT_DOUBLE_EQ(hb->train_start, 95.25);
  EXPECT_DOUBLE_EQ(hb->save_blocked_s, 1.75);
  EXPECT_EQ(hb->saves, 2);
  auto again = ParseHeartbeat(HeartbeatToJson(*hb), "x");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_DOUBLE_EQ(again->started, 90.5);
  EXPECT_DOUBLE_EQ(again->train_start, 95.25);
  EXPECT_DOUBLE_EQ(again->save_blocked_s, 1.75);
  EXPECT_EQ(again->saves, 2);
  auto msg = [](std::string_view json) {
    auto r = ParseHeartbeat(json, "hb/rank-0.json");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(msg(R"({"v":1,"rank":0,"step":4,"time":100,"started":"90"})"),
            "hb/rank-0.json: started: not a number");
  EXPECT_EQ(msg(R"({"v":1,"rank":0,"step":4,"time":100,"train_start":true})"),
            "hb/rank-0.json: train_start: not a number");
  EXPECT_EQ(msg(R"({"v":1,"rank":0,"step":4,"time":100,"save_blocked_s":-1})"),
            "hb/rank-0.json: save_blocked_s: not a finite number >= 0");
  EXPECT_EQ(msg(R"({"v":1,"rank":0,"step":4,"time":100,"saves":1.5})"),
            "hb/rank-0.json: saves: not an integer");
  EXPECT_EQ(msg(R"({"v":1,"rank":0,"step":4,"time":100,"saves":-1})"),
            "hb/rank-0.json: saves: -1 is out of range [0, 4611686018427387904]");
}

TEST(Heartbeat, RejectsTruncatedAndForeignFiles) {
  EXPECT_FALSE(ParseHeartbeat(R"({"v":1,"rank":3,"step":1,"time":5)", "a").ok());
  EXPECT_FALSE(ParseHeartbeat(R"({"v":2,"rank":3,"step":1,"time":5})", "a").ok());
  EXPECT_FALSE(ParseHeartbeat(R"({"v":1,"step":1,"time":5})", "a").ok());
  auto bad = ParseHeartbeat(R"({"v":1,"rank":0,"time":5})", "dir/rank-0.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dir/rank-0.json"), std::string::npos);
}

// A mistyped or missing field is an error naming the file and the field; the
// old reader took a string step as "no step" and a string pid as 0 (alive: no).
TEST(Heartbeat, MissingOrMistypedFieldsAreNamed) {
  auto msg = [](std::string_view json) {
    auto hb = ParseHeartbeat(json, "hb/rank-3.json");
    return hb.ok() ? std::string("ok") : hb.status().message();
  };
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":5})"), "ok");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"time":5})"), "hb/rank-3.json: step: missing");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":"1","time":5})"), "hb/rank-3.json: step: not an integer");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":"5"})"), "hb/rank-3.json: time: not a number");
  EXPECT_EQ(msg(R"({"v":1,"rank":-3,"step":1,"time":5})"),
            "hb/rank-3.json: rank: -3 is out of range [0, 16777216]");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":5,"pid":"42"})"),
            "hb/rank-3.json: pid: not an integer");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":5,"phase":7})"),
            "hb/rank-3.json: phase: not a string");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":5,"tok_s":{"x":1}})"),
            "hb/rank-3.json: tok_s: not a number");
  EXPECT_EQ(msg(R"({"v":2,"rank":3,"step":1,"time":5})"),
            "hb/rank-3.json: v: unknown heartbeat version 2");
  EXPECT_EQ(msg(R"([{"v":1}])"), "hb/rank-3.json: not a JSON object");
  EXPECT_EQ(msg(R"({"v":1,)"), "hb/rank-3.json: not JSON (a truncated or foreign file)");
}

// Regression (fuzz_heartbeat, CI's 3 s run): "step":9223372036854775807 was
// read, and PositionOf's step + 1 overflowed (UBSan). Steps are bounded.
TEST(Heartbeat, StepsNearInt64MaxAreOutOfRange) {
  auto msg = [](std::string_view json) {
    auto hb = ParseHeartbeat(json, "hb/rank-3.json");
    if (hb.ok()) (void)PositionOf(*hb);
    return hb.ok() ? std::string("ok") : hb.status().message();
  };
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":9223372036854775807,"time":1,"phase":"train"})"),
            "hb/rank-3.json: step: 9223372036854775807 is out of range [-1, 4611686018427387904]");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":-1,"time":1,"phase":"train"})"), "ok");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":4611686018427387904,"time":1,"phase":"train"})"), "ok");
  EXPECT_EQ(
      msg(R"({"v":1,"rank":3,"step":1,"time":1,"phase_step":-9223372036854775807})"),
      "hb/rank-3.json: phase_step: -9223372036854775807 is out of range [-1, 4611686018427387904]");
  EXPECT_EQ(msg(R"({"v":1,"rank":3,"step":1,"time":1,"total_steps":-2})"),
            "hb/rank-3.json: total_steps: -2 is out of range [0, 4611686018427387904]");
}

TEST(Heartbeat, ReadsADirectorySkippingTempFilesAndReportingBadOnes) {
  testing::ScratchDir dir;
  ASSERT_TRUE(WriteFileAtomic(dir / "rank-1.json", R"({"v":1,"rank":1,"step":7,"time":10})").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "rank-0.json", R"({"v":1,"rank":0,"step":8,"time":10})").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / ".rank-0.json.tmp.99", "garbage").ok());
  ASSERT_TRUE(WriteFileAtomic(dir / "rank-2.json", "{\"v\":1,").ok());
  std::vector<std::string> problems;
  auto beats = ReadHeartbeatDir(dir.path(), &problems);
  ASSERT_EQ(beats.size(), 2u);
  EXPECT_EQ(beats[0].rank, 0);
  EXPECT_EQ(beats[1].step, 7);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("rank-2.json"), std::string::npos);
  EXPECT_TRUE(ReadHeartbeatDir(dir / "missing", &problems).empty());
}

}  // namespace
}  // namespace ek::heartbeat
