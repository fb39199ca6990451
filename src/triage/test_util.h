// Helpers for triage tests: feed one synthetic round of per-rank readings.
#pragma once

#include <optional>
#include <vector>

#include "telemetry/sample.h"
#include "triage/classifier.h"

namespace ek::triage::testing {

inline telemetry::Sample At(double t, std::optional<double> power, std::optional<double> util) {
  telemetry::Sample s;
  s.time = t;
  s.power_w = power;
  s.util_pct = util;
  return s;
}

// Observes one sample per rank at time t, then evaluates at t.
inline Assessment Round(Classifier* c, double t, const std::vector<double>& power,
                        const std::vector<double>& util) {
  for (size_t r = 0; r < power.size(); ++r) {
    c->Observe(static_cast<int>(r), At(t, power[r], util[r]));
  }
  return c->Evaluate(t);
}

inline std::vector<double> Same(int n, double v) { return std::vector<double>(n, v); }

inline std::vector<double> With(std::vector<double> v, int rank, double x) {
  v[static_cast<size_t>(rank)] = x;
  return v;
}

}  // namespace ek::triage::testing
