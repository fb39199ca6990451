#include "triage/classifier.h"

#include <gtest/gtest.h>

#include "triage/test_util.h"

namespace ek::triage {
namespace {

using testing::Round;
using testing::Same;
using testing::With;

constexpr int kWorld = 16;

Classifier B300(ClassifierOptions o = {}) { return Classifier(B300Profile(), o, kWorld); }

TEST(Classifier, UniformHealthyBandIsHealthy) {
  Classifier c = B300();
  Assessment a = Round(&c, 100, Same(kWorld, 990), Same(kWorld, 100));
  EXPECT_EQ(a.verdict, Verdict::kHealthy);
  EXPECT_EQ(a.band, Band::kHealthy);
  EXPECT_EQ(a.ranks.size(), 16u);
  EXPECT_DOUBLE_EQ(a.median_power_w, 990);
  EXPECT_NE(a.reason.find("healthy band: median 990 W"), std::string::npos) << a.reason;
}

TEST(Classifier, RankNeverSeenIsUnknownNeverHealthy) {
  Classifier c = B300();
  for (int r = 0; r < kWorld - 1; ++r) c.Observe(r, testing::At(100, 990, 100));
  Assessment a = c.Evaluate(100);
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.ranks, std::vector<int>{15});
  EXPECT_NE(a.reason.find("rank 15"), std::string::npos) << a.reason;
}

TEST(Classifier, StaleRankBecomesUnknown) {
  Classifier c = B300();
  Round(&c, 100, Same(kWorld, 990), Same(kWorld, 100));
  for (int t = 101; t <= 104; ++t) {
    for (int r = 0; r < 8; ++r) c.Observe(r, testing::At(t, 990, 100));
    Assessment a = c.Evaluate(t);
    if (t <= 103) {
      EXPECT_EQ(a.verdict, Verdict::kHealthy) << t;  // within stale_after_s = 3
    } else {
      EXPECT_EQ(a.verdict, Verdict::kUnknown) << t;
      EXPECT_EQ(a.ranks.size(), 8u);
      EXPECT_NE(a.reason.find("ranks 8-15"), std::string::npos) << a.reason;
    }
  }
}

TEST(Classifier, MissingPowerAgesOutEvenWhileUtilizationArrives) {
  Classifier c = B300();
  Round(&c, 100, Same(kWorld, 990), Same(kWorld, 100));
  Assessment a;
  for (int t = 101; t <= 105; ++t) {
    for (int r = 0; r < kWorld; ++r) {
      c.Observe(r, testing::At(t, r == 5 ? std::nullopt : std::optional<double>(990), 100));
    }
    a = c.Evaluate(t);
  }
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.ranks, std::vector<int>{5});
}

TEST(Classifier, RankZeroAloneIdleAtTheFloorIsCheckpoint) {
  Classifier c = B300();
  Assessment a = Round(&c, 100, Same(kWorld, 190), With(Same(kWorld, 100), 0, 0));
  EXPECT_EQ(a.verdict, Verdict::kCheckpoint);
  EXPECT_EQ(a.ranks, std::vector<int>{0});
  EXPECT_FALSE(a.overdue);
  EXPECT_NE(a.reason.find("rank 0 alone at 0% while ranks 1-15 wait"), std::string::npos)
      << a.reason;
}

TEST(Classifier, CheckpointThatNeverEndsIsNeverDeadlockButIsFlaggedOverdue) {
  ClassifierOptions o;
  o.checkpoint_planned_s = 10;  // overdue past 30 s
  Classifier c = B300(o);
  for (int t = 0; t <= 40; ++t) {
    Assessment a = Round(&c, t, Same(kWorld, 190), With(Same(kWorld, 100), 0, 0));
    ASSERT_EQ(a.verdict, Verdict::kCheckpoint) << t;
    EXPECT_EQ(a.overdue, t > 30) << t;
    if (t == 40) {
      EXPECT_NE(a.reason.find("OVERDUE"), std::string::npos);
    }
  }
}

