#include "agent/checkpoint_scan.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "ckpt/checkpoint.h"

namespace ek::watch {

namespace {

namespace fs = std::filesystem;

double UnixSeconds(fs::file_time_type t) {
  auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

// The entry as the agent reports it; files and the newest write inside are
// counted here (a save in progress ages by its newest write, not by its
// directory's mtime, which a file growing in place does not move).
CheckpointInfo InfoOf(const ckpt::CheckpointEntry& e) {
  CheckpointInfo info;
  info.name = e.name;
  info.step = e.step;
  info.complete = e.ok;
  info.bytes = e.bytes;
  info.mtime = e.mtime;
  if (!e.ok) info.why = e.verdict;
  // The checkpoint's files and those of its training state (format 2: train_state/,
  // which DCP's writers fill while the weights are done).
  for (const std::string& dir : {e.path, e.path + "/" + std::string(ckpt::kTrainStateDir)}) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fec;
      if (!it->is_regular_file(fec)) continue;
      info.files++;
      auto t = it->last_write_time(fec);
      if (!fec) info.mtime = std::max(info.mtime, UnixSeconds(t));
    }
  }
  return info;
}

}  // namespace

CheckpointScan ScanCheckpoints(const std::string& dir) {
  CheckpointScan scan;
  if (dir.empty()) return scan;
  auto listed = ckpt::ListCheckpoints(dir, ckpt::VerifyLevel::kStructure);
  if (!listed.ok()) return scan;
  for (const ckpt::CheckpointEntry& e : *listed) {
    if (e.ok) {
      scan.complete_count++;
      if (!scan.newest_complete || e.step > scan.newest_complete->step)
        scan.newest_complete = InfoOf(e);
    } else if (e.temp && e.verdict.starts_with("in progress")) {
      CheckpointInfo info = InfoOf(e);
      if (!scan.in_progress || info.mtime > scan.in_progress->mtime)
        scan.in_progress = std::move(info);
    }
  }
  return scan;
}

}  // namespace ek::watch
