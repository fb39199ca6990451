// Cost of one one-second window for a 1,024-GPU job (128 hosts x 8):
//   BM_ClassifyWindow: Observe 1,024 samples (rank lookup included) + Evaluate.
//   BM_ParseAndClassifyWindow: the same from 1,024 nvidia-smi CSV lines.
//   BM_ParseDcgmScrape: one dcgm-exporter scrape of an 8-GPU node (x128 per window).
// A window's CPU time divided by 1 s is the fraction of a core; the budget is 1% (10 ms).
// Measured (Debian 12, 2 cores, RelWithDebInfo): see docs/triage.md.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "telemetry/nvidia_smi_csv.h"
#include "telemetry/prometheus.h"
#include "triage/classifier.h"

namespace {

constexpr int kHosts = 128;
constexpr int kGpus = 8;

std::vector<std::string> Hosts() {
  std::vector<std::string> hosts;
  for (int h = 0; h < kHosts; ++h) hosts.push_back("gpu-node-" + std::to_string(h));
  return hosts;
}

void BM_ClassifyWindow(benchmark::State& state) {
  auto topo = ek::telemetry::Topology::FromHosts(Hosts(), kGpus);
  ek::triage::Classifier c(ek::triage::B300Profile(), {}, topo.world());
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 20);
  std::vector<ek::telemetry::Sample> round(static_cast<size_t>(topo.world()));
  for (int r = 0; r < topo.world(); ++r) {
    round[static_cast<size_t>(r)].host = topo.hosts()[static_cast<size_t>(r / kGpus)];
    round[static_cast<size_t>(r)].gpu = r % kGpus;
    round[static_cast<size_t>(r)].power_w = 990 + noise(rng);
    round[static_cast<size_t>(r)].util_pct = 100;
  }
  double t = 0;
  for (auto _ : state) {
    t += 1;
    for (auto& s : round) {
      s.time = t;
      c.Observe(topo.Rank(s.host, s.gpu), s);
    }
    auto a = c.Evaluate(t);
    benchmark::DoNotOptimize(a);
  }
  state.SetItemsProcessed(state.iterations() * topo.world());
}
BENCHMARK(BM_ClassifyWindow);

void BM_ParseAndClassifyWindow(benchmark::State& state) {
  auto topo = ek::telemetry::Topology::FromHosts(Hosts(), kGpus);
  ek::triage::Classifier c(ek::triage::B300Profile(), {}, topo.world());
  std::vector<std::string> lines;
  for (int g = 0; g < kGpus; ++g) {
    lines.push_back("2026/11/29 10:00:00.000, " + std::to_string(g) +
                    ", 100 %, 991.23 W, 83968 MiB");
  }
  std::vector<ek::telemetry::NvidiaSmiCsvParser> parsers;
  for (const auto& h : topo.hosts()) parsers.emplace_back("bench", h);
  std::vector<ek::telemetry::Sample> samples;
  std::vector<ek::telemetry::Problem> problems;
  double t = 0;
  for (auto _ : state) {
    t += 1;
    samples.clear();
    for (auto& p : parsers) {
      for (const auto& l : lines) p.ParseLine(l, &samples, &problems);
    }
    for (auto& s : samples) {
      s.time = t;
      c.Observe(topo.Rank(s.host, s.gpu), s);
    }
    auto a = c.Evaluate(t);
    benchmark::DoNotOptimize(a);
  }
  state.SetItemsProcessed(state.iterations() * topo.world());
}
BENCHMARK(BM_ParseAndClassifyWindow);

void BM_ParseDcgmScrape(benchmark::State& state) {
  std::string text;
  for (const char* metric :
       {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"}) {
    text += std::string("# HELP ") + metric + " x\n# TYPE " + metric + " gauge\n";
    for (int g = 0; g < kGpus; ++g) {
      text += std::string(metric) + "{gpu=\"" + std::to_string(g) +
              "\",UUID=\"GPU-5e1c2b3a-0000-0000-0000-00000000000" + std::to_string(g) +
              "\",device=\"nvidia" + std::to_string(g) +
              "\",modelName=\"NVIDIA H200\",Hostname=\"gpu-node-0\"} 98.5\n";
    }
  }
  std::vector<ek::telemetry::Problem> problems;
  for (auto _ : state) {
    auto s = ek::telemetry::ParseDcgmExposition(text, "gpu-node-0", 0, "bench", &problems);
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseDcgmScrape);

}  // namespace

BENCHMARK_MAIN();
