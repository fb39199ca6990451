// `evenkeel triage calibrate`: learns a profile from a window of the user's
// own healthy run (and, when given, an idle window), because absolute
// wattages differ by board, firmware and power cap.
#pragma once

#include <string>
#include <vector>

#include "telemetry/sample.h"
#include "triage/profile.h"

namespace ek::triage {

struct CalibrationOptions {
  std::string name = "calibrated";
  double busy_util_pct = 80;        // a healthy sample is at least this busy
  double min_busy_fraction = 0.95;  // of all samples, or the window is not steady training
  double idle_util_pct = 5;         // an idle sample is at most this busy
  size_t min_samples = 30;
};

// The healthy band is the 5th-95th percentile of busy samples' power. The
// floor is the idle window's median power when given, else the B300's
// floor/healthy ratio (190/990) times the healthy median; the mid bands
// follow by ProfileFromBands. Fails (FailedPrecondition) when the windows do
// not look like what they claim: too few samples, not uniformly busy, idle
// with work, or healthy too close to the floor to separate bands.
Result<Profile> Calibrate(const std::vector<telemetry::Sample>& healthy,
                          const std::vector<telemetry::Sample>& idle,
                          const CalibrationOptions& options);

}  // namespace ek::triage
