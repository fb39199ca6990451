// The preflight gate: seven invariants checked before an expensive launch,
// each PASS, WARN or FAIL with its reason and numbers; any FAIL refuses the
// run. Each node checks its own ranks, disks and GPUs ("parts"), and the
// parts merge into one verdict. The pass log doubles as a recorded
// pre-validation artifact.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/json_out.h"
#include "core/status.h"
#include "run/plan.h"
#include "run/run_file.h"

namespace ek::gate {

using run::EvenfixMode;
using run::Plan;
using run::RunFile;

enum class Verdict { kPass = 0, kWarn = 1, kFail = 2 };
std::string_view VerdictName(Verdict v);

// One check's outcome. `problems` holds every problem the check found, each a
// one-line string (empty exactly when the verdict is PASS); `reason` is one
// line: the first problem and how many more, or what passed.
struct Check {
  std::string name;  // data, balance, schedule, memory, storage, distributed, isolation
  Verdict verdict = Verdict::kPass;
  std::string reason;
  std::map<std::string, double> numbers;
  std::vector<std::string> problems;
};

// The terminal shows at most this many problems of a check; the JSON log has all.
inline constexpr size_t kTextProblems = 20;

// What the gate can learn about this node's GPUs (NVML when present).
struct GpuFacts {
  bool available = false;  // false: no NVML here
  std::string why_unavailable;
  int count = 0;
  double memory_bytes = 0;    // smallest device's total memory
  int foreign_processes = 0;  // compute processes already on the GPUs
};

// What the gate learns about the machine: through `env` (core/env.h) the
// environment variables the ranks will see, the host name, the storage
// check's probe write and free space (statvfs), and the clock that times the
// checks; beside it what the caller probed. Tests pass a FaultInjectionEnv
// with variables, a host, free space and a FakeClock of their own.
struct GateEnv {
  Env* env = Env::Default();
  GpuFacts gpus;
  size_t threads = 0;
  // The isolation check's probe (gate/isolation.h): runs `argv` for at most
  // `timeout_s` and returns what it printed, or why it could not run. Unset:
  // SpawnIsolationProbe on env's clock. Tests pass a fake.
  std::function<Result<std::string>(const std::vector<std::string>& argv, double timeout_s)>
      isolation_probe;
  std::string python;  // the probe's interpreter; "": the trainer's (run/programs.h)
};

struct GateReport {
  std::string run_name;
  std::string run_file;  // the run file's path and xxh3: the trainer logs the same pair
  uint64_t run_xxh3 = 0;
  std::string host;
  int node_rank = -1;  // -1: all nodes checked here
  int nodes = 0;       // the run's layout (0: not recorded, an older part)
  int gpus_per_node = 0;
  std::vector<int> ranks_checked;       // ranks whose data this part verified
  std::map<int, uint64_t> rank_blocks;  // blocks per rank from the manifest(s) seen
  std::vector<std::string> hosts;
  std::vector<Check> checks;  // in order; for a merged report, worst per name
  uint64_t global_min_blocks = 0;
  std::string evenkeel_version;
  std::string time;  // UTC ISO 8601
  double seconds = 0;
  Verdict overall() const;
};

// The free space a run's saves need in checkpoint.dir (docs/gate_format.md, "The
// storage check"). A save writes a whole new checkpoint of `checkpoint_bytes` before
// the oldest is pruned, so the run's peak is keep + 1 checkpoints. `existing` are
// the sizes of the verified checkpoints already there, newest first, at most
// `keep` of them: they occupy space already (it is not in the free count) and are
// pruned as new saves land. After j saves, the newest keep - j of them remain, so
// the save j + 1 needs (j + 1) x checkpoint_bytes less what was pruned; the need
// is the largest of these over j = 0..keep. With existing checkpoints of the
// planned size it is (keep + 1 - existing) x checkpoint_bytes.
double SaveSpaceNeeded(double checkpoint_bytes, int keep, const std::vector<double>& existing);

// Runs the seven checks. node_rank -1 checks every rank's data here.
Result<GateReport> RunGate(const RunFile& run, int node_rank, const GateEnv& env);

// Combines node parts: each check's verdict is the worst over parts, its
// problems every part's (prefixed by host). Every node of the run must have
// sent a part: a node without one is a data FAIL naming the node and its
// ranks. Two parts claiming the same node, a part of a node the run does not
// have, parts of different runs or layouts, and a node count known from
// neither `run` nor the parts are errors. With `run`, balance is recomputed
// over every rank the parts saw (node-local manifests each cover only their
// node's ranks).
Result<GateReport> MergeGateReports(const std::vector<GateReport>& parts,
                                    const RunFile* run = nullptr);

// The pass log (docs/gate_format.md), one member a line. WriteGateReportMembers writes its
// members into an object the caller opened (kSpaced, kLines) and closes, after members of its
// own: the launcher's nonce and start time on the parts it exchanges.
std::string GateReportToJson(const GateReport& r);
void WriteGateReportMembers(JsonWriter& w, const GateReport& r);
Result<GateReport> GateReportFromJson(std::string_view json, const std::string& name);
// One line per check, then each of its problems on a line of its own when it
// has more than one, at most `max_problems` per check ("... and N more").
std::string GateReportToText(const GateReport& r, size_t max_problems = kTextProblems);

// Writes a pass log (or a node part, node_rank >= 0) as JSON at `path`,
// atomically: on failure the previous file at `path` is left whole, and the
// error names `path` and the operation that failed.
Status WriteGateLog(const std::string& path, const GateReport& r, Env* env = Env::Default());

}  // namespace ek::gate
