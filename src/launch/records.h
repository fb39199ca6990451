// The records launchers on different nodes hand each other through the
// launch directory (docs/launch.md "Records"), written and read back here:
//   gate/verdict.json           node 0's gate verdict (GateVerdict)
//   attempt-NNN/node-N.json     one node's account of an attempt (NodeRecord)
//   attempt-NNN/decision.json   node 0's judgement of the attempt (Decision)
//   attempt-NNN/resume.json     node 0's checkpoint for the attempt (ResumeChoice)
//   summary.json                node 0's account of the launch (LaunchSummary,
//                               the part `evenkeel launch` prints)
// Every reader is strict (ek::JsonFields): a missing or mistyped field, or a
// wrongly nested one, is a kCorrupt error naming the file and the field's path
// ("attempt-001/node-1.json: ranks[0].pid: missing"), never a default.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gate/gate.h"
#include "heartbeat/goodput_account.h"
#include "launch/launcher.h"
#include "launch/rank_exec.h"
#include "run/rank_cause.h"

namespace ek::launch {

// Why one rank failed: the first error its log names (launch/cause.h), else its
// exit status or signal ("killed by SIGKILL"). In node records, attempt.json and
// summary.json as {"rank": R, "cause": "..."}.
using RankCause = run::RankCause;  // run/rank_cause.h: the one reader of a causes list

// A rank's last heartbeat in an attempt (watch/heartbeat.h), as its node's
// launcher read it after the attempt: what the judge names a hung rank by.
struct RankProgress {
  int rank = -1;
  int64_t step = -1;  // last finished step; -1 before the first
  std::string phase;  // the trainer's phase then (forward, save_barrier, ...)
  int64_t phase_step = -1;
  double time = 0;  // the newest beat (Unix seconds, the trainer's clock)
  int64_t pid = 0;
};

// One node's account of one attempt (attempt-NNN/node-N.json).
struct NodeRecord {
  int node = 0;
  std::string host;
  double start = 0, end = 0;
  int torchrun_code = -1, torchrun_signal = 0;
  bool cancelled = false;
  int64_t step_reached = -1;  // the newest step this node's ranks beat
  std::vector<RankRecord> ranks;
  std::string error;              // the launcher could not start torchrun
  std::vector<RankCause> causes;  // this node's ranks that failed, in rank order
  std::vector<RankProgress>
      progress;  // this node's ranks' last heartbeats of this attempt, in rank order
};
std::string RankProgressToJson(const RankProgress& p);
std::string RankCauseToJson(const RankCause& c);
std::string NodeRecordToJson(const NodeRecord& n);
Result<NodeRecord> NodeRecordFromJson(std::string_view json, const std::string& name);

// What every node does after an attempt. On disk "done", "restart", "stop".
enum class Action { kDone, kRestart, kStop };
std::string_view ActionName(Action a);

// Node 0's judgement of one attempt (attempt-NNN/decision.json; launch/judge.h).
struct Decision {
  Action action = Action::kStop;
  int exit_code = kExitError;
  std::string reason;
  int next_attempt = 0;
  double backoff_s = 0;
};
std::string DecisionToJson(int attempt, const Decision& d);
// `attempt` is the attempt the file must be about (its "attempt" field).
Result<Decision> DecisionFromJson(std::string_view json, const std::string& name, int attempt);

// Node 0's resume decision for one attempt (attempt-NNN/resume.json), written
// before its torchrun starts: every node's launcher hands its ranks the same
// checkpoint (EVENKEEL_RESUME_FROM) and the digest of the manifest node 0
// verified it by (EVENKEEL_RESUME_MANIFEST_XXH3), so that no node picks its own.
struct ResumeChoice {
  std::string resume_from = "none";  // a checkpoint directory, or "none": from the start
  int64_t step = -1;                 // its step; -1 with "none"
  std::string
      manifest_xxh3;  // 16 hex digits: xxh3-64 of its evenkeel-checkpoint.json; "" with "none"
  std::string where;  // node 0's words for it: "resuming from checkpoint step 10 (...)"
  // What the ranks restore from it (EVENKEEL_RESUME_LEVEL): "full" or "weights";
  // "" with "none" (null in the file).
  std::string resume_level;
};
std::string ResumeChoiceToJson(int attempt, const ResumeChoice& c);
// `attempt` is the attempt the file must be about. A path with a step of -1 (or
// "none" with a step), a digest that is not 16 hex digits, or a resume_level that
// is not "full" or "weights" with a path (null with "none"), is an error naming it.
Result<ResumeChoice> ResumeChoiceFromJson(std::string_view json, const std::string& name,
                                          int attempt);
// What summary.json counts of an attempt an earlier launcher of the session
// judged (its attempt-NNN/attempt.json, read strictly): the fields the totals
// need. The record itself is kept as written (`json`).
struct AttemptAccount {
  int attempt = 0;
  double start = 0, end = 0;
  std::string outcome;
  double gpu_hours = 0, gpu_hours_lost = 0;
  std::vector<RankCause> causes;
  std::string json;  // the object as written, without its trailing newline
};
Result<AttemptAccount> AttemptAccountFromJson(std::string_view json, const std::string& name);

// Node 0's gate verdict (gate/verdict.json): every node starts or stops by it.
struct GateVerdict {
  gate::Verdict overall = gate::Verdict::kFail;  // on disk "PASS", "WARN", "FAIL"
  bool accepted = false;                         // a FAIL started anyway (--accept-gate-fail)
  int first_attempt = 1;
  std::string reasons;               // the FAIL checks' reasons (several nodes)
  std::string text;                  // the merged report for people (several nodes)
  std::map<int, std::string> parts;  // node -> the nonce of the part merged
};
std::string GateVerdictToJson(const GateVerdict& v);
Result<GateVerdict> GateVerdictFromJson(std::string_view json, const std::string& name);

// The nonce a launcher tags its gate part with (gate/node-N.json's
// "launch_nonce"); the part itself is gate::GateReportFromJson's.
Result<std::string> GatePartNonce(std::string_view json, const std::string& name);

// What `evenkeel launch` prints from summary.json (which holds more).
struct LaunchSummary {
  std::string outcome;
  int64_t steps = -1, planned_steps = -1;
  uint64_t tokens = 0;
  double tokens_per_s = 0;
  int64_t attempts = 0;
  double gpu_hours_used = 0, gpu_hours_lost = 0;
  int64_t evenfix_dropped_blocks = -1;
  std::string final_checkpoint;  // "" when none verifies as final
  // The launch's goodput account (docs/launch.md "Goodput"); unset in a summary written
  // before launchers kept one.
  std::optional<heartbeat::GoodputAccount> goodput;
};
Result<LaunchSummary> LaunchSummaryFromJson(std::string_view json, const std::string& name);

}  // namespace ek::launch
