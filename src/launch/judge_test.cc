// One file over 600 lines: one row per branch of the judgement, which is one function.
// The launcher's judgement, one row per branch (launch/judge.h): the facts of
// an attempt in, the decision, outcome, why and which branch out.
#include "launch/judge.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <string>
#include <vector>

namespace ek::launch {
namespace {

NodeFacts Node(int node, int first_rank, int ranks) {
  NodeFacts n;
  n.node = node;
  n.reported = true;
  n.torchrun_code = 0;
  for (int r = first_rank; r < first_rank + ranks; ++r) n.ranks.push_back({r, 0, 0});
  return n;
}

// A one-node, four-rank attempt that completed: every process exited 0, the
// final checkpoint is the planned step 30 and verifies.
JudgeFacts Completed() {
  JudgeFacts f;
  f.attempt = 1;
  f.nodes = {Node(0, 0, 4)};
  f.fr = FrVerdict::kNoDumps;
  f.fr_line = "no flight-recorder dumps";
  f.planned_steps = 30;
  f.before = {-1, false, ""};
  f.after = {30, true, "ckpt/step-000030"};
  f.verified = f.after;
  f.restarts = 0;
  f.no_progress = 0;
  f.max_restarts = 3;
  f.max_no_progress = 2;
  f.backoff_s = 10;
  f.backoff_max_s = 300;
  return f;
}

// A failed attempt: rank 2 was killed; checkpoint step 20 is new. The flight
// recorder saw nothing conclusive.
JudgeFacts RankKilled() {
  JudgeFacts f = Completed();
  f.nodes[0].torchrun_code = 1;
  f.nodes[0].ranks[2] = {2, -1, SIGKILL};
  f.fr = FrVerdict::kUndecided;
  f.fr_line = "no desync: every collective matched";
  f.before = {10, false, "ckpt/step-000010"};
  f.after = {20, false, "ckpt/step-000020"};
  f.verified = {};
  return f;
}

// The field report's hang: two ranks, rank 1 SIGSTOPped after step 7. Rank 0's
// collective timed out 62 s after rank 1's last beat (it left a dump, then exited
// 1); torchrun then stopped rank 1, whose wrapper found it in state T.
JudgeFacts RankStopped() {
  JudgeFacts f = Completed();
  f.nodes = {Node(0, 0, 2)};
  NodeFacts& n = f.nodes[0];
  n.torchrun_code = 1;
  n.ranks[0] = {0, 1, 0, 1000.0};
  n.ranks[1] = {1, -1, SIGTERM, 1001.0, SIGTERM, "T"};
  n.causes = {
      {0,
       "RuntimeError: [gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 60000ms for recv "
       "operation to complete (in forward (step 8))"},
      {1, "killed by SIGTERM"}};
  n.progress = {{0, 7, "forward", 8, 969.0, 100}, {1, 7, "backward", 8, 938.0, 101}};
  f.fr = FrVerdict::kUndecided;
  f.fr_line = "undecided at pg 0 seq 1: rank 1 left no dump";
  f.fr_dumps = {{0, 12}};
  f.before = {6, false, "ckpt/step-000006"};
  f.after = f.before;
  f.verified = {};
  return f;
}

struct Row {
  const char* name;
  JudgeFacts facts;
  Action action;
  int exit_code;
  Outcome outcome;
  Failure failure;
  Branch branch;
  std::vector<std::string> reason_has;
  double backoff_s = 0;
  int next_attempt = 0;
  int no_progress = 0;  // after
};

template <typename F>
JudgeFacts With(JudgeFacts f, F change) {
  change(f);
  return f;
}

std::vector<Row> Rows() {
  std::vector<Row> rows;
  rows.push_back({"completed",
                  Completed(),
                  Action::kDone,
                  0,
                  Outcome::kCompleted,
                  Failure::kNone,
                  Branch::kDone,
                  {"the final checkpoint ckpt/step-000030 (step 30) verifies with checksums"}});
  rows.push_back({"completed, no plan to compare with",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.planned_steps = 0;
                         f.verified.step = f.after.step = 12;
                       }),
                  Action::kDone,
                  0,
                  Outcome::kCompleted,
                  Failure::kNone,
                  Branch::kDone,
                  {"(step 12)"}});
  rows.push_back(
      {"all exit 0, no checkpoint verifies",
       With(Completed(), [](JudgeFacts& f) { f.after = f.verified = {}; }),
       Action::kRestart,
       0,
       Outcome::kFailed,
       Failure::kNoCheckpoint,
       Branch::kRestart,
       {"every rank exited 0 but no checkpoint verifies", "restarting from the start after 10 s"},
       10,
       2,
       1});
  rows.push_back({"all exit 0, newest checkpoint not final",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.after = f.verified = {20, false, "ckpt/step-000020"};
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kNotFinal,
                  Branch::kRestart,
                  {"newest verified checkpoint (step 20) is not the final one (30 steps planned)",
                   "restarting from checkpoint step 20"},
                  10,
                  2,
                  0});
  rows.push_back(
      {"all exit 0, final checkpoint not at the planned step",
       With(Completed(),
            [](JudgeFacts& f) {
              f.after = f.verified = {28, true, "ckpt/step-000028"};
            }),
       Action::kRestart,
       0,
       Outcome::kFailed,
       Failure::kNotAtPlannedStep,
       Branch::kRestart,
       {"the final checkpoint is at step 28, not the planned last step (30 steps planned)"},
       10,
       2,
       0});
  rows.push_back(
      {"all exit 0, checksums fail where the structure passed",
       With(Completed(),
            [](JudgeFacts& f) {
              f.verified = {20, false, "ckpt/step-000020"};  // step 30's shards are corrupt
            }),
       Action::kRestart,
       0,
       Outcome::kFailed,
       Failure::kNotFinal,
       Branch::kRestart,
       {"(step 20)"},
       10,
       2,
       0});
  rows.push_back({"cancelled",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.nodes[0].cancelled = true;
                         f.fr = FrVerdict::kConclusive;  // cancelling outranks a desync
                       }),
                  Action::kStop,
                  130,
                  Outcome::kCancelled,
                  Failure::kNone,
                  Branch::kCancelled,
                  {"cancelled by a signal"}});
  rows.push_back({"cancelled on one node, the other's record unreadable",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.nodes = {Node(0, 0, 2), NodeFacts{}};
                         f.nodes[0].cancelled = true;
                         f.nodes[1].node = 1;
                         f.nodes[1].unreadable = "attempt-001/node-1.json: ranks[0].pid: missing";
                       }),
                  Action::kStop,
                  130,
                  Outcome::kCancelled,
                  Failure::kNone,
                  Branch::kCancelled,
                  {"cancelled"}});
  rows.push_back({"a node record that cannot be read",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.nodes = {Node(0, 0, 2), NodeFacts{}};
                         f.nodes[1].node = 1;
                         f.nodes[1].unreadable = "attempt-001/node-1.json: ranks[0].pid: missing";
                       }),
                  Action::kStop,
                  65,
                  Outcome::kFailed,
                  Failure::kUnreadableRecord,
                  Branch::kUnreadableRecord,
                  {"unreadable node record(s): attempt-001/node-1.json: ranks[0].pid: missing"}});
  rows.push_back({"rank killed, progress, budget left: restart",
                  RankKilled(),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 2 killed by SIGKILL; restarting from checkpoint step 20 after 10 s"},
                  10,
                  2,
                  0});
  rows.push_back(
      {"conclusive desync",
       With(RankKilled(),
            [](JudgeFacts& f) {
              f.fr = FrVerdict::kConclusive;
              f.fr_line =
                  "rank 3 in all_reduce (barrier); ranks 0-2 in reduce_scatter - conclusive";
            }),
       Action::kStop,
       93,
       Outcome::kFailed,
       Failure::kProcesses,
       Branch::kDesync,
       {"deterministic collective desync (a restart would deadlock again): rank 3 in all_reduce "
        "(barrier)"}});
  rows.push_back({"conclusive desync outranks a spent budget",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.fr = FrVerdict::kConclusive;
                         f.restarts = 3;
                         f.no_progress = 1;
                         f.after = f.before;
                       }),
                  Action::kStop,
                  93,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kDesync,
                  {"deterministic"},
                  0,
                  0,
                  2});
  rows.push_back({"unreadable dumps are no verdict: restart",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.fr = FrVerdict::kUnreadable;
                         f.fr_line = "fr/rank_0: not a pickle";
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 2"},
                  10,
                  2,
                  0});
  rows.push_back(
      {"a newer checkpoint skipped is named where the restart says what it resumes from",
       With(RankKilled(),
            [](JudgeFacts& f) {
              f.after = {10, false, "ckpt/step-000010"};
              f.skipped = {
                  "step-00000020: skipped: checksum mismatch in model-00001-of-00001.safetensors"};
            }),
       Action::kRestart,
       0,
       Outcome::kFailed,
       Failure::kProcesses,
       Branch::kRestart,
       {"restarting from checkpoint step 10 (step-00000020: skipped: checksum mismatch in "
        "model-00001-of-00001.safetensors) after 10 s"},
       10,
       2,
       1});
  // A configuration refusal (the trainer's exit 2) is not retried: stop 65, the cause named.
  auto refused = [](JudgeFacts f) {
    f.nodes[0].torchrun_code = 1;
    for (auto& r : f.nodes[0].ranks) r = {r.rank, 2, 0};
    f.nodes[0].causes = {{0, "/r/run.toml: data.pack_dir /p: no such directory"}};
    f.after = f.before = {};
    f.verified = {};
    return f;
  };
  rows.push_back({"every rank exited 2: the configuration is refused, not retried",
                  refused(Completed()),
                  Action::kStop,
                  65,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRefused,
                  {"the trainer refused the configuration (exit 2; a restart would refuse again): "
                   "rank 0: /r/run.toml: "
                   "data.pack_dir /p: no such directory, rank 1 exit 2"},
                  0,
                  0,
                  1});
  rows.push_back({"one rank exited 2, torchrun stopped the others with SIGTERM: refused",
                  With(refused(Completed()),
                       [](JudgeFacts& f) {
                         for (int r = 1; r < 4; ++r) f.nodes[0].ranks[r] = {r, -1, SIGTERM};
                       }),
                  Action::kStop,
                  65,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRefused,
                  {"rank 0: /r/run.toml", "rank 1 killed by SIGTERM"},
                  0,
                  0,
                  1});
  rows.push_back({"a refusal outranks a spent budget",
                  With(refused(Completed()),
                       [](JudgeFacts& f) {
                         f.restarts = 3;
                         f.no_progress = 1;
                       }),
                  Action::kStop,
                  65,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRefused,
                  {"refused"},
                  0,
                  0,
                  2});
  rows.push_back({"cancelled outranks a refusal",
                  With(refused(Completed()), [](JudgeFacts& f) { f.nodes[0].cancelled = true; }),
                  Action::kStop,
                  130,
                  Outcome::kCancelled,
                  Failure::kNone,
                  Branch::kCancelled,
                  {"cancelled"}});
  rows.push_back({"exit 2 beside another failure is no refusal: restart",
                  With(refused(Completed()),
                       [](JudgeFacts& f) {
                         f.nodes[0].ranks[3] = {3, 1, 0};
                         f.nodes[0].causes.push_back(
                             {3, "OSError: [Errno 28] No space left on device: 'x' (in save)"});
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 3: OSError: [Errno 28] No space left on device: 'x' (in save)"},
                  10,
                  2,
                  1});
  rows.push_back({"SIGTERM alone is no refusal: restart",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.nodes[0].ranks[2] = {2, -1, SIGTERM};
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 2 killed by SIGTERM"},
                  10,
                  2,
                  0});
  rows.push_back({"exit 2 with a node that did not report is no refusal: restart",
                  With(refused(Completed()),
                       [](JudgeFacts& f) {
                         f.nodes.push_back(NodeFacts{});
                         f.nodes[1].node = 1;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"node 1 did not report"},
                  10,
                  2,
                  1});
  rows.push_back(
      {"a stopped rank is named first, and the attempt restarted (a hang is not deterministic)",
       RankStopped(),
       Action::kRestart,
       0,
       Outcome::kFailed,
       Failure::kProcesses,
       Branch::kRestart,
       {"rank 1 stopped progressing at step 7 (last heartbeat 62 s before the others' timeout; "
        "process "
        "stopped (state T: a stop signal such as SIGSTOP); no dump); rank 0: RuntimeError:",
        "rank 1: killed by SIGTERM", "restarting from checkpoint step 6 after 10 s"},
       10,
       2,
       1});
  rows.push_back({"a stopped rank with no progress in a row still stops 93 on no progress, named",
                  With(RankStopped(), [](JudgeFacts& f) { f.no_progress = 1; }),
                  Action::kStop,
                  93,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kNoProgress,
                  {"last: rank 1 stopped progressing at step 7"},
                  0,
                  0,
                  2});
  rows.push_back({"no progress, once: restart",
                  With(RankKilled(), [](JudgeFacts& f) { f.after = f.before; }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"restarting from checkpoint step 10"},
                  10,
                  2,
                  1});
  rows.push_back({"no progress, max_no_progress in a row: stop 93",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.after = f.before;
                         f.no_progress = 1;
                         f.restarts = 1;
                       }),
                  Action::kStop,
                  93,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kNoProgress,
                  {"2 attempt(s) in a row without a new verified checkpoint (retry.max_no_progress "
                   "= 2); last: rank 2 "
                   "killed by SIGKILL"},
                  0,
                  0,
                  2});
  // A full disk (the precision table's N01/N02): a restart while it made progress; when it
  // persists, the no-progress stop is an I/O error to fix (74), never a do-not-requeue.
  auto disk_full = [](JudgeFacts f) {
    f.nodes[0].ranks[0] = {0, 1, 0};
    f.nodes[0].ranks[1] = {1, 1, 0};
    f.nodes[0].ranks[2] = {2, 0, 0};
    f.nodes[0].causes = {{0,
                          "OSError: [Errno 28] No space left on device: "
                          "'/ckpt/.step-00000004.tmp-77/model.safetensors' (in save "
                          "(step 4))"},
                         {1,
                          "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
                          "Connection closed by peer"}};
    return f;
  };
  rows.push_back({"a full disk at a save after progress: restart",
                  disk_full(RankKilled()),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 0: OSError: [Errno 28] No space left on device",
                   "restarting from checkpoint step 20"},
                  10,
                  2,
                  0});
  rows.push_back({"a full disk, max_no_progress in a row: stop 74, not 93",
                  With(disk_full(RankKilled()),
                       [](JudgeFacts& f) {
                         f.after = f.before;
                         f.no_progress = 1;
                       }),
                  Action::kStop,
                  74,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kNoProgress,
                  {"2 attempt(s) in a row without a new verified checkpoint (retry.max_no_progress "
                   "= 2), failing on "
                   "storage (rank 0: No space left on device): fix the storage, then requeue; "
                   "last: rank 0: OSError"},
                  0,
                  0,
                  2});
  for (const char* what :
       {"OSError: [Errno 30] Read-only file system: '/ckpt/train-metrics.jsonl' (in load)",
        "PermissionError: [Errno 1] Operation not permitted: '/ckpt/.step-00000002.tmp-9'",
        "PermissionError: [Errno 13] Permission denied: '/ckpt/train-metrics.jsonl'",
        "OSError: [Errno 122] Disk quota exceeded", "OSError: [Errno 5] Input/output error",
        "SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
        "message: \"No space left on device\" })"}) {
    rows.push_back({what,
                    With(disk_full(RankKilled()),
                         [what](JudgeFacts& f) {
                           f.after = f.before;
                           f.no_progress = 1;
                           f.nodes[0].causes[0].cause = what;
                         }),
                    Action::kStop,
                    74,
                    Outcome::kFailed,
                    Failure::kProcesses,
                    Branch::kNoProgress,
                    {"failing on storage (rank 0: "},
                    0,
                    0,
                    2});
  }
  rows.push_back(
      {"a missing file is no storage error: stop 93",
       With(disk_full(RankKilled()),
            [](JudgeFacts& f) {
              f.after = f.before;
              f.no_progress = 1;
              f.nodes[0].causes[0].cause =
                  "FileNotFoundError: [Errno 2] No such file or directory: '/m/config.json'";
            }),
       Action::kStop,
       93,
       Outcome::kFailed,
       Failure::kProcesses,
       Branch::kNoProgress,
       {"2 attempt(s) in a row without a new verified checkpoint (retry.max_no_progress = 2); "
        "last: rank 0: "
        "FileNotFoundError"},
       0,
       0,
       2});
  rows.push_back({"a full disk beside a conclusive desync: the desync decides",
                  With(disk_full(RankKilled()),
                       [](JudgeFacts& f) {
                         f.after = f.before;
                         f.no_progress = 1;
                         f.fr = FrVerdict::kConclusive;
                         f.fr_line = "desync at pg 0 seq 9: ... - conclusive";
                       }),
                  Action::kStop,
                  93,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kDesync,
                  {"desync"},
                  0,
                  0,
                  2});
  rows.push_back({"no progress outranks a spent budget",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.after = f.before;
                         f.no_progress = 1;
                         f.restarts = 3;
                       }),
                  Action::kStop,
                  93,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kNoProgress,
                  {"in a row"},
                  0,
                  0,
                  2});
  rows.push_back({"progress resets the no-progress count",
                  With(RankKilled(), [](JudgeFacts& f) { f.no_progress = 1; }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"rank 2"},
                  10,
                  2,
                  0});
  rows.push_back(
      {"budget spent while progressing: stop 75",
       With(RankKilled(),
            [](JudgeFacts& f) {
              f.restarts = 3;
              f.attempt = 4;
            }),
       Action::kStop,
       75,
       Outcome::kFailed,
       Failure::kProcesses,
       Branch::kBudgetSpent,
       {"restart budget spent (retry.max_restarts = 3); last: rank 2 killed by SIGKILL"}});
  rows.push_back({"max_restarts 0: the first failure spends the budget",
                  With(RankKilled(), [](JudgeFacts& f) { f.max_restarts = 0; }),
                  Action::kStop,
                  75,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kBudgetSpent,
                  {"= 0"}});
  rows.push_back({"backoff doubles per restart",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.restarts = 2;
                         f.attempt = 3;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"after 40 s"},
                  40,
                  4,
                  0});
  rows.push_back({"backoff is capped at backoff_max_s",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.restarts = 2;
                         f.attempt = 3;
                         f.backoff_max_s = 30;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"after 30 s"},
                  30,
                  4,
                  0});
  rows.push_back({"backoff cap holds where 2^restarts overflows",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.restarts = 5000;
                         f.max_restarts = 10000;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"after 300 s"},
                  300,
                  2,
                  0});
  rows.push_back({"backoff 0 stays 0",
                  With(RankKilled(),
                       [](JudgeFacts& f) {
                         f.restarts = 5000;
                         f.max_restarts = 10000;
                         f.backoff_s = 0;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"after 0 s"},
                  0,
                  2,
                  0});
  rows.push_back({"a node that did not report",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.nodes = {Node(0, 0, 2), NodeFacts{}};
                         f.nodes[1].node =
                             1;  // node 0 exited 0, the final checkpoint verifies: still not done
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"node 1 did not report; restarting from checkpoint step 30"},
                  10,
                  2,
                  0});
  rows.push_back({"torchrun could not start",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.nodes[0].torchrun_code = -1;
                         f.nodes[0].ranks.clear();
                         f.nodes[0].error = "torchrun: not found (or not executable) on PATH";
                         f.after = f.before;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"node 0: torchrun: not found (or not executable) on PATH"},
                  10,
                  2,
                  1});
  rows.push_back({"torchrun failed, every rank that wrote a record exited 0",
                  With(Completed(), [](JudgeFacts& f) { f.nodes[0].torchrun_code = 1; }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"node 0: torchrun exit 1"},
                  10,
                  2,
                  0});
  rows.push_back({"torchrun killed by a signal",
                  With(Completed(),
                       [](JudgeFacts& f) {
                         f.nodes[0].torchrun_code = -1;
                         f.nodes[0].torchrun_signal = SIGKILL;
                       }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"node 0: torchrun killed by SIGKILL"},
                  10,
                  2,
                  0});
  rows.push_back({"no node at all",
                  With(Completed(), [](JudgeFacts& f) { f.nodes.clear(); }),
                  Action::kRestart,
                  0,
                  Outcome::kFailed,
                  Failure::kProcesses,
                  Branch::kRestart,
                  {"no node reported"},
                  10,
                  2,
                  0});
  return rows;
}

