// The seven checks RunGate runs, one function each, and the verdict tail they share.
// Internal to the gate (gate.cc and checks.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "gate/gate.h"
#include "packfile/manifest.h"
#include "run/plan.h"
#include "run/run_file.h"

namespace ek::gate {

// What one check found, before its verdict: every failure and warning (each a
// one-line problem), what it says when it finds none, and its numbers.
struct Findings {
  std::string name;
  std::vector<std::string> fails;
  std::vector<std::string> warns;
  std::string pass_reason;
  std::map<std::string, double> numbers;
};

// The verdict tail: FAIL when any failure, else WARN when any warning, else PASS
// with `pass_reason`. Every problem is kept, failures first; the reason is the
// first problem and how many more.
Check Conclude(Findings f);

// What the checks read, resolved once by RunGate. Views: RunGate owns them all.
struct GateInputs {
  const RunFile& run;
  int node_rank;  // -1: every rank's data
  const GateEnv& env;
  const std::string& pack_dir;
  const Result<pack::Manifest>& manifest;
  const pack::Manifest* manifest_or_null;  // &*manifest when it was read
  const Result<run::ModelShape>& model;
  const Plan& plan;  // empty when the model is not known
};

// In the order RunGate runs them.
Findings DataCheck(const GateInputs& in, std::vector<int>* ranks_checked);
// Balance over whatever per-rank block counts are known (a merge recomputes it
// over every part's ranks). What evenfix drops or repeats is the plan's.
Findings BalanceCheck(const RunFile& run, const std::map<int, uint64_t>& blocks, bool complete);
Findings ScheduleCheck(const GateInputs& in);
Findings MemoryCheck(const GateInputs& in);
Findings StorageCheck(const GateInputs& in);
Findings DistributedCheck(const GateInputs& in);
// Whether packed documents stay apart in this run's model (data.attention =
// "isolated"): the probe of gate/isolation.h, once, on node 0 (or a whole-run gate).
Findings IsolationCheck(const GateInputs& in);

}  // namespace ek::gate