TEST(Classifier, DeadlockNeedsTwoSamplesAndNamesTheRank) {
  Classifier c = B300();
  Round(&c, 99, Same(kWorld, 990), Same(kWorld, 100));
  auto util = With(Same(kWorld, 100), 3, 0);
  Assessment first = Round(&c, 100, Same(kWorld, 191), util);
  EXPECT_EQ(first.verdict, Verdict::kUnknown);
  EXPECT_NE(first.reason.find("deadlock shape"), std::string::npos) << first.reason;
  Assessment second = Round(&c, 101, Same(kWorld, 191), util);
  EXPECT_EQ(second.verdict, Verdict::kDeadlockSuspect);
  EXPECT_EQ(second.ranks, std::vector<int>{3});
  EXPECT_DOUBLE_EQ(second.since, 100);
  EXPECT_EQ(second.samples, 2);
  EXPECT_NE(second.reason.find("floor band: median 191 W"), std::string::npos) << second.reason;
  EXPECT_NE(second.reason.find("rank 3 at <= 5% while ranks 0-2,4-15 at >= 80%"), std::string::npos)
      << second.reason;
  EXPECT_NE(second.reason.find("2 samples, 1 s"), std::string::npos) << second.reason;
}

TEST(Classifier, DeadlockShapeFirstSeenWhilePowerFallsCounts) {
  Classifier c = B300();
  auto util = With(Same(kWorld, 100), 7, 0);
  EXPECT_EQ(Round(&c, 100, Same(kWorld, 480), util).verdict, Verdict::kUnknown);
  EXPECT_EQ(Round(&c, 101, Same(kWorld, 190), util).verdict, Verdict::kDeadlockSuspect);
}

TEST(Classifier, DeadlockShapeMovingToAnotherRankStartsOver) {
  Classifier c = B300();
  EXPECT_EQ(Round(&c, 100, Same(kWorld, 190), With(Same(kWorld, 100), 3, 0)).verdict,
            Verdict::kUnknown);
  EXPECT_EQ(Round(&c, 101, Same(kWorld, 190), With(Same(kWorld, 100), 5, 0)).verdict,
            Verdict::kUnknown);
  EXPECT_EQ(Round(&c, 102, Same(kWorld, 190), With(Same(kWorld, 100), 5, 0)).verdict,
            Verdict::kDeadlockSuspect);
}

TEST(Classifier, FewIdleRanksAtTheFloorAreDeadlockSuspects) {
  Classifier c = B300();
  auto util = With(With(Same(kWorld, 100), 0, 0), 9, 0);
  Round(&c, 100, Same(kWorld, 190), util);
  Assessment a = Round(&c, 101, Same(kWorld, 190), util);
  EXPECT_EQ(a.verdict, Verdict::kDeadlockSuspect);
  EXPECT_EQ(a.ranks, (std::vector<int>{0, 9}));
}

TEST(Classifier, ScatterAtMidPowerIsStarvationOncePersisted) {
  Classifier c = B300();
  std::vector<double> util = {100, 40, 95, 30, 100, 60, 85, 20, 100, 50, 90, 35, 100, 70, 45, 100};
  EXPECT_EQ(Round(&c, 100, Same(kWorld, 575), util).verdict, Verdict::kUnknown);
  Assessment a = Round(&c, 101, Same(kWorld, 575), util);
  EXPECT_EQ(a.verdict, Verdict::kStarvation);
  EXPECT_EQ(a.band, Band::kMid);
  EXPECT_GT(a.util_sd, 15);
  EXPECT_NE(a.reason.find("scatter"), std::string::npos);
  EXPECT_EQ(a.ranks, (std::vector<int>{1, 3, 5, 7, 9, 11, 13, 14}));
}

