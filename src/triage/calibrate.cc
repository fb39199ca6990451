#include "triage/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ek::triage {

namespace {

double Percentile(std::vector<double>* v, double q) {
  std::sort(v->begin(), v->end());
  double pos = q * static_cast<double>(v->size() - 1);
  size_t i = static_cast<size_t>(pos);
  double frac = pos - static_cast<double>(i);
  if (i + 1 >= v->size()) return v->back();
  return (*v)[i] * (1 - frac) + (*v)[i + 1] * frac;
}

}  // namespace

Result<Profile> Calibrate(const std::vector<telemetry::Sample>& healthy,
                          const std::vector<telemetry::Sample>& idle,
                          const CalibrationOptions& options) {
  std::vector<double> busy_power;
  size_t usable = 0;
  const telemetry::Sample* laziest = nullptr;
  for (const auto& s : healthy) {
    if (!s.power_w || !s.util_pct) continue;
    ++usable;
    if (*s.util_pct >= options.busy_util_pct) {
      busy_power.push_back(*s.power_w);
    } else if (!laziest || *s.util_pct < *laziest->util_pct) {
      laziest = &s;
    }
  }
  if (usable < options.min_samples) {
    return FailedPreconditionError(fmt::format(
        "calibrate: need at least {} samples with power and utilization in the healthy window, "
        "got {}",
        options.min_samples, usable));
  }
  double busy_fraction = static_cast<double>(busy_power.size()) / static_cast<double>(usable);
  if (busy_fraction < options.min_busy_fraction) {
    return FailedPreconditionError(fmt::format(
        "calibrate: the healthy window is not steady training: {:.0f}% of samples at >= {:g}% "
        "utilization, need {:.0f}% (lowest: {} GPU {} at {:.0f}%)",
        busy_fraction * 100, options.busy_util_pct, options.min_busy_fraction * 100, laziest->host,
        laziest->gpu, *laziest->util_pct));
  }
  double lo = Percentile(&busy_power, 0.05);
  double hi = Percentile(&busy_power, 0.95);
  double median = Percentile(&busy_power, 0.5);
  double floor = median * 190.0 / 990.0;
  std::string floor_origin = "B300 floor/healthy ratio";
  double idle_w = 0;
  if (!idle.empty()) {
    std::vector<double> idle_power;
    std::vector<double> idle_util;
    for (const auto& s : idle) {
      if (s.power_w) idle_power.push_back(*s.power_w);
      if (s.util_pct) idle_util.push_back(*s.util_pct);
    }
    if (idle_power.size() < options.min_samples) {
      return FailedPreconditionError(
          fmt::format("calibrate: need at least {} idle samples with power, got {}",
                      options.min_samples, idle_power.size()));
    }
    if (!idle_util.empty() && Percentile(&idle_util, 0.5) > options.idle_util_pct) {
      return FailedPreconditionError(
          fmt::format("calibrate: the idle window has work running (median utilization {:.0f}%)",
                      Percentile(&idle_util, 0.5)));
    }
    idle_w = Percentile(&idle_power, 0.5);
    floor = idle_w;
    floor_origin = "idle median";
  }
  if (lo < floor * 2) {
    return FailedPreconditionError(fmt::format(
        "calibrate: healthy power ({:.0f} W at the 5th percentile) is too close to the floor "
        "({:.0f} W) to tell the bands apart",
        lo, floor));
  }
  Profile p = ProfileFromBands(options.name, lo, hi, floor);
  p.idle_w = idle_w;
  p.origin = fmt::format("calibrated: healthy p5-p95 of {} busy samples; floor from {}",
                         busy_power.size(), floor_origin);
  EK_RETURN_IF_ERROR(p.Validate());
  return p;
}

}  // namespace ek::triage
