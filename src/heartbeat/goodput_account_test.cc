#include "heartbeat/goodput_account.h"

#include <gtest/gtest.h>

namespace ek::heartbeat {
namespace {

GoodputAccount SampleAccountForGoodputTest() {
  GoodputAccount g;
  g.wall_s = 100;
  g.training_s = 70;
  g.redone_s = 10;
  g.detection_s = 1;
  g.stopping_s = 2;
  g.rendezvous_s = 3;
  g.startup_s = 4;
  g.save_blocked_s = 5;
  g.other_s = 5;
  return g;
}

TEST(GoodputAccount, FileRoundTripsAndNamesItsFields) {
  GoodputFile f{"run-7", 1234.5, 2, true, SampleAccountForGoodputTest()};
  auto back = ParseGoodputFile(GoodputFileToJson(f), "launch/run-7/goodput.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->run_id, "run-7");
  EXPECT_EQ(back->attempt, 2);
  EXPECT_TRUE(back->running);
  EXPECT_DOUBLE_EQ(back->goodput.training_s, 70);
  EXPECT_DOUBLE_EQ(back->goodput.startup_s, 4);
  EXPECT_DOUBLE_EQ(back->goodput.RestartS(), 10);
  EXPECT_DOUBLE_EQ(back->goodput.Ratio(), 0.7);

  auto msg = [](const std::string& json) {
    auto r = ParseGoodputFile(json, "g.json");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  std::string good = GoodputFileToJson(f);
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  EXPECT_EQ(msg(with("\"startup\":4.000", "\"startup\":\"4\"")),
            "g.json: goodput.restart_s.startup: not a number");
  EXPECT_EQ(msg(with("\"redone_s\":10.000,", "")), "g.json: goodput.redone_s: missing");
  EXPECT_EQ(msg(with("\"other_s\":5.000", "\"other_s\":-5")),
            "g.json: goodput.other_s: -5 is negative");
  EXPECT_EQ(msg(with("\"v\":1", "\"v\":2")), "g.json: v: unknown goodput version 2");
  EXPECT_EQ(msg("{\"v\":1"), msg("{\"v\":1"));  // stable
  EXPECT_NE(msg("{\"v\":1"), "ok");
}

TEST(GoodputAccount, TheLineSaysTheRatioAndTheParts) {
  GoodputAccount g = SampleAccountForGoodputTest();
  g.wall_s = 4080;  // 1h08m
  g.training_s = 3720;
  g.redone_s = 180;
  g.detection_s = 120;
  g.stopping_s = g.rendezvous_s = g.startup_s = 0;
  g.save_blocked_s = 40;
  g.other_s = 20;
  EXPECT_EQ(GoodputLine(g),
            "goodput 91.2% (training 1h02m of 1h08m; redone 3m00s, restart 2m00s, saves blocked "
            "40s, other 20s)");
  EXPECT_EQ(ShortDuration(0.44), "0.4s");
}

}  // namespace
}  // namespace ek::heartbeat
