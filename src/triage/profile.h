// Power bands per GPU model. Absolute wattages do not transfer between boards
// (docs/triage.md); the ordering floor < starvation < communication <
// healthy and the per-rank shapes do. See docs/triage.md for how each profile
// is built.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ek::triage {

struct Profile {
  std::string name;
  std::string origin;        // where the numbers come from, for people
  double power_limit_w = 0;  // board power limit; 0 = unknown
  double healthy_lo_w = 0;   // steady training, all ranks
  double healthy_hi_w = 0;
  double communication_w = 0;  // communication-bound: uniformly busy, mid power
  double starvation_w = 0;     // input-starved: utilization scatter, mid power
  double floor_w = 0;          // waiting: checkpoint barrier, deadlock
  double idle_w = 0;           // no work at all; 0 = unknown

  // Band edges: half way between neighbouring centres, so noise of up to half
  // a gap never moves a reading across a band.
  double floor_max_w() const { return (floor_w + starvation_w) / 2; }
  double healthy_min_w() const { return (communication_w + healthy_lo_w) / 2; }
  // Power no board of this profile draws: a median above it means the wrong
  // profile (B300 watts read with an A100 profile), never "healthy".
  double ceiling_w() const {
    return healthy_hi_w * 1.2 > power_limit_w * 1.1 ? healthy_hi_w * 1.2 : power_limit_w * 1.1;
  }
  // The bands must be ordered and positive.
  Status Validate() const;
};

// The field report's B300 numbers (healthy ~940-1040 W, communication ~640 W,
// starvation ~575 W, floor ~190 W; board limit 1100 W).
Profile B300Profile();

// Scales the B300 profile by `power_limit_w / 1100`: the first guess for a
// board nobody has measured yet. H100 and H200 (SXM, 700 W) and A100 (SXM4,
// 400 W) ship built this way.
Profile ProfileFromPowerLimit(std::string name, double power_limit_w);

// Builds the mid bands from measured healthy and floor power by the B300's
// proportions: communication and starvation sit 56% and 48% of the way from
// the floor to the healthy centre ((640-190)/(990-190), (575-190)/(990-190)).
Profile ProfileFromBands(std::string name, double healthy_lo_w, double healthy_hi_w,
                         double floor_w);

// "B300", "H100", "H200", "A100" (any case), or "limit:WATTS" for a board
// with that power limit.
Result<Profile> BuiltinProfile(std::string_view name);
std::vector<std::string> BuiltinProfileNames();

// A built-in name, or the path of a profile file (JSON, see ProfileToJson).
Result<Profile> LoadProfile(const std::string& name_or_path);
Result<Profile> ParseProfileJson(std::string_view json, std::string_view where);
std::string ProfileToJson(const Profile& p);

}  // namespace ek::triage
