// The per-rank wrapper torchrun starts (`evenkeel launch-rank`): it pins the
// global rank to the run file's topology, runs the trainer as its child, tees
// the child's output to the attempt's rank log and to torchrun, forwards stop
// signals, and writes the rank's record (exit status, start and end) when the
// child ends, SIGKILL included. It dies with torchrun (parent-death signal, and
// a parent check in case torchrun's spawning thread was not its main one), and
// the trainer dies with it.
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
  std::string log;   // the rank's log file
};
std::string RankRecordToJson(const RankRecord& r);
Result<RankRecord> RankRecordFromJson(std::string_view json, const std::string& name);
// The same from an object inside another record (a node record's ranks[i]):
// errors name the file and the field's path ("node-1.json: ranks[0].pid: missing").
Result<RankRecord> RankRecordFromFields(const JsonFields& f);

// Runs the command as described; returns the exit code the wrapper should
// exit with (the child's, or 128 + the signal that killed it). Errors before
// the child starts (no LOCAL_RANK, cannot spawn) are a Status.
Result<int> RunRankExec(const RankExecOptions& options);

}  // namespace ek::launch
