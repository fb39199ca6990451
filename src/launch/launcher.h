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

#include "core/env.h"
#include "core/status.h"
#include "launch/cluster.h"

namespace ek::launch {

// Exit codes of `evenkeel launch`, the same on every node (docs/launch.md).
// They extend the CLI's (src/cli/commands.h): 1 is a verdict that said no,
// 2/65/69/70/74 mean what they mean for every command; 75 (EX_TEMPFAIL), 93
// and 130 are launch's own. A Status from Launch() becomes 65/69/70/74 in the
// CLI; the codes below are the ones the launcher decides itself.
inline constexpr int kExitCompleted = 0;  // the final checkpoint exists and verifies
inline constexpr int kExitGateRefused =
    1;                                // the gate FAILed on some node (or a node never reported)
inline constexpr int kExitUsage = 2;  // bad flags
inline constexpr int kExitBadInput =
    65;  // EX_DATAERR: run file, cluster layout, a record it cannot read
inline constexpr int kExitError =
    70;  // EX_SOFTWARE: the launcher itself failed (node 0 never decided)
inline constexpr int kExitIoError = 74;  // EX_IOERR: the launcher could not write its records
inline constexpr int kExitBudgetSpent =
    75;  // EX_TEMPFAIL: retry.max_restarts used up while still progressing
inline constexpr int kExitRunBusy =
    75;  // EX_TEMPFAIL: another launcher holds this run's lock (launch/session_lock.h)
inline constexpr int kExitDoNotRequeue =
    93;  // deterministic failure: a conclusive desync, or no progress
inline constexpr int kExitCancelled = 130;  // SIGINT/SIGTERM/SIGHUP

struct LaunchOptions {
  std::string run_path;
  int node_rank = -1;                   // --node-rank; -1: SLURM, or 0 for one node
  std::vector<std::string> extra_args;  // after --, appended to the trainer's command
  bool accept_gate_fail = false;        // --accept-gate-fail: start despite a FAIL (logged, warned)
  bool agent = false;                   // --agent: run `evenkeel agent` beside the ranks
  std::string agent_listen = "127.0.0.1:0";
  std::string evenkeel_exe;          // this binary, for launch-rank and agent
  NodelistExpander expand_nodelist;  // SLURM's host lists; empty: scontrol (launch/cluster.h)
  // The machine (core/env.h): every write of the launcher's records goes through it
  // (tests inject faults), and the cluster's and the gate's environment variables come
  // from it. A record that cannot be written stops the launch: a Status (kIoError, exit
  // 74) naming the file.
  Env* files = Env::Default();
  // --dry-run: resolve torchrun, python and the trainer, compute the schedule the
  // attempts would be judged by, and return it (summary_json) without a gate, a
  // record or a process.
  bool dry_run = false;
};

struct LaunchResult {
  int exit_code = kExitError;
  std::string summary_json;  // node 0's summary (every node gets a copy)
  std::string summary_name;  // where it came from, for errors: LAUNCH_DIR/RUN_ID/summary.json
  // Set when nothing started because another launcher holds this run (and node): the
  // error to print, naming the lock and its holder; exit_code is kExitRunBusy and there
  // is no summary (the session is the other launcher's).
  std::string refused;
};

// Progress lines for people (one per call, no newline).
using Say = std::function<void(const std::string&)>;

// Runs the whole launch, holding the session's lock (launch/session_lock.h)
// from before the gate until it returns. Errors before any attempt (run file, cluster, torchrun
// or the trainer not found) and a coordination record that cannot be written
// (gate parts and verdict, node records, attempt.json, decision.json,
// summary.json) are a Status (the CLI's exit 65/69/70/74); everything else is
// in the result's exit code.
Result<LaunchResult> Launch(const LaunchOptions& options, const Say& say);

}  // namespace ek::launch
