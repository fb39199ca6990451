#include "triage/session.h"

#include <gtest/gtest.h>

#include "core/fake_clock.h"
#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/replay.h"

namespace ek::triage {
namespace {

std::string Rows(double t, int gpus, double power, double util) {
  std::string out;
  for (int g = 0; g < gpus; ++g) {
    out += telemetry::FormatTimestamp(t) + ", " + std::to_string(g) + ", " + std::to_string(util) +
           " %, " + std::to_string(power) + " W, 80000 MiB\n";
  }
  return out;
}

std::vector<Window> Drain(Session* s) {
  std::vector<Window> out;
  for (;;) {
    auto w = s->Next();
    EXPECT_TRUE(w.ok()) << w.status().message();
    if (!w.ok() || !w->has_value()) return out;
    out.push_back(std::move(**w));
  }
}

TEST(Session, ReplayMapsHostsToRanksAndTicksOnTheRecording) {
  std::string a, b;
  for (int t = 0; t < 10; ++t) a += Rows(1000 + t, 2, 990, 100);
  for (int t = 0; t < 4; ++t) b += Rows(1000.3 + t, 2, 990, 100);  // node-b goes silent
  auto source = telemetry::ReplaySource::FromTexts({{"node-a.csv", a}, {"node-b.csv", b}}, {});
  Session s(source.get(), Clock::Default(), B300Profile(), {});
  std::vector<Window> w = Drain(&s);
  // Windows close one interval after the first sample, through the last one.
  ASSERT_EQ(w.size(), 9u);
  EXPECT_EQ(s.topology().world(), 4);
  EXPECT_EQ(s.topology().Rank("node-b", 1), 3);
  EXPECT_DOUBLE_EQ(w[0].assessment.time, 1001);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w[i].assessment.verdict, Verdict::kHealthy) << i;
  // node-b's last sample is at 1003.3: stale after 1006.3.
  EXPECT_EQ(w[6].assessment.verdict, Verdict::kUnknown);
  EXPECT_EQ(w[6].assessment.ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(w[8].assessment.verdict, Verdict::kUnknown);
  EXPECT_DOUBLE_EQ(w[8].assessment.time, 1009);
}

TEST(Session, SamplesOutsideTheLayoutAreReportedOnce) {
  std::string a;
  for (int t = 0; t < 3; ++t) a += Rows(t, 3, 990, 100);
  auto source = telemetry::ReplaySource::FromTexts({{"node-a.csv", a}}, {});
  SessionOptions o;
  o.gpus_per_host = 2;
  Session s(source.get(), Clock::Default(), B300Profile(), o);
  std::vector<Window> w = Drain(&s);
  size_t problems = 0;
  for (const auto& x : w) problems += x.problems.size();
  EXPECT_EQ(problems, 1u);
  EXPECT_EQ(w.back().assessment.verdict, Verdict::kHealthy);
}

TEST(Session, ARecordingWithoutAUsableSampleIsBadInput) {
  auto source = telemetry::ReplaySource::FromTexts({{"node-a.csv", "garbage\n"}}, {});
  Session s(source.get(), Clock::Default(), B300Profile(), {});
  auto w = s.Next();
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("no usable sample (1 bad row(s); the first: node-a.csv:1: "),
            std::string::npos)
      << w.status().message();
  auto after = s.Next();  // and then the source has ended
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
  auto blank = telemetry::ReplaySource::FromTexts({{"node-b.csv", ""}}, {});
  Session b(blank.get(), Clock::Default(), B300Profile(), {});
  auto none = b.Next();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no usable sample (no data rows)"), std::string::npos);
}

// A live source that hands out scripted rounds, stamped by the clock.
class ScriptedSource : public telemetry::Source {
 public:
  ScriptedSource(Clock* clock, std::vector<std::vector<double>> rounds)
      : clock_(clock), rounds_(std::move(rounds)) {}
  Status Poll(double, telemetry::Batch* out) override {
    if (next_ < rounds_.size()) {
      const auto& powers = rounds_[next_++];
      for (size_t g = 0; g < powers.size(); ++g) {
        telemetry::Sample s;
        s.time = clock_->Now();
        s.host = "local";
        s.gpu = static_cast<int>(g);
        s.power_w = powers[g];
        s.util_pct = 100;
        if (powers[g] < 0) s.power_w.reset();
        out->samples.push_back(s);
      }
    }
    out->end = next_ >= rounds_.size();
    return Status::Ok();
  }
  std::vector<std::string> hosts() const override { return {"local"}; }
  bool live() const override { return true; }

 private:
  Clock* clock_;
  std::vector<std::vector<double>> rounds_;
  size_t next_ = 0;
};

TEST(Session, LiveLayoutGrowsWhenTheFirstBatchHeldPartOfARound) {
  FakeClock clock(500);
  ScriptedSource source(&clock, {{990}, {990, 990, 990}, {990, 990, 990}});
  Session s(&source, &clock, B300Profile(), {});
  std::vector<Window> w = Drain(&s);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(s.topology().world(), 3);
  for (const auto& x : w) EXPECT_TRUE(x.problems.empty());
  EXPECT_EQ(w[1].assessment.verdict, Verdict::kHealthy);
  EXPECT_EQ(w[1].assessment.ranks.size(), 3u);
}

TEST(Session, LiveTicksOnTheClock) {
  FakeClock clock(500);
  ScriptedSource source(&clock,
                        {{}, {990, 990}, {990, 990}, {-1, 990}, {-1, 990}, {-1, 990}, {-1, 990}});
  Session s(&source, &clock, B300Profile(), {});
  std::vector<Window> w = Drain(&s);
  ASSERT_EQ(w.size(), 7u);
  EXPECT_EQ(w[0].assessment.verdict, Verdict::kUnknown);  // no samples yet
  EXPECT_DOUBLE_EQ(w[0].assessment.time, 501);
  EXPECT_EQ(w[1].assessment.verdict, Verdict::kHealthy);
  EXPECT_DOUBLE_EQ(w[1].assessment.time, 502);
  EXPECT_EQ(w[2].assessment.verdict, Verdict::kHealthy);
  // GPU 0's power goes missing after the sample stamped 502: stale past 505.
  EXPECT_EQ(w[4].assessment.verdict, Verdict::kHealthy);
  EXPECT_EQ(w[5].assessment.verdict, Verdict::kUnknown);
  EXPECT_EQ(w[5].assessment.ranks, std::vector<int>{0});
}

}  // namespace
}  // namespace ek::triage
