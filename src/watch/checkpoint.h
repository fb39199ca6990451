// What the agent can see of a run's checkpoints on disk: the newest complete
// one, and whether a save is under way. evenkeel's own checkpoints
// (step-NNNNNNNN directories and their hidden .step-*.tmp-PID temp directories)
// are judged by ek_ckpt's rule (ckpt::ListCheckpoints at VerifyLevel::kStructure:
// the manifest required, as for the launcher, the trainer's resume and `ckpt
// list`); a temp directory whose writer is gone is not a save in progress.
// Other trainers' entries (docs/watch.md):
//   - a single file per checkpoint (the reference trainer's step-00001000.pt,
//     written to a temporary name and renamed): complete when it exists and is
//     not empty; a "*.tmp*" file beside it is a save in progress;
//   - a directory with evenkeel-checkpoint.json or a Hugging Face safetensors
//     index (*.safetensors.index.json): complete when ek_ckpt verifies its
//     structure (VerifyLevel::kStructure: index against shard headers, file
//     sizes, total_size; the manifest and its file list when there is one);
//   - a directory with another index (pytorch_model.bin.index.json): complete
//     when every shard in weight_map exists;
//   - a torch.distributed.checkpoint directory: complete once ".metadata" (the
//     file DCP writes last) exists beside its *.distcp shards.
// A directory that matches none of these yet is a save in progress.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ek::watch {

struct CheckpointInfo {
  std::string name;      // file or directory name inside the checkpoint dir
  int64_t step = -1;     // the last run of digits in the name; -1 if none
  bool complete = false;
  int files = 0;
  uint64_t bytes = 0;
  double mtime = 0;      // newest modification time inside (Unix seconds)
  std::string why;       // why it is not complete ("shard model-00002-of-00004 missing")
};

struct CheckpointScan {
  std::optional<CheckpointInfo> newest_complete;  // highest step among complete ones
  std::optional<CheckpointInfo> in_progress;      // a newer one not yet complete
  int complete_count = 0;
};

// Scans `dir` (not recursively beyond one level). A missing dir is an empty scan.
CheckpointScan ScanCheckpoints(const std::string& dir);

// Judges one entry of a checkpoint dir (a file or a directory).
CheckpointInfo InspectCheckpoint(const std::string& dir, const std::string& name);

}  // namespace ek::watch