TEST(Classifier, UniformBusyAtMidPowerIsCommunication) {
  Classifier c = B300();
  Round(&c, 100, Same(kWorld, 640), Same(kWorld, 100));
  Assessment a = Round(&c, 101, Same(kWorld, 640), Same(kWorld, 99));
  EXPECT_EQ(a.verdict, Verdict::kCommunication);
  EXPECT_NE(a.reason.find("communication-bound"), std::string::npos);
}

TEST(Classifier, MidMedianOfFlooredAndHealthyRanksIsNotCommunication) {
  Classifier c = B300();
  std::vector<double> power = Same(kWorld, 990);
  for (int r = 8; r < kWorld; ++r) power[static_cast<size_t>(r)] = 190;
  for (int t = 0; t < 3; ++t) {
    Assessment a = Round(&c, t, power, Same(kWorld, 100));
    EXPECT_EQ(a.band, Band::kMid);
    EXPECT_EQ(a.verdict, Verdict::kUnknown);
  }
}

TEST(Classifier, AllIdleAtTheFloorIsIdle) {
  Classifier c = B300();
  EXPECT_EQ(Round(&c, 100, Same(kWorld, 140), Same(kWorld, 0)).verdict, Verdict::kIdle);
}

TEST(Classifier, AllPinnedBusyAtTheFloorIsDeadlockOnlyAfterHangTime) {
  ClassifierOptions o;
  o.all_busy_hang_s = 10;
  Classifier c = B300(o);
  for (int t = 0; t <= 12; ++t) {
    Assessment a = Round(&c, t, Same(kWorld, 190), Same(kWorld, 100));
    EXPECT_EQ(a.verdict, t >= 10 ? Verdict::kDeadlockSuspect : Verdict::kUnknown) << t;
  }
}

TEST(Classifier, HealthyMedianWithAFlooredRankIsNotHealthy) {
  Classifier c = B300();
  Assessment a = Round(&c, 100, With(Same(kWorld, 990), 6, 300), Same(kWorld, 100));
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_EQ(a.ranks, std::vector<int>{6});
}

TEST(Classifier, IdleRankWhilePowerIsHealthyIsNotHealthy) {
  Classifier c = B300();
  Assessment a = Round(&c, 100, Same(kWorld, 990), With(Same(kWorld, 100), 2, 0));
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
}

TEST(Classifier, OlderSampleDoesNotOverwriteNewer) {
  Classifier c = B300();
  Round(&c, 100, Same(kWorld, 990), Same(kWorld, 100));
  c.Observe(4, testing::At(99, 190, 0));
  EXPECT_EQ(c.Evaluate(100).verdict, Verdict::kHealthy);
}

TEST(Classifier, BandsScaleWithTheProfile) {
  Profile h100 = *BuiltinProfile("H100");
  Classifier c(h100, {}, kWorld);
  double k = 700.0 / 1100.0;
  EXPECT_EQ(Round(&c, 100, Same(kWorld, 990 * k), Same(kWorld, 100)).verdict, Verdict::kHealthy);
  // 990 W would be "healthy" on a B300; 190 W*k floor on an H100 is the floor.
  auto util = With(Same(kWorld, 100), 0, 0);
  EXPECT_EQ(Round(&c, 101, Same(kWorld, 190 * k), util).verdict, Verdict::kCheckpoint);
}

TEST(Classifier, PowerAboveTheProfileIsNeverHealthy) {
  Classifier c(*BuiltinProfile("A100"), {}, kWorld);
  Assessment a = Round(&c, 100, Same(kWorld, 990), Same(kWorld, 100));
  EXPECT_EQ(a.verdict, Verdict::kUnknown);
  EXPECT_NE(a.reason.find("wrong --profile"), std::string::npos) << a.reason;
}

TEST(Classifier, FormatDuration) {
  EXPECT_EQ(FormatDuration(4.6), "5 s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3 * 3600 + 120), "3h02m");
}

}  // namespace
}  // namespace ek::triage
