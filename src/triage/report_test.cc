#include "triage/report.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <set>

#include "triage/test_util.h"

namespace ek::triage {
namespace {

TEST(Report, EveryVerdictHasItsOwnExitCode) {
  std::set<int> codes;
  for (Verdict v :
       {Verdict::kHealthy, Verdict::kCheckpoint, Verdict::kDeadlockSuspect, Verdict::kStarvation,
        Verdict::kCommunication, Verdict::kIdle, Verdict::kUnknown}) {
    Assessment a;
    a.verdict = v;
    codes.insert(ExitCode(a));
  }
  Assessment overdue;
  overdue.verdict = Verdict::kCheckpoint;
  overdue.overdue = true;
  codes.insert(ExitCode(overdue));
  EXPECT_EQ(codes.size(), 8u);
  EXPECT_EQ(codes.count(1), 0u);  // 1 is "error"
  EXPECT_EQ(codes.count(2), 0u);  // 2 is "usage"
  Assessment healthy;
  healthy.verdict = Verdict::kHealthy;
  EXPECT_EQ(ExitCode(healthy), 0);
}

TEST(Report, JsonAndLineCarryVerdictRanksAndReason) {
  Classifier c(B300Profile(), {}, 16);
  auto util = testing::With(testing::Same(16, 100), 11, 0);
  testing::Round(&c, 1764424981, testing::Same(16, 190), util);
  Assessment a = testing::Round(&c, 1764424982, testing::Same(16, 190), util);
  ASSERT_EQ(a.verdict, Verdict::kDeadlockSuspect);
  auto topo = telemetry::Topology::FromHosts({"node-a", "node-b"}, 8);
  std::string json = FormatJson(a, topo);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(json).get(doc)) << json;
  EXPECT_EQ(std::string_view(doc["verdict"]), "DEADLOCK_SUSPECT");
  EXPECT_EQ(int64_t(doc["ranks"].at(0)), 11);
  EXPECT_EQ(std::string_view(doc["rank_ranges"]), "11");
  EXPECT_EQ(std::string_view(doc["gpus"].at(0)), "node-b:3");
  EXPECT_EQ(std::string_view(doc["band"]), "floor");
  EXPECT_DOUBLE_EQ(double(doc["median_power_w"]), 190);
  EXPECT_DOUBLE_EQ(double(doc["duration_s"]), 1);
  EXPECT_EQ(std::string_view(doc["time_utc"]), "2025-11-29T14:03:02.000Z");
  EXPECT_NE(std::string_view(doc["reason"]).find("rank 11"), std::string_view::npos);
  std::string line = FormatLine(a, topo);
  EXPECT_NE(line.find("DEADLOCK_SUSPECT"), std::string::npos);
  EXPECT_NE(line.find("[node-b:3]"), std::string::npos) << line;
}

TEST(Report, UnknownWithoutPowerWritesNull) {
  Assessment a;
  std::string json = FormatJson(a, {});
  EXPECT_NE(json.find("\"median_power_w\":null"), std::string::npos) << json;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_FALSE(parser.parse(json).get(doc));
}

// The bytes of one --json window (docs/triage.md), as the writer before JsonWriter wrote
// them: three decimals, NaN as null, gpus only when the verdict is about some ranks.
TEST(Report, JsonBytesArePinned) {
  Assessment a;
  a.time = 1700000000.5;
  a.verdict = Verdict::kDeadlockSuspect;
  a.ranks = {3};
  a.since = 1699999990.25;
  a.duration_s = 10.25;
  a.samples = 3;
  a.median_power_w = 190.5;
  a.util_min = 0;
  a.util_max = 100;
  a.reason = "one \"rank\" at 0%";
  EXPECT_EQ(FormatJson(a, telemetry::Topology(2, 4, {"node-a", "node-b"})),
            R"({"time":1700000000.500,"time_utc":"2023-11-14T22:13:20.500Z",)"
            R"("verdict":"DEADLOCK_SUSPECT","ranks":[3],"rank_ranges":"3","gpus":["node-a:3"],)"
            R"("band":"none","median_power_w":190.500,"util_min":0.000,"util_max":100.000,)"
            R"("util_sd":null,"since":1699999990.250,"duration_s":10.250,"samples":3,)"
            R"("overdue":false,"reason":"one \"rank\" at 0%"})");
}

}  // namespace
}  // namespace ek::triage
