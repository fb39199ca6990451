#include "telemetry/sample.h"

#include <fmt/format.h>

#include <cmath>

namespace ek::telemetry {

namespace {

void Drop(std::optional<double>* v, double lo, double hi, std::string_view name,
          std::string_view where, std::vector<Problem>* problems) {
  if (!v->has_value()) return;
  double x = **v;
  if (std::isfinite(x) && x >= lo && x <= hi) return;
  problems->push_back(
      {std::string(where),
       fmt::format("{} {} is outside {}..{}; treated as missing", name, x, lo, hi)});
  v->reset();
}

}  // namespace

void DropAbsurdValues(Sample* s, std::string_view where, std::vector<Problem>* problems) {
  Drop(&s->util_pct, 0, 100, "utilization %", where, problems);
  Drop(&s->power_w, 0, kMaxPowerW, "power W", where, problems);
  Drop(&s->mem_used_mib, 0, kMaxMemMiB, "memory MiB", where, problems);
  Drop(&s->energy_j, 0, 1e15, "energy J", where, problems);
  Drop(&s->sm_active, 0, 1, "SM activity", where, problems);
  Drop(&s->sm_clock_mhz, 0, 10000, "SM clock MHz", where, problems);
}

}  // namespace ek::telemetry
