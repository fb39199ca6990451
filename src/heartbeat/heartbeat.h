// The rank heartbeat (python/evenkeel/heartbeat.py): one small JSON file per
// rank, DIR/rank-<RANK>.json, rewritten whole with rename. This is its reader,
// and the process check the agent adds to it. Format: docs/watch.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace ek::heartbeat {

struct Heartbeat {
  int rank = -1;        // global rank
  int local_rank = -1;  // index on its node
  int64_t pid = 0;
  std::string host;             // the host the trainer saw (informational)
  int64_t step = -1;            // last finished step; -1 before the first
  int64_t tokens = 0;           // cumulative tokens this rank processed
  double time = 0;              // wall time of the newest beat (Unix seconds, trainer's clock)
  double step_time = 0;         // wall time the step last changed
  double step_s = 0;            // moving average of seconds per step (0: unknown yet)
  double tok_s = 0;             // moving average of tokens/s
  std::string phase = "train";  // see PhaseKind; the trainer's own names are kept as they are
  int64_t phase_step =
      -1;  // the step the phase belongs to (forward of step 36: 36; save after 35: 35)
  double phase_time = 0;    // wall time the phase began (trainer's clock); 0: unknown
  int64_t total_steps = 0;  // the run's final step, when the trainer knows it
  // For the launcher's goodput account (docs/launch.md "Goodput"); 0 when absent (older trainers).
  double started = 0;         // wall time the rank's process started
  double train_start = 0;     // wall time its first training step began (after load and resume)
  double save_blocked_s = 0;  // seconds its training was blocked by saves, cumulative
  int64_t saves = 0;          // saves it made
};

// What a phase means to the watcher. The reference trainer reports forward,
// backward, optimizer (training), save_barrier and save (a checkpoint: the
// barrier before it is where the field report's run deadlocked), load and done;
// older trainers "train" and "checkpoint".
enum class PhaseKind { kTraining, kBarrier, kCheckpoint, kDone, kOther };
PhaseKind KindOfPhase(std::string_view phase);
// The step a rank is at in its phase: phase_step when the trainer says,
// else the step after the last finished one while training, the last one otherwise.
int64_t PositionOf(const Heartbeat& hb);

// Parses one heartbeat file's text; `where` names it in errors.
Result<Heartbeat> ParseHeartbeat(std::string_view text, std::string_view where);
std::string HeartbeatToJson(const Heartbeat& hb);

// Reads every rank-*.json in `dir` (temporary files are skipped). A file that
// cannot be parsed is reported in *problems ("DIR/rank-3.json: ...") and left
// out. A missing directory is an empty list, not an error: no rank has started.
// Lists and reads through `env`.
std::vector<Heartbeat> ReadHeartbeatDir(const std::string& dir, std::vector<std::string>* problems,
                                        Env* env = Env::Default());

}  // namespace ek::heartbeat
