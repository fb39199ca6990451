// The per-rank wrapper torchrun starts (`evenkeel launch-rank`): it pins the
// global rank to the run file's topology, runs the trainer as its child, tees
// the child's output to the attempt's rank log and to torchrun, forwards stop
// signals, and keeps the rank's record: written when the child starts
// (status "running"), rewritten when a stop signal arrives ("stopping", with
// the child's process state at that moment: "T" for a SIGSTOPped trainer) and
// when the child ends ("exited": exit status or signal, SIGKILL included),
// each time whole (temp file, fsync, rename, through Env). It dies with
// torchrun (parent-death signal, and a parent check in case torchrun's
// spawning thread was not its main one), and the trainer dies with it.
//
// Why the record is kept from the start: torchrun stops a worker with
// SIGTERM to its process group (the wrapper leads it; the trainer is in it),
// waits 30 s, then SIGKILLs the group (torch.distributed.elastic's
// SubprocessContext._close). A trainer that cannot act on SIGTERM (stopped,
// or in uninterruptible sleep) used to take the wrapper's only write with it.
// Now the wrapper SIGCONTs a stopped trainer (as a shell does for a stopped
// job, so the pending SIGTERM acts), SIGKILLs it itself after kStopGraceS,
// well inside torchrun's 30 s, and a record that still says "running" or
// "stopping" tells the launcher the wrapper was killed first (it infers the
// end, marked "inferred").
//
// Why pin ranks: torchrun's c10d rendezvous numbers nodes in the order of
// their descriptors (host name, pid), not by the node rank a launcher was
// given, but a node's pack (node-local block files) holds the ranks
// node_rank x nproc_per_node + local_rank. The wrapper sets RANK and
// GROUP_RANK to those; ranks stay a permutation of 0..world-1 on every node
// because every node's launcher has a distinct node rank.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace ek {
class JsonFields;
}

namespace ek::launch {

// Seconds the wrapper gives its trainer between a stop signal and SIGKILL:
// under torchrun's 30 s between SIGTERM and SIGKILL of the wrapper's group.
inline constexpr double kStopGraceS = 10;

struct RankExecOptions {
  std::string attempt_dir;  // rank-R.log and rank-R.json go here
  int node_rank = 0;
  int nproc_per_node = 1;
  std::vector<std::string> command;  // the trainer command
  int tee_fd = 1;                    // where the child's output also goes (torchrun's pipe)
  Env* env = Env::Default();         // the log and the record are written through it
};

// The rank's record, as written to ATTEMPT_DIR/rank-R.json.
struct RankRecord {
  int rank = -1;
  int local_rank = -1;
  int node_rank = -1;
  std::string host;
  long long pid = 0;
  double start = 0;  // Unix seconds
  double end = 0;
  int exit_code = -1;
  int signal = 0;
  std::string log;  // the rank's log file
  // "running" (written at start), "stopping" (a stop signal arrived, the trainer
  // had not ended), "exited" (end, exit_code and signal are the trainer's); the
  // launcher's reconstruction of a record whose wrapper was killed keeps the
  // last status the wrapper wrote and sets `inferred`; "missing": the launcher
  // made the record up for a rank that left a log or a heartbeat but no
  // record (`inferred` too). Absent in a record
  // read back: "exited" (the wrapper once wrote only that one).
  std::string status = "exited";
  int stop_signal = 0;        // the stop signal the wrapper got (torchrun's SIGTERM), 0: none
  double stop_time = 0;       // when (Unix seconds); 0: none
  std::string state_at_stop;  // the trainer's /proc state letter then ("T": stopped, "D", "S", "R",
                              // "Z"); "": unknown
  bool inferred = false;      // end, exit_code and signal are the launcher's inference, not the
                              // wrapper's observation
  std::string note;           // why, when inferred
};
std::string RankRecordToJson(const RankRecord& r);
Result<RankRecord> RankRecordFromJson(std::string_view json, const std::string& name);
// The same from an object inside another record (a node record's ranks[i]):
// errors name the file and the field's path ("node-1.json: ranks[0].pid: missing").
Result<RankRecord> RankRecordFromFields(const JsonFields& f);

// The state letter of process `pid` from /proc/PID/stat ("R", "S", "D", "T",
// "t", "Z", ...); "" when it cannot be read (the process is gone).
std::string ProcessState(long long pid);
// What a state letter means for a rank that stopped progressing: "process
// stopped (SIGSTOP)", "process in uninterruptible sleep (state D)", ...
std::string DescribeProcessState(const std::string& state);

// Runs the command as described; returns the exit code the wrapper should
// exit with (the child's, or 128 + the signal that killed it). Errors before
// the child starts (no LOCAL_RANK, cannot spawn) are a Status.
Result<int> RunRankExec(const RankExecOptions& options);

}  // namespace ek::launch