TEST(JudgeTest, EveryRow) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    Judgement j = Judge(row.facts);
    EXPECT_EQ(j.decision.action, row.action);
    EXPECT_EQ(j.decision.exit_code, row.exit_code);
    EXPECT_EQ(j.outcome, row.outcome);
    EXPECT_EQ(j.failure, row.failure);
    EXPECT_EQ(j.branch, row.branch);
    for (const auto& part : row.reason_has) {
      EXPECT_NE(j.decision.reason.find(part), std::string::npos)
          << j.decision.reason << "\n  lacks: " << part;
    }
    EXPECT_DOUBLE_EQ(j.decision.backoff_s, row.backoff_s);
    EXPECT_EQ(j.decision.next_attempt, row.next_attempt);
    EXPECT_EQ(j.no_progress, row.no_progress);
  }
}

// The table reaches every branch of Judge and every reason an attempt fails.
TEST(JudgeTest, TheTableReachesEveryBranch) {
  std::set<Branch> branches;
  std::set<Failure> failures;
  for (const Row& row : Rows()) {
    Judgement j = Judge(row.facts);
    branches.insert(j.branch);
    failures.insert(j.failure);
  }
  EXPECT_EQ(static_cast<int>(branches.size()), kBranchCount);
  EXPECT_EQ(static_cast<int>(failures.size()), kFailureCount);
  for (Branch b : {Branch::kCancelled, Branch::kUnreadableRecord, Branch::kDone, Branch::kRefused,
                   Branch::kDesync, Branch::kNoProgress, Branch::kBudgetSpent, Branch::kRestart}) {
    EXPECT_TRUE(branches.count(b)) << static_cast<int>(b);
  }
  for (Failure f : {Failure::kNone, Failure::kNoCheckpoint, Failure::kNotFinal,
                    Failure::kNotAtPlannedStep, Failure::kProcesses, Failure::kUnreadableRecord}) {
    EXPECT_TRUE(failures.count(f)) << static_cast<int>(f);
  }
}

