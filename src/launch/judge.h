// The launcher's judgement of one attempt (docs/launch.md "Judgement"): done,
// restart, stop with 93 (do not requeue), stop with 75 (restart budget spent),
// stop with 130 (cancelled) or 65 (a node record that cannot be read, or a
// configuration the trainer refused). A pure
// function of the facts the launcher gathered: the nodes' exit statuses and
// signals, the flight recorder's verdict, the plan, the newest verified
// checkpoint before and after the attempt, and the attempt history. No I/O:
// the launcher reads the records, the checkpoints and the dumps, then asks.
//
// The order of the questions, first match wins:
//   1. a node was cancelled (a stop signal)            -> stop 130
//   2. a node record exists but cannot be read          -> stop 65
//   3. every node reported, torchrun and every rank exited 0, the newest
//      checkpoint verifies with checksums, is final and is at the planned
//      step (when the plan knows it)                    -> done 0
//   otherwise the attempt failed (why: no checkpoint, not final, not at the
//   planned step, or processes that failed / nodes that did not report), and
//   (a failed attempt whose ranks stopped progressing (FindHang below) has
//   them named first in the reason; a hang is not deterministic: it changes
//   no decision)
//   4. a configuration refusal: every node reported, some rank exited 2 (the
//      trainer's usage, run-file, data or tokenizer refusal) and every other
//      failed rank exited 2 too or was stopped with SIGTERM by torchrun after
//      it: a restart would refuse again           -> stop 65
//   5. the flight recorder's verdict is a conclusive desync -> stop 93
//   6. retry.max_no_progress attempts in a row without a new verified
//      checkpoint (this one included)                   -> stop 93, or stop 74
//      when a failed rank's cause is a storage error (no space, quota,
//      read-only, EIO, not permitted): fix the storage, then requeue
//   7. retry.max_restarts restarts already made          -> stop 75
//   8. else restart after backoff_s x 2^restarts, capped at backoff_max_s.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "launch/records.h"

