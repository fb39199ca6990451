// What the agent reports of a run's checkpoint dir: the newest complete
// checkpoint and a save under way. Judged by ek_ckpt's rule, the one the
// launcher, the trainer's resume and `evenkeel ckpt list` use
// (ckpt::ListCheckpoints at VerifyLevel::kStructure, docs/checkpoint_format.md):
//   - a step-NNNNNNNN directory is complete when it verifies (evenkeel-checkpoint.json
//     required); one that does not is damaged, not in progress, since a
//     checkpoint gets its final name only once finalized;
//   - a hidden .step-NNNNNNNN.tmp-PID directory whose writer is alive on this
//     host is a save in progress; one whose writer is gone is abandoned and
//     not reported;
//   - anything else in the dir (other trainers' files) is not a checkpoint.
#pragma once

#include <string>

#include "agent/agent_status.h"

namespace ek::watch {

// Scans `dir`. A missing or unreadable dir, or an empty `dir`, is an empty scan.
CheckpointScan ScanCheckpoints(const std::string& dir);

}  // namespace ek::watch