// The launcher reads checksums (every shard) only when the attempt can be done.
TEST(JudgeTest, VerifiedIsConsultedOnlyWhenEveryProcessSucceeded) {
  EXPECT_TRUE(EveryProcessSucceeded(Completed()));
  EXPECT_FALSE(EveryProcessSucceeded(RankKilled()));
  EXPECT_FALSE(EveryProcessSucceeded(With(Completed(), [](JudgeFacts& f) { f.nodes.clear(); })));
  EXPECT_FALSE(
      EveryProcessSucceeded(With(Completed(), [](JudgeFacts& f) { f.nodes[0].reported = false; })));
  EXPECT_FALSE(
      EveryProcessSucceeded(With(Completed(), [](JudgeFacts& f) { f.nodes[0].cancelled = true; })));
  EXPECT_FALSE(
      EveryProcessSucceeded(With(Completed(), [](JudgeFacts& f) { f.nodes[0].error = "x"; })));
  EXPECT_FALSE(EveryProcessSucceeded(
      With(Completed(), [](JudgeFacts& f) { f.nodes[0].torchrun_signal = SIGTERM; })));
}

TEST(FindHangTest, TheStoppedRankIsNamedWithItsStepHeartbeatStateAndDump) {
  Hang h = FindHang(RankStopped());
  EXPECT_EQ(h.ranks, std::vector<int>{1});
  EXPECT_EQ(h.step, 7);
  EXPECT_EQ(h.line,
            "rank 1 stopped progressing at step 7 (last heartbeat 62 s before the others' timeout; "
            "process stopped "
            "(state T: a stop signal such as SIGSTOP); no dump)");
  EXPECT_EQ(Judge(RankStopped()).hang.ranks, std::vector<int>{1});
}

