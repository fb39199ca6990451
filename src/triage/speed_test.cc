// The budget (docs/triage.md): classifying 1,024 GPUs at one sample per second costs
// under 1% of one core, i.e. under 10 ms of CPU per one-second window. The
// Google Benchmark in bench/triage/ gives the precise figure; this guards it.
#include <gtest/gtest.h>
#include <time.h>

#include <random>

#include "triage/classifier.h"

namespace ek::triage {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(Speed, ThousandGpusCostUnderOnePercentOfACore) {
  constexpr int kHosts = 128, kGpus = 8, kTicks = 300;
  std::vector<std::string> hosts;
  for (int h = 0; h < kHosts; ++h) hosts.push_back("gpu-node-" + std::to_string(h));
  auto topo = telemetry::Topology::FromHosts(hosts, kGpus);
  Classifier c(B300Profile(), {}, topo.world());
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 20);
  std::vector<telemetry::Sample> round(static_cast<size_t>(topo.world()));
  for (int r = 0; r < topo.world(); ++r) {
    round[static_cast<size_t>(r)].host = hosts[static_cast<size_t>(r / kGpus)];
    round[static_cast<size_t>(r)].gpu = r % kGpus;
  }
  int healthy = 0;
  double start = ThreadCpuSeconds();
  for (int t = 0; t < kTicks; ++t) {
    for (auto& s : round) {
      s.time = t;
      s.power_w = 990 + noise(rng);
      s.util_pct = 100;
      c.Observe(topo.Rank(s.host, s.gpu), s);
    }
    healthy += c.Evaluate(t).verdict == Verdict::kHealthy;
  }
  double per_window = (ThreadCpuSeconds() - start) / kTicks;
  EXPECT_EQ(healthy, kTicks);
  EXPECT_LT(per_window, 0.010) << "CPU per 1 s window for 1,024 GPUs: " << per_window * 1e3
                               << " ms";
  std::printf("1,024 GPUs: %.1f us CPU per window = %.4f%% of one core at 1 sample/s\n",
              per_window * 1e6, per_window * 100);
}

}  // namespace
}  // namespace ek::triage
