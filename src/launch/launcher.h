// evenkeel launch: the gate hard-wired in front of every run, torchrun
// underneath, auto-retry with judgement, resume from the last verified
// checkpoint (docs/launch.md).
//
// One launcher per node. They share the launch directory (by default
// CHECKPOINT_DIR/launch, on the storage every node already shares for
// checkpoints) and coordinate through files in LAUNCH_DIR/RUN_ID/:
//   gate/node-N.json     each node's gate part (with a nonce)
//   gate/verdict.json    node 0's merged verdict, naming the parts' nonces
//   attempt-NNN/         per attempt: rank logs and records, flight-recorder
//                        dumps (fr/), node-N.json per node, decision.json and
//                        attempt.json from node 0
//   summary.json         node 0's account of the whole launch
// Node 0 judges every attempt; the other nodes follow its decision.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "launch/cluster.h"

namespace ek::launch {

// Exit codes of `evenkeel launch`, the same on every node.
inline constexpr int kExitCompleted = 0;     // the final checkpoint exists and verifies
inline constexpr int kExitError = 1;         // the launcher itself failed (I/O, a node never answered)
inline constexpr int kExitUsage = 2;         // bad flags or run file
inline constexpr int kExitGateRefused = 3;   // the gate FAILed on some node (or a node never reported)
inline constexpr int kExitBudgetSpent = 4;   // retry.max_restarts used up while attempts still progressed
inline constexpr int kExitDoNotRequeue = 93; // deterministic failure: a conclusive desync, or no progress
inline constexpr int kExitCancelled = 130;   // SIGINT/SIGTERM/SIGHUP

struct LaunchOptions {
  std::string run_path;
  int node_rank = -1;                   // --node-rank; -1: SLURM, or 0 for one node
  std::vector<std::string> extra_args;  // after --, appended to the trainer's command
  bool accept_gate_fail = false;        // --accept-gate-fail: start despite a FAIL (logged, warned)
  bool agent = false;                   // --agent: run `evenkeel agent` beside the ranks
  std::string agent_listen = "127.0.0.1:0";
  std::string evenkeel_exe;             // this binary, for launch-rank and agent
  ClusterEnv env;
};

struct LaunchResult {
  int exit_code = kExitError;
  std::string summary_json;  // node 0's summary (every node gets a copy)
};

// Progress lines for people (one per call, no newline).
using Say = std::function<void(const std::string&)>;

// Runs the whole launch. Errors before any attempt (run file, cluster) are a
// Status (exit kExitUsage); everything after is in the result's exit code.
Result<LaunchResult> Launch(const LaunchOptions& options, const Say& say);

}  // namespace ek::launch