TEST(FindHangTest, UninterruptibleSleepIsAHangEvenWithoutATimeout) {
  JudgeFacts f = RankStopped();
  f.nodes[0].ranks[1].state_at_stop = "D";
  f.nodes[0].causes[0].cause = "OSError: [Errno 5] Input/output error (in save (step 7))";
  f.fr_dumps = {{0, 12}, {1, 11}};
  Hang h = FindHang(f);
  EXPECT_EQ(h.ranks, std::vector<int>{1});
  EXPECT_EQ(
      h.line,
      "rank 1 stopped progressing at step 7 (last heartbeat 62 s before rank 0 failed; process in "
      "uninterruptible sleep (state D: blocked in the kernel, e.g. on a device or I/O); its dump "
      "ends at seq 11)");
}

TEST(FindHangTest, ARankAliveWithoutADumpWhileTheOthersTimedOutIsNamed) {
  JudgeFacts f = RankStopped();
  f.nodes[0].ranks[1].state_at_stop =
      "S";  // a Python-level hang: the process sleeps, never in the collective
  Hang h = FindHang(f);
  EXPECT_EQ(h.ranks, std::vector<int>{1});
  EXPECT_NE(h.line.find("process alive, sleeping (state S); no dump)"), std::string::npos)
      << h.line;
  // Its wrapper killed before it wrote the state: named from the inference.
  f.nodes[0].ranks[1] = {1, -1, SIGKILL, 1030.0, 0, "", true};
  h = FindHang(f);
  EXPECT_EQ(h.ranks, std::vector<int>{1});
  EXPECT_NE(h.line.find("its wrapper was killed before the trainer's end was seen; no dump)"),
            std::string::npos)
      << h.line;
}

