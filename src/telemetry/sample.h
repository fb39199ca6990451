// A telemetry sample, bad-input reports, the rank layout and the clock: the
// vocabulary every source and the triage classifier share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "topology/topology.h"

namespace ek::telemetry {

// One reading of one GPU. Every measured field is optional: a value the source
// did not report ("[N/A]", "[Not Supported]", blank) or that was rejected as
// impossible is absent, never zero, so a dead sensor can never look like an
// idle or a healthy GPU.
struct Sample {
  // User-provided, so that a value-initialized Sample (vector::emplace_back()) is not first
  // zero-filled whole and then initialized member by member: the members' initializers
  // below are the state (the zero fill was a sixth of the CSV parser's time per row).
  Sample() {}       // NOLINT(modernize-use-equals-default): `= default` brings the zero fill back
  double time = 0;  // seconds since the Unix epoch on the evaluating clock (see Source)
  std::string host;
  int gpu = -1;                    // index on its host
  std::optional<double> util_pct;  // 0..100, "a kernel was scheduled"
  std::optional<double> power_w;   // board power; an average when the source has energy
  std::optional<double> mem_used_mib;
  std::optional<double> energy_j;            // cumulative energy counter (NVML, DCGM)
  std::optional<double> sm_active;           // 0..1, DCGM_FI_PROF_SM_ACTIVE
  std::optional<double> sm_clock_mhz;        // NVML
  std::optional<uint64_t> throttle_reasons;  // NVML bit mask
  std::optional<int> processes;              // NVML compute processes
};

// A bad-input report. Sources return these beside their samples and drop the
// offending value or row (it becomes missing); they never guess a value.
struct Problem {
  std::string where;  // "node-a.csv:17", "http://node-a:9400/metrics"
  std::string what;
  std::string ToString() const { return where + ": " + what; }
};

struct Batch {
  std::vector<Sample> samples;
  std::vector<Problem> problems;
  bool end = false;  // the source will produce nothing more
};

// Values outside these limits are bad input, not measurements. The power limit
// is above every shipping board (B300 1100 W, GB300 1400 W) with headroom.
inline constexpr double kMaxPowerW = 3000;
inline constexpr double kMaxMemMiB = 16.0 * 1024 * 1024;  // 16 TiB
inline constexpr int kMaxGpusPerHost = 1024;

// Removes impossible values from *s (negative or absurd power, utilization
// outside 0..100, negative memory, ...), appending one Problem per value.
void DropAbsurdValues(Sample* s, std::string_view where, std::vector<Problem>* problems);

// The rank layout (global rank = host order x GPUs per host + GPU index) is
// the run component's; telemetry names it here for its sources and readers.
using Topology = run::Topology;

// Sources and sessions stamp and wait on the core clock seam (core/clock.h):
// Clock::Default() in production, a FakeClock (core/fake_clock.h) in tests.
using ek::Clock;

// A sample source. Live sources (nvidia-smi, NVML, Prometheus) stamp samples
// with the evaluating clock at receipt, so a host whose own clock jumps cannot
// move its samples in time; replay sources stamp them with the recorded time,
// aligned per host (see replay.h). Not thread-safe: one caller.
class Source {
 public:
  virtual ~Source() = default;
  // Appends what arrives before `deadline` (Clock time) to *out. A replay
  // source ignores the deadline and returns everything at once with end set.
  // A non-OK Status means the source itself failed (cannot start, lost);
  // bad input goes to out->problems.
  virtual Status Poll(double deadline, Batch* out) = 0;
  // Host order for global ranks; may grow until the first samples arrive.
  virtual std::vector<std::string> hosts() const = 0;
  virtual bool live() const = 0;
};

}  // namespace ek::telemetry
