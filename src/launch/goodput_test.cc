#include "launch/goodput.h"

#include <gtest/gtest.h>

#include <random>

namespace ek::launch {
namespace {

double SumOfGoodputParts(const GoodputAccount& g) {
  return g.training_s + g.redone_s + g.RestartS() + g.save_blocked_s + g.other_s;
}

// Steps first..last finished at t0 + (step - first + 1) * dt, nothing blocked.
std::vector<StepMark> EvenGoodputSteps(int64_t first, int64_t last, double t0, double dt) {
  std::vector<StepMark> marks;
  for (int64_t s = first; s <= last; ++s) marks.push_back({s, t0 + (s - first + 1) * dt, 0, 0});
  return marks;
}

// A save after `step` blocked training for `seconds`, ending at `at`: the marks after it
// carry the blocked time.
void AddGoodputSave(std::vector<StepMark>* marks, int64_t step, double at, double seconds) {
  size_t i = 0;
  while (i < marks->size() && (*marks)[i].time <= at) ++i;
  StepMark before = i ? (*marks)[i - 1] : StepMark{};
  marks->insert(marks->begin() + static_cast<long>(i),
                {step, at, before.save_blocked_s + seconds, before.saves + 1});
  for (size_t j = i + 1; j < marks->size(); ++j) {
    (*marks)[j].save_blocked_s += seconds;
    (*marks)[j].saves += 1;
  }
}

TEST(Goodput, OneCleanAttempt) {
  AttemptTimeline a;
  a.attempt = 1;
  a.spawn = 10;
  a.started = 12;
  a.train_start = 20;
  a.marks = EvenGoodputSteps(1, 10, 20, 7);  // step 10 at 90
  AddGoodputSave(&a.marks, 5, 57, 2);        // after step 5 (at 55), 2 s blocked
  a.end = 95;
  GoodputResult r = ComputeGoodput(0, 100, {a});
  const GoodputAccount& g = r.launch;
  EXPECT_DOUBLE_EQ(g.wall_s, 100);
  EXPECT_DOUBLE_EQ(g.training_s, 68);
  EXPECT_DOUBLE_EQ(g.save_blocked_s, 2);
  EXPECT_DOUBLE_EQ(g.redone_s, 0);
  EXPECT_DOUBLE_EQ(g.RestartS(), 0);
  EXPECT_DOUBLE_EQ(g.other_s, 30);  // gate and start-up 20, the end 5, after the attempt 5
  EXPECT_DOUBLE_EQ(g.Ratio(), 0.68);
  ASSERT_EQ(r.attempts.size(), 1u);
  EXPECT_DOUBLE_EQ(r.attempts[0].wall_s, 95);
  EXPECT_DOUBLE_EQ(r.attempts[0].training_s, 68);
}

TEST(Goodput, ACrashAfterASaveRedoesTheStepsAfterIt) {
  AttemptTimeline a;  // attempt 1: steps 1-8, saved after 4, rank killed during step 9
  a.attempt = 1;
  a.spawn = 0;
  a.started = 1;
  a.train_start = 5;
  a.marks = EvenGoodputSteps(1, 8, 5, 5);  // step 4 at 25, 8 at 45
  AddGoodputSave(&a.marks, 4, 26, 1);
  a.kept_through = 4;
  a.failed = true;
  // The killed rank's end 47, torchrun's SIGTERM to the others at 48, every rank gone at 50.
  NodeRecord n;
  RankRecord killed, stopped;
  killed.rank = 1;
  killed.signal = 9;
  killed.end = 47;
  stopped.rank = 0;
  stopped.exit_code = -1;
  stopped.signal = 15;
  stopped.stop_signal = 15;
  stopped.stop_time = 48;
  stopped.end = 49.5;
  n.ranks = {stopped, killed};
  FailureTimes({n}, {}, 50, &a.failed_at, &a.detected_at);
  EXPECT_DOUBLE_EQ(a.failed_at, 47);
  EXPECT_DOUBLE_EQ(a.detected_at, 48);
  a.end = 50;
  AttemptTimeline b;  // attempt 2: resumed from 4 after a backoff, to the end
  b.attempt = 2;
  b.spawn = 55;
  b.started = 58;
  b.train_start = 62;
  b.resumed_from = 4;
  b.marks = EvenGoodputSteps(5, 10, 62, 5);  // step 10 at 92
  b.end = 95;
  GoodputResult r = ComputeGoodput(0, 100, {a, b});
  const GoodputAccount& g = r.launch;
  EXPECT_DOUBLE_EQ(g.training_s, 50);  // 5-26 less the 1 s save, and 62-92
  EXPECT_DOUBLE_EQ(g.save_blocked_s, 1);
  EXPECT_DOUBLE_EQ(g.redone_s, 21);  // 26-47: steps 5-8 and the partial step 9
  EXPECT_DOUBLE_EQ(g.detection_s, 1);
  EXPECT_DOUBLE_EQ(g.stopping_s, 2);
  EXPECT_DOUBLE_EQ(g.rendezvous_s, 8);  // 50-58: the backoff, torchrun, the rendezvous
  EXPECT_DOUBLE_EQ(g.startup_s, 4);
  EXPECT_DOUBLE_EQ(g.other_s, 13);  // 0-5, 92-95, 95-100
  EXPECT_DOUBLE_EQ(SumOfGoodputParts(g), 100);
  EXPECT_DOUBLE_EQ(g.Ratio(), 0.5);
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_DOUBLE_EQ(r.attempts[0].wall_s, 50);
  EXPECT_DOUBLE_EQ(r.attempts[0].redone_s, 21);
  EXPECT_DOUBLE_EQ(r.attempts[1].wall_s, 45);
  EXPECT_DOUBLE_EQ(r.attempts[1].rendezvous_s, 8);
}

TEST(Goodput, AHangIsDetectedByTheCollectiveTimeout) {
  AttemptTimeline a;
  a.attempt = 1;
  a.spawn = 0;
  a.started = 2;
  a.train_start = 4;
  a.marks = EvenGoodputSteps(1, 3, 4, 2);  // step 3 at 10
  AddGoodputSave(&a.marks, 3, 10.5, 0.5);
  for (int64_t s = 4; s <= 6; ++s) a.marks.push_back({s, 10.5 + 2 * (s - 3), 0.5, 1});
  a.kept_through = 3;
  a.failed = true;
  // Rank 1 was SIGSTOPped after its beat at 16.6; rank 0's collective timed out at 76.6.
  NodeRecord n;
  RankRecord timed_out, hung;
  timed_out.rank = 0;
  timed_out.exit_code = 1;
  timed_out.end = 76.6;
  hung.rank = 1;
  hung.exit_code = -1;
  hung.signal = 9;
  hung.stop_signal = 15;
  hung.stop_time = 76.7;
  hung.end = 80;
  n.ranks = {timed_out, hung};
  n.progress = {{0, 6, "forward", 7, 16.9, 100}, {1, 6, "forward", 7, 16.6, 101}};
  FailureTimes({n}, {1}, 80, &a.failed_at, &a.detected_at);
  EXPECT_DOUBLE_EQ(a.failed_at, 16.6);
  EXPECT_DOUBLE_EQ(a.detected_at, 76.6);
  a.end = 80;
  AttemptTimeline b;
  b.attempt = 2;
  b.spawn = 90;
  b.started = 91;
  b.train_start = 95;
  b.resumed_from = 3;
  b.marks = EvenGoodputSteps(4, 6, 95, 2);  // step 6 at 101
  b.end = 102;
  GoodputResult r = ComputeGoodput(0, 103, {a, b});
  const GoodputAccount& g = r.launch;
  EXPECT_DOUBLE_EQ(g.training_s, 12);
  EXPECT_DOUBLE_EQ(g.save_blocked_s, 0.5);
  EXPECT_NEAR(g.redone_s, 6.1, 1e-9);
  EXPECT_NEAR(g.detection_s, 60, 1e-9);
  EXPECT_NEAR(g.stopping_s, 3.4, 1e-9);
  EXPECT_DOUBLE_EQ(g.rendezvous_s, 11);
  EXPECT_DOUBLE_EQ(g.startup_s, 4);
  EXPECT_DOUBLE_EQ(g.other_s, 6);
  EXPECT_NEAR(SumOfGoodputParts(g), 103, 1e-9);
}

// Whatever the times (unknown ones, out of order, from hosts whose clocks differ),
// the parts sum to the wall time and none is negative.
TEST(Goodput, PartsAlwaysSumToTheWallTime) {
  std::mt19937_64 rng(22);
  std::uniform_real_distribution<double> t(-10, 110);
  for (int round = 0; round < 2000; ++round) {
    std::vector<AttemptTimeline> attempts(1 + rng() % 4);
    for (auto& a : attempts) {
      a.spawn = t(rng);
      a.started = rng() % 3 ? t(rng) : 0;
      a.train_start = rng() % 3 ? t(rng) : 0;
      for (int m = 0, n = static_cast<int>(rng() % 6); m < n; ++m)
        a.marks.push_back({static_cast<int64_t>(rng() % 10), t(rng), t(rng) / 10 + 1,
                           static_cast<int64_t>(rng() % 3)});
      a.resumed_from = static_cast<int64_t>(rng() % 4) - 1;
      a.kept_through = rng() % 2 ? kAllStepsKept : static_cast<int64_t>(rng() % 10);
      a.failed = rng() % 2;
      a.failed_at = t(rng);
      a.detected_at = t(rng);
      a.end = t(rng);
    }
    GoodputResult r = ComputeGoodput(0, 100, attempts);
    const GoodputAccount& g = r.launch;
    ASSERT_NEAR(SumOfGoodputParts(g), 100, 1e-9) << "round " << round;
    for (double part : {g.training_s, g.redone_s, g.detection_s, g.stopping_s, g.rendezvous_s,
                        g.startup_s, g.save_blocked_s, g.other_s})
      ASSERT_GE(part, 0) << "round " << round;
    double attempts_wall = 0;
    for (const auto& x : r.attempts) {
      ASSERT_NEAR(SumOfGoodputParts(x), x.wall_s, 1e-9);
      attempts_wall += x.wall_s;
    }
    ASSERT_LE(attempts_wall, 100 + 1e-9);
  }
}

TEST(Goodput, TheTrackerFollowsTheLowestRankAndIgnoresEarlierAttempts) {
  BeatTracker tracker(/*since=*/100);
  heartbeat::Heartbeat old;  // an earlier attempt's file
  old.rank = 0;
  old.step = 9;
  old.time = old.step_time = 50;
  heartbeat::Heartbeat r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r0.step = r1.step = -1;
  r0.time = r1.time = 101;
  r0.started = 100.5;
  r1.started = 100.8;
  tracker.Observe({old});
  EXPECT_TRUE(tracker.marks().empty());
  tracker.Observe({r0, r1});
  EXPECT_TRUE(tracker.marks().empty());  // no step yet
  EXPECT_DOUBLE_EQ(tracker.started(), 100.8);
  EXPECT_DOUBLE_EQ(tracker.train_start(), 0);
  r0.train_start = 103;
  r1.train_start = 103.2;
  r0.step = 1;
  r0.time = r0.step_time = 105;
  r1.step = 1;
  r1.time = r1.step_time = 105.1;
  tracker.Observe({r0, r1});
  r0.step = 2;
  r0.step_time = 107;
  r0.time = 108;  // the save after step 2 ended at 108, blocking 0.8 s
  r0.save_blocked_s = 0.8;
  r0.saves = 1;
  tracker.Observe({r0, r1});
  tracker.Observe({r0, r1});  // nothing new: no mark
  EXPECT_DOUBLE_EQ(tracker.train_start(), 103.2);
  ASSERT_EQ(tracker.marks().size(), 3u);
  EXPECT_EQ(tracker.marks()[0].step, 1);
  EXPECT_DOUBLE_EQ(tracker.marks()[0].time, 105);
  EXPECT_EQ(tracker.marks()[1].step, 2);
  EXPECT_DOUBLE_EQ(tracker.marks()[1].time, 107);
  EXPECT_DOUBLE_EQ(tracker.marks()[1].save_blocked_s, 0);
  EXPECT_DOUBLE_EQ(tracker.marks()[2].time, 108);
  EXPECT_DOUBLE_EQ(tracker.marks()[2].save_blocked_s, 0.8);
  EXPECT_EQ(tracker.marks()[2].saves, 1);
}

}  // namespace
}  // namespace ek::launch
