#include "triage/calibrate.h"

#include <gtest/gtest.h>

#include <random>

#include "triage/test_util.h"

namespace ek::triage {
namespace {

std::vector<telemetry::Sample> Window(int n, double power, double power_sd, double util,
                                      uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, power_sd);
  std::vector<telemetry::Sample> v;
  for (int i = 0; i < n; ++i) {
    telemetry::Sample s = testing::At(i / 8, power + noise(rng), util);
    s.host = "n";
    s.gpu = i % 8;
    v.push_back(s);
  }
  return v;
}

TEST(Calibrate, LearnsBandsFromAHealthyWindow) {
  // An H100 fleet capped to 600 W: healthy ~540 W.
  Result<Profile> p = Calibrate(Window(400, 540, 10, 100, 1), {}, {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NEAR(p->healthy_lo_w, 540 - 1.645 * 10, 4);
  EXPECT_NEAR(p->healthy_hi_w, 540 + 1.645 * 10, 4);
  EXPECT_NEAR(p->floor_w, 540 * 190.0 / 990, 2);
  EXPECT_LT(p->starvation_w, p->communication_w);
  EXPECT_TRUE(p->Validate().ok());
  // The learnt profile classifies that run as healthy and a floored rank-0 gap as checkpoint.
  Classifier c(*p, {}, 8);
  EXPECT_EQ(testing::Round(&c, 1, testing::Same(8, 540), testing::Same(8, 100)).verdict,
            Verdict::kHealthy);
  EXPECT_EQ(testing::Round(&c, 2, testing::Same(8, 110), testing::With(testing::Same(8, 100), 0, 0))
                .verdict,
            Verdict::kCheckpoint);
}

TEST(Calibrate, IdleWindowSetsTheFloor) {
  Result<Profile> p = Calibrate(Window(400, 990, 20, 100, 2), Window(80, 150, 3, 0, 3), {});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_NEAR(p->floor_w, 150, 2);
  EXPECT_NEAR(p->idle_w, 150, 2);
  EXPECT_NE(p->origin.find("idle median"), std::string::npos);
}

TEST(Calibrate, RejectsWindowsThatAreNotWhatTheyClaim) {
  auto too_few = Calibrate(Window(10, 990, 5, 100, 4), {}, {});
  EXPECT_EQ(too_few.status().code(), StatusCode::kFailedPrecondition);
  auto starved = Window(400, 575, 5, 100, 5);
  for (size_t i = 0; i < starved.size(); i += 3) starved[i].util_pct = 30;
  auto not_busy = Calibrate(starved, {}, {});
  ASSERT_FALSE(not_busy.ok());
  EXPECT_NE(not_busy.status().message().find("not steady training"), std::string::npos);
  auto busy_idle = Calibrate(Window(400, 990, 5, 100, 6), Window(80, 600, 5, 100, 7), {});
  ASSERT_FALSE(busy_idle.ok());
  EXPECT_NE(busy_idle.status().message().find("work running"), std::string::npos);
  auto flat = Calibrate(Window(400, 200, 5, 100, 8), Window(80, 150, 5, 0, 9), {});
  ASSERT_FALSE(flat.ok());
  EXPECT_NE(flat.status().message().find("too close to the floor"), std::string::npos);
}

}  // namespace
}  // namespace ek::triage