TEST(FindHangTest, NothingIsNamedWithoutEvidenceOfAHang) {
  // A rank killed on its own (SIGKILL): it failed, the others did not hang.
  EXPECT_TRUE(FindHang(RankKilled()).ranks.empty());
  EXPECT_EQ(Judge(RankKilled()).decision.reason.find("stopped progressing"), std::string::npos);
  // The other rank failed with no timeout (a full disk): the one torchrun stopped merely waited.
  JudgeFacts f = RankStopped();
  f.nodes[0].ranks[1].state_at_stop = "S";
  f.nodes[0].causes[0].cause =
      "OSError: [Errno 28] No space left on device: 'x' (in save (step 7))";
  EXPECT_TRUE(FindHang(f).ranks.empty());
  // A timeout, but the stopped rank left a dump too: it was in the collective, not stuck before it.
  f = RankStopped();
  f.nodes[0].ranks[1].state_at_stop = "S";
  f.fr_dumps[1] = 12;
  EXPECT_TRUE(FindHang(f).ranks.empty());
  // A completed attempt.
  EXPECT_TRUE(FindHang(Completed()).ranks.empty());
}

TEST(FindHangTest, ARankWithoutAHeartbeatAndManyStoppedRanks) {
  JudgeFacts f = RankStopped();
  f.nodes[0].progress.pop_back();
  Hang h = FindHang(f);
  EXPECT_EQ(h.line.rfind("rank 1 stopped progressing at an unknown step (no heartbeat in this "
                         "attempt; process stopped",
                         0),
            0u)
      << h.line;
  EXPECT_EQ(h.step, -1);
  // Six stopped ranks: four clauses, then a count; the step is the lowest among them.
  f = RankStopped();
  for (int r = 2; r < 7; ++r) {
    f.nodes[0].ranks.push_back({r, -1, SIGTERM, 1001.0, SIGTERM, "T"});
    f.nodes[0].progress.push_back({r, r == 5 ? 3 : 7, "forward", 8, 938.0, 100 + r});
  }
  h = FindHang(f);
  EXPECT_EQ(h.ranks, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(h.step, 3);
  EXPECT_NE(h.line.find("; rank 4 stopped progressing at step 7 ("), std::string::npos) << h.line;
  EXPECT_EQ(h.line.find("rank 5 stopped"), std::string::npos) << h.line;
  EXPECT_NE(h.line.find("; 2 more"), std::string::npos) << h.line;
}

TEST(JudgeTest, FactsOfANodeRecord) {
  NodeRecord n;
  n.node = 1;
  n.torchrun_code = 1;
  n.error = "e";
  n.cancelled = true;
  RankRecord r;
  r.rank = 3;
  r.exit_code = -1;
  r.signal = SIGKILL;
  r.end = 12.5;
  r.stop_signal = SIGTERM;
  r.state_at_stop = "T";
  r.inferred = true;
  n.ranks = {r};
  n.progress = {{3, 7, "forward", 8, 10.0, 42}};
  NodeFacts f = FactsOf(n);
  EXPECT_TRUE(f.reported);
  EXPECT_TRUE(f.unreadable.empty());
  EXPECT_EQ(f.node, 1);
  EXPECT_EQ(f.torchrun_code, 1);
  EXPECT_EQ(f.error, "e");
  EXPECT_TRUE(f.cancelled);
  ASSERT_EQ(f.ranks.size(), 1u);
  EXPECT_EQ(f.ranks[0].rank, 3);
  EXPECT_EQ(f.ranks[0].signal, SIGKILL);
  EXPECT_EQ(f.ranks[0].end, 12.5);
  EXPECT_EQ(f.ranks[0].stop_signal, SIGTERM);
  EXPECT_EQ(f.ranks[0].state_at_stop, "T");
  EXPECT_TRUE(f.ranks[0].inferred);
  ASSERT_EQ(f.progress.size(), 1u);
  EXPECT_EQ(f.progress[0].step, 7);
}

}  // namespace
}  // namespace ek::launch
