#include "watch/detectors.h"

#include <gtest/gtest.h>

namespace ek::watch {
namespace {

struct RankSpec {
  int rank;
  int64_t step;
  double step_age_s;
  bool alive = true;
  std::string phase = "train";
  double tok_s = 1000;
  int64_t total_steps = 0;
  int64_t phase_step = -1;
  double phase_age_s = -1;
};

AgentPoll Poll(const std::string& host, double now,
               std::vector<std::pair<double, double>> util_power, std::vector<RankSpec> ranks) {
  AgentPoll p;
  p.target = host;
  p.received = now;
  p.ok = true;
  p.status.host = host;
  p.status.telemetry = "ok";
  for (size_t g = 0; g < util_power.size(); ++g) {
    p.status.gpus.push_back(
        GpuReading{static_cast<int>(g), util_power[g].first, util_power[g].second, 1000.0, 0.1});
  }
  for (const auto& r : ranks) {
    RankReading rr;
    rr.hb.rank = r.rank;
    rr.hb.local_rank = r.rank % 2;
    rr.hb.step = r.step;
    rr.hb.step_s = 2;
    rr.hb.tok_s = r.tok_s;
    rr.hb.phase = r.phase;
    rr.hb.total_steps = r.total_steps;
    rr.hb.phase_step = r.phase_step;
    rr.phase_age_s = r.phase_age_s;
    rr.alive = r.alive;
    rr.step_age_s = r.step_age_s;
    rr.beat_age_s = r.step_age_s;
    p.status.ranks.push_back(rr);
  }
  return p;
}

WatchSettings Settings() {
  WatchSettings s;
  s.run = "t";
  s.gpus_per_node = 2;
  s.hosts = {"a", "b"};
  s.hang_floor_s = 30;
  s.hang_factor = 10;
  s.checkpoint_allowance_s = 60;
  s.stale_after_s = 5;
  return s;
}

const std::vector<std::pair<double, double>> kHealthy = {{100, 990}, {100, 1000}};

bool Has(const std::vector<Finding>& f, Kind k) {
  for (const auto& x : f) {
    if (x.kind == k) return true;
  }
  return false;
}
const Finding* Get(const std::vector<Finding>& f, Kind k) {
  for (const auto& x : f) {
    if (x.kind == k) return &x;
  }
  return nullptr;
}

TEST(Detectors, HealthyRunRaisesNothing) {
  Detectors d(Settings(), triage::B300Profile());
  for (int t = 0; t < 10; ++t) {
    auto f =
        d.Evaluate(100 + t, {Poll("a", 100 + t, kHealthy, {{0, 10 + t, 0.5}, {1, 10 + t, 0.5}}),
                             Poll("b", 100 + t, kHealthy, {{2, 10 + t, 0.5}, {3, 10 + t, 0.5}})});
    EXPECT_TRUE(f.empty()) << f[0].summary;
  }
}

TEST(Detectors, HangAfterMaxOfFloorAndStepTimesK) {
  Detectors d(Settings(), triage::B300Profile());
  // step_s = 2, k = 10 -> 20 s, floor 30 s: the limit is 30 s.
  auto at = [&](double age) {
    return d.Evaluate(1000, {Poll("a", 1000, kHealthy, {{0, 50, age}, {1, 50, age + 3}}),
                             Poll("b", 1000, kHealthy, {{2, 50, age}, {3, 50, age}})});
  };
  EXPECT_FALSE(Has(at(29), Kind::kHang));
  auto f = at(31);
  const Finding* h = Get(f, Kind::kHang);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(h->hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_DOUBLE_EQ(h->since, 1000 - 31);
  EXPECT_NEAR(h->gpu_hours, 4 * 31 / 3600.0, 1e-9);
  EXPECT_NE(h->evidence.find("31.0 s"), std::string::npos) << h->evidence;
}

TEST(Detectors, CheckpointPhaseGetsItsAllowance) {
  Detectors d(Settings(), triage::B300Profile());
  auto f =
      d.Evaluate(1000, {Poll("a", 1000, kHealthy, {{0, 50, 80, true, "checkpoint"}, {1, 50, 80}}),
                        Poll("b", 1000, kHealthy, {{2, 50, 80}, {3, 50, 80}})});
  EXPECT_FALSE(Has(f, Kind::kHang));  // 80 < 30 + 60
  f = d.Evaluate(1001, {Poll("a", 1001, kHealthy, {{0, 50, 95, true, "checkpoint"}, {1, 50, 95}}),
                        Poll("b", 1001, kHealthy, {{2, 50, 95}, {3, 50, 95}})});
  EXPECT_TRUE(Has(f, Kind::kHang));
}

// The field report's deadlock from the ranks' own phases: rank 3 in the save
// barrier after step 35, ranks 0-2 in the forward of step 36.
TEST(Detectors, DesyncFromPhasesIsADeadlockNamingTheOddRank) {
  WatchSettings s = Settings();
  s.desync_s = 10;
  Detectors d(s, triage::B300Profile());
  auto round = [&](double now, double barrier_age) {
    RankSpec fwd{0, 35, 1, true, "forward", 1000, 0, 36, 1};
    RankSpec r1 = fwd, r2 = fwd;
    r1.rank = 1;
    r2.rank = 2;
    RankSpec r3{3, 35, barrier_age, true, "save_barrier", 1000, 0, 35, barrier_age};
    // No GPU telemetry: the rule needs none.
    return d.Evaluate(now, {Poll("a", now, {}, {fwd, r1}), Poll("b", now, {}, {r2, r3})});
  };
  EXPECT_FALSE(Has(round(1000, 9), Kind::kDeadlock)) << "not before watch.desync_s";
  auto f = round(1001, 11);
  const Finding* dl = Get(f, Kind::kDeadlock);
  ASSERT_TRUE(dl);
  EXPECT_EQ(dl->ranks, std::vector<int>{3});
  EXPECT_EQ(dl->hosts, std::vector<std::string>{"b"});
  EXPECT_NE(
      dl->summary.find("rank 3 in save_barrier after step 35; ranks 0-2 in forward of step 36"),
      std::string::npos)
      << dl->summary;
  EXPECT_DOUBLE_EQ(dl->since, 1001 - 11);
  EXPECT_NEAR(dl->gpu_hours, 4 * 11 / 3600.0, 1e-9);
  EXPECT_FALSE(Has(f, Kind::kHang)) << "a named deadlock, not a generic hang";
}

TEST(Detectors, EveryRankInTheSaveBarrierAtOneStepIsAHealthySave) {
  Detectors d(Settings(), triage::B300Profile());
  std::vector<RankSpec> a, b;
  for (int r = 0; r < 4; ++r) {
    RankSpec x{r, 500, 20, true, "save_barrier", 1000, 0, 500, 20};
    (r < 2 ? a : b).push_back(x);
  }
  auto f = d.Evaluate(1000, {Poll("a", 1000, kHealthy, a), Poll("b", 1000, kHealthy, b)});
  EXPECT_FALSE(Has(f, Kind::kDeadlock));
  EXPECT_FALSE(Has(f, Kind::kHang));
  // A save in progress on rank 0 while the others wait in the barrier: the same step.
  a[0].phase = "save";
  f = d.Evaluate(1001, {Poll("a", 1001, kHealthy, a), Poll("b", 1001, kHealthy, b)});
  EXPECT_FALSE(Has(f, Kind::kDeadlock));
}

TEST(Detectors, CrashIsAGoneProcessWithoutCompletion) {
  Detectors d(Settings(), triage::B300Profile());
  auto f = d.Evaluate(1000, {Poll("a", 1000, kHealthy, {{0, 50, 1}, {1, 50, 1}}),
                             Poll("b", 1000, kHealthy, {{2, 50, 1}, {3, 49, 4, false}})});
  const Finding* c = Get(f, Kind::kCrash);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ranks, std::vector<int>{3});
  EXPECT_EQ(c->hosts, std::vector<std::string>{"b"});
  EXPECT_FALSE(Has(f, Kind::kHang));
}

TEST(Detectors, CompletionNeedsACompleteFinalCheckpointAndSilencesCrash) {
  Detectors d(Settings(), triage::B300Profile());
  AgentPoll a = Poll("a", 1000, kHealthy,
                     {{0, 100, 1, false, "done", 0, 100}, {1, 100, 1, false, "done", 0, 100}});
  AgentPoll b = Poll("b", 1000, kHealthy,
                     {{2, 100, 1, false, "done", 0, 100}, {3, 100, 1, false, "done", 0, 100}});
  CheckpointInfo partial{"step-00000100", 100, false, 3, 10, 0, "no index"};
  a.status.checkpoint.in_progress = partial;
  auto f = d.Evaluate(1000, {a, b});
  EXPECT_FALSE(Has(f, Kind::kCompletion));
  EXPECT_FALSE(Has(f, Kind::kCrash));  // every rank said done
  CheckpointInfo full{"step-00000100", 100, true, 4, 40, 0, ""};
  a.status.checkpoint.in_progress.reset();
  a.status.checkpoint.newest_complete = full;
  f = d.Evaluate(1001, {a, b});
  ASSERT_TRUE(Has(f, Kind::kCompletion));
  EXPECT_EQ(f.size(), 1u);
  // Latched across a restart of the watcher.
  Detectors again(Settings(), triage::B300Profile());
  ASSERT_TRUE(again.LoadJson(d.SaveJson()).ok());
  EXPECT_TRUE(Has(again.Evaluate(1002, {}), Kind::kCompletion));
}

// The detector state is read strictly: the old reader turned a missing or
// mistyped latch into false and a counter into 0, forgetting a completion.
TEST(Detectors, LoadJsonNamesAMissingMistypedOrMisnestedField) {
  Detectors d(Settings(), triage::B300Profile());
  const std::string good = d.SaveJson();
  auto with = [&](std::string_view from, std::string_view to) {
    std::string j = good;
    size_t at = j.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << good;
    if (at != std::string::npos) j.replace(at, from.size(), to);
    Detectors again(Settings(), triage::B300Profile());
    Status st = again.LoadJson(j, "state.json");
    return st.ok() ? std::string("ok") : st.message();
  };
  EXPECT_EQ(with("", ""), "ok");
  EXPECT_EQ(with("\"completed\":false", "\"completed\":0"),
            "state.json: completed: not true or false");
  EXPECT_EQ(with("\"completed\":false,", ""), "state.json: completed: missing");
  EXPECT_EQ(with("\"low_rounds\":0", "\"low_rounds\":\"0\""),
            "state.json: low_rounds: not an integer");
  EXPECT_EQ(with("\"hosts\":{}", "\"hosts\":{\"n1:9464\":3}"),
            "state.json: hosts.n1:9464: not an object");
  EXPECT_EQ(with("\"hosts\":{}", "\"hosts\":{\"n1:9464\":{\"first_poll\":1}}"),
            "state.json: hosts.n1:9464.last_ok: missing");
  EXPECT_EQ(with("\"hosts\":{}", "\"hosts\":[]"), "state.json: hosts: not an object");
}

TEST(Detectors, DeadlockSignatureAcrossTwoSamples) {
  Detectors d(Settings(), triage::B300Profile());
  std::vector<std::pair<double, double>> stuck = {{100, 191}, {100, 189}};
  std::vector<std::pair<double, double>> idle_one = {{100, 190}, {0, 187}};
  int rounds_to_alert = 0;
  for (int t = 0; t < 5; ++t) {
    auto f =
        d.Evaluate(100 + t, {Poll("a", 100 + t, stuck, {{0, 50, 1.0 + t}, {1, 50, 1.0 + t}}),
                             Poll("b", 100 + t, idle_one, {{2, 50, 1.0 + t}, {3, 50, 1.0 + t}})});
    if (const Finding* x = Get(f, Kind::kDeadlock)) {
      rounds_to_alert = t + 1;
      EXPECT_EQ(x->ranks, std::vector<int>{3});
      EXPECT_EQ(x->hosts, std::vector<std::string>{"b"});
      break;
    }
  }
  EXPECT_EQ(rounds_to_alert, 2);
}

TEST(Detectors, ThroughputFloorForNSamples) {
  WatchSettings s = Settings();
  s.throughput_floor_tok_s = 3000;
  s.throughput_samples = 3;
  Detectors d(s, triage::B300Profile());
  std::vector<int> fired;
  for (int t = 0; t < 5; ++t) {
    auto f = d.Evaluate(
        100 + t,
        {Poll("a", 100 + t, kHealthy,
              {{0, 10 + t, 0.2, true, "train", 500}, {1, 10 + t, 0.2, true, "train", 500}}),
         Poll("b", 100 + t, kHealthy,
              {{2, 10 + t, 0.2, true, "train", 500}, {3, 10 + t, 0.2, true, "train", 500}})});
    if (Has(f, Kind::kThroughput)) fired.push_back(t);
  }
  EXPECT_EQ(fired, (std::vector<int>{2, 3, 4}));
}

TEST(Detectors, UnreachableAgentIsBlindNeverHealthy) {
  Detectors d(Settings(), triage::B300Profile());
  AgentPoll down;
  down.target = "b";
  down.error = "connection refused";
  down.received = 100;
  auto f = d.Evaluate(100, {Poll("a", 100, kHealthy, {{0, 1, 0.1}}), down});
  EXPECT_FALSE(Has(f, Kind::kBlind));  // not yet stale
  down.received = 106;
  f = d.Evaluate(106, {Poll("a", 106, kHealthy, {{0, 2, 0.1}}), down});
  const Finding* b = Get(f, Kind::kBlind);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "blind:b");  // known by its position in --agents
  EXPECT_EQ(b->ranks, (std::vector<int>{2, 3}));
  // Stale GPU readings are blind too.
  AgentPoll stale = Poll("b", 107, kHealthy, {});
  stale.status.gpus[0].age_s = 30;
  f = d.Evaluate(107, {Poll("a", 107, kHealthy, {{0, 3, 0.1}}), stale});
  EXPECT_TRUE(Has(f, Kind::kBlind));
}

TEST(Detectors, NoTelemetryIsBlindOnceItLasts) {
  Detectors d(Settings(), triage::B300Profile());
  auto at = [&](double t) {
    AgentPoll none = Poll("b", t, {}, {{2, 1, 0.1}});
    none.status.telemetry = "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file";
    return d.Evaluate(t, {Poll("a", t, kHealthy, {{0, 1, 0.1}}), none});
  };
  EXPECT_FALSE(Has(at(100), Kind::kBlind));
  EXPECT_FALSE(Has(at(104), Kind::kBlind));
  auto f = at(105.5);
  const Finding* b = Get(f, Kind::kBlind);
  ASSERT_TRUE(b);
  EXPECT_NE(b->evidence.find("no GPU telemetry: NVML unavailable"), std::string::npos)
      << b->evidence;
  EXPECT_DOUBLE_EQ(b->since, 100);
}

}  // namespace
}  // namespace ek::watch

namespace ek::watch {
namespace {

TEST(Detectors, RanksThatNeverBeatAreBlindAfterTheFloor) {
  Detectors d(Settings(), triage::B300Profile());  // 2 hosts x 2 GPUs, floor 30 s
  auto at = [&](double t) {
    return d.Evaluate(t, {Poll("a", t, kHealthy, {{0, 5, 0.1}, {1, 5, 0.1}}),
                          Poll("b", t, kHealthy, {{2, 5, 0.1}})});
  };
  EXPECT_FALSE(Has(at(100), Kind::kBlind));
  EXPECT_FALSE(Has(at(129), Kind::kBlind));
  auto f = at(130);
  const Finding* b = Get(f, Kind::kBlind);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "missing:b");
  EXPECT_EQ(b->ranks, std::vector<int>{3});
  EXPECT_NE(b->evidence.find("3 of 4 ranks reporting"), std::string::npos) << b->evidence;
}

}  // namespace
}  // namespace ek::watch