namespace ek::launch {

// What the launcher made of attempt-NNN/fr/, as `evenkeel fr` reads it.
enum class FrVerdict {
  kNotRead,     // the launcher did not look (the facts of a test, an attempt that could not start)
  kNoDumps,     // the folder is empty: no collective timed out
  kUnreadable,  // dumps exist but none could be read
  kUndecided,   // dumps were read; no conclusive desync among them
  kConclusive,  // a deterministic desync: different collectives, sizes or dtypes at one slot, ranks
                // that never joined
};
std::string_view FrVerdictName(FrVerdict v);

struct RankFacts {
  int rank = -1;
  int exit_code = -1;  // -1 when it was killed by a signal
  int signal = 0;
  double end = 0;       // when the trainer ended (Unix seconds); 0: unknown
  int stop_signal = 0;  // the wrapper was stopped (torchrun's SIGTERM) before the trainer ended; 0:
                        // it ended first
  std::string
      state_at_stop{};  // the trainer's process state then ("T", "D", "S", ...; "": unknown)
  bool inferred =
      false;  // its wrapper was killed: exit_code, signal and end are the launcher's inference
};

struct NodeFacts {
  int node = 0;
  bool reported = false;  // its node-N.json was read
  std::string
      unreadable;     // its node-N.json exists but cannot be read: the error ("file: field: what")
  std::string error;  // its launcher could not start torchrun
  int torchrun_code = -1, torchrun_signal = 0;
  bool cancelled = false;
  std::vector<RankFacts> ranks;   // the ranks that wrote a record
  std::vector<RankCause> causes;  // why its failed ranks failed (launch/cause.h), for the reason
  std::vector<RankProgress> progress;  // its ranks' last heartbeats in the attempt
};
// The facts in a node record that was read.
NodeFacts FactsOf(const NodeRecord& n);

struct CheckpointFacts {
  int64_t step = -1;  // -1: none verifies
  bool final = false;
  std::string path;
};

struct JudgeFacts {
  int attempt = 1;
  std::vector<NodeFacts> nodes;  // one per node of the run (cluster.nodes), in node order
  FrVerdict fr = FrVerdict::kNotRead;
  std::string fr_line;  // the verdict line, for the reason
  // The ranks whose dump was read, with their highest collective sequence id
  // (any process group); empty when none was (fr is kNotRead, kNoDumps or kUnreadable).
  std::map<int, int64_t> fr_dumps;
  int64_t planned_steps = 0;  // the plan's total optimizer steps; 0: unknown (no pack to plan from)
  CheckpointFacts before;     // newest structurally verified checkpoint when the attempt started
  CheckpointFacts after;      // the same when it ended
  // Newest checkpoint that verifies with checksums. Only consulted when
  // EveryProcessSucceeded(). (The launcher verifies `after` with checksums too,
  // since it is the checkpoint the next attempt is handed: it passes the same.)
  CheckpointFacts verified;
  // Checkpoints newer than `after` that did not verify ("step-00000020: skipped:
  // <headline>"): named where a restart says what it resumes from.
  std::vector<std::string> skipped;
  int restarts = 0;            // restarts made before this attempt
  int no_progress = 0;         // failed attempts in a row without a new checkpoint, before this one
  int max_restarts = 3;        // retry.max_restarts
  int max_no_progress = 2;     // retry.max_no_progress
  double backoff_s = 10;       // retry.backoff_s
  double backoff_max_s = 300;  // retry.backoff_max_s
};

// Ranks that stopped progressing in a failed attempt (the "hang" a collective
// timeout ends): named from the facts alone, each with its evidence.
//   - a rank whose trainer was stopped (state T) or in uninterruptible sleep
//     (D) when torchrun stopped it: it could not have been progressing;
//   - else, when some rank failed on its own with a timeout (its cause says
//     "timed out" or "timeout"): each rank that did not fail on its own (torchrun
//     stopped it, or its wrapper was killed) and left no flight-recorder dump
//     while a failed rank left one; not when that is every other rank.
// `line`: "rank 1 stopped progressing at step 7 (last heartbeat 62 s before
// the others' timeout; process stopped (state T: ...); no dump)", one clause
// per rank ("; "), at most four. Empty `ranks` when nothing points at a hang.
struct Hang {
  std::vector<int> ranks;
  int64_t step =
      -1;  // the lowest last finished step among them (-1: before the first, or no heartbeat)
  std::string line;
};
Hang FindHang(const JudgeFacts& facts);

// True when every node reported and its torchrun and launcher succeeded
// (none cancelled): the only case in which the attempt can be done, and the
// only one in which JudgeFacts::verified is read.
bool EveryProcessSucceeded(const JudgeFacts& f);

enum class Outcome { kCompleted, kFailed, kCancelled };
std::string_view OutcomeName(Outcome o);  // "completed", "failed", "cancelled" (attempt.json)

// Why an attempt failed (kNone when it did not).
enum class Failure {
  kNone,
  kNoCheckpoint,
  kNotFinal,
  kNotAtPlannedStep,
  kProcesses,
  kUnreadableRecord
};

// Which of the questions above settled it; tests count that each is reached.
enum class Branch {
  kCancelled,
  kUnreadableRecord,
  kDone,
  kRefused,
  kDesync,
  kNoProgress,
  kBudgetSpent,
  kRestart
};
inline constexpr int kBranchCount = 8;
inline constexpr int kFailureCount = 6;

struct Judgement {
  Outcome outcome = Outcome::kFailed;
  Failure failure = Failure::kNone;
  Branch branch = Branch::kRestart;
  Decision decision;
  int no_progress = 0;  // the count after this attempt (the next attempt's JudgeFacts::no_progress)
  Hang hang;  // a failed attempt's ranks that stopped progressing (FindHang); named in the reason
};

Judgement Judge(const JudgeFacts& facts);

}  // namespace ek::launch
