// The goodput account of a launch (docs/launch.md "Goodput"): its wall time split
// into training (steps that were kept), redone (steps after the checkpoint the next
// attempt resumed from), restart overhead (failure -> detection -> ranks stopped ->
// new ranks started -> their first step), time blocked by saves and other, the parts
// summing to the wall time exactly; goodput = training / wall.
//
// ComputeGoodput is a pure function over plain attempt timelines, which the
// launcher builds from what it records (spawn and end times, the rank records'
// ends and stop signals, the judged hang) and from node 0's heartbeats, polled
// while an attempt runs (BeatTracker). The format it produces is heartbeat's
// (heartbeat/goodput_account.h), read back by the agent and the report.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "heartbeat/goodput_account.h"
#include "heartbeat/heartbeat.h"
#include "launch/records.h"

namespace ek::launch {

using heartbeat::GoodputAccount;

// A moment of a rank's training as its heartbeats showed it: `step` was the last
// finished step at `time`, with `save_blocked_s` seconds blocked by `saves` saves.
struct StepMark {
  int64_t step = -1;
  double time = 0;
  double save_blocked_s = 0;
  int64_t saves = 0;
};

inline constexpr int64_t kAllStepsKept = std::numeric_limits<int64_t>::max();

// One attempt, as the accounting needs it. Times are Unix seconds; 0 is unknown.
struct AttemptTimeline {
  int attempt = 0;
  double spawn = 0;             // torchrun was started (the earliest node)
  double started = 0;           // every rank's process had started (0: spawn)
  double train_start = 0;       // the first training step began (0: the first mark's time)
  std::vector<StepMark> marks;  // in time order
  int64_t resumed_from = -1;    // the step it resumed from; -1: the start
  // The newest step of it that counts: the step the next attempt resumes from (a
  // failed or cancelled attempt), kAllStepsKept (a completed or still running one).
  int64_t kept_through = kAllStepsKept;
  bool failed = false;
  double failed_at = 0;  // a rank failed (crashed, or stopped progressing)
  double detected_at =
      0;           // the failure was acted on (a timeout fired, the ranks were told to stop)
  double end = 0;  // every rank had stopped (the latest node's end)
};

struct GoodputResult {
  GoodputAccount launch;                 // from launch_start to launch_end
  std::vector<GoodputAccount> attempts;  // each from the previous one's end (or launch_start)
};

// Walks the attempts in order; time outside them (the gate, the summary) is other.
// A time out of order (an unknown one, clocks of different hosts) is clamped so that
// the parts still sum to launch_end - launch_start.
GoodputResult ComputeGoodput(double launch_start, double launch_end,
                             const std::vector<AttemptTimeline>& attempts);

// When a failed attempt failed and when that was acted on, from its nodes' records:
// the first rank that failed on its own (not stopped by torchrun), or for a hang the
// hung ranks' last beat; detection is the first stop signal a rank got (for a hang,
// the first rank that failed on its own: its collective timeout). Both default to
// the attempt's end.
void FailureTimes(const std::vector<NodeRecord>& nodes, const std::vector<int>& hang_ranks,
                  double end, double* failed_at, double* detected_at);

// Node 0's heartbeats during one attempt, polled: the ranks' start-up times and the
// lowest rank's steps and saves. Beats older than `since` (an earlier attempt's) are
// ignored.
class BeatTracker {
 public:
  explicit BeatTracker(double since = 0) : since_(since) {}
  void Observe(const std::vector<heartbeat::Heartbeat>& beats);
  // The ranks' processes all started (the latest `started`), their first step began
  // (the latest `train_start`); 0 when no rank said.
  double started() const;
  double train_start() const;
  const std::vector<StepMark>& marks() const { return marks_; }

 private:
  double since_;
  std::map<int, heartbeat::Heartbeat> latest_;
  int followed_ = -1;
  std::vector<StepMark> marks_;
};

}  // namespace ek::launch
