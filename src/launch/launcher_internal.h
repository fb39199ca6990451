// Internal to the launcher (launcher*.cc): the Launcher class, which runs one node's
// side of a launch, the records it keeps and the helpers its files share. Each
// file holds one part of it: launcher.cc (preparing, the lock, the agent, the
// attempt loop), launcher_gate.cc (the gate exchange), launcher_attempt.cc
// (resume points and running an attempt), launcher_judge.cc (an attempt's facts
// for the judge), launcher_earlier.cc (earlier launchers' attempts) and
// launcher_summary.cc (summary.json).
#pragma once

#include <fmt/core.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/process.h"
#include "core/status.h"
#include "launch/cluster.h"
#include "launch/goodput.h"
#include "launch/judge.h"
#include "launch/launcher.h"
#include "launch/records.h"
#include "launch/session_lock.h"
#include "run/plan.h"
#include "run/programs.h"
#include "run/run_file.h"

namespace ek::launch::detail {

// launcher.cc
double Now();
std::string Nonce();
// The names in `dir`, sorted (Env::ListDir); none when it cannot be listed.
std::vector<std::string> ListNames(Env* env, const std::string& dir);
// A small record's text; nullopt when it does not exist yet (a record is
// always written whole, by rename: a file that exists is complete).
Result<std::optional<std::string>> ReadIfExists(const std::string& path);
// Waits until `ready` returns true, polling every 0.2 s on `clock`; false on
// timeout or a stop signal.
bool WaitFor(Clock* clock, double timeout_s, const std::function<bool()>& ready);
// launch.torchrun and launch.python are found by run/programs.h (FindRunProgram,
// FindTrainerPython), which the gate's isolation probe shares.
using run::FindRunProgram;
using run::WhereLooked;

// The reference trainer is the Python module evenkeel.train, shipped in
// evenkeel's Python package: run as PYTHON -m evenkeel.train RUN.toml, found by
// the run's Python wherever this binary lives.
inline constexpr const char* kTrainerModule = "evenkeel.train";

// Asks `python` whether it can import the trainer module (find_spec imports
// the evenkeel package, not the trainer: no torch start-up). NotFound naming
// the python, why and what to install when it cannot.
Status CheckTrainerModule(const std::string& python, const std::string& python_from,
                          const std::string& run_path);

struct Paths {
  std::string ckpt_dir;
  std::string session;    // LAUNCH_DIR/RUN_ID
  std::string heartbeat;  // this node's heartbeat directory
  std::string Attempt(int a) const { return fmt::format("{}/attempt-{:03d}", session, a); }
};

struct Checkpoint {
  int64_t step = -1;
  std::string path;
  double mtime = 0;
  bool final = false;
  uint64_t tokens = 0;
  // newer ones that did not verify: "step-00000020: skipped: <headline>", and why a
  // resume gives weights only (ckpt::NewestResumable's warnings)
  std::vector<std::string> skipped;
  std::string level;  // what a resume from it restores: "full", "weights"; "" without one
  // xxh3-64 of its evenkeel-checkpoint.json when it was verified with checksums (ResumePoint):
  // the trainer, handed it, checks that digest and the files' sizes instead of rehashing.
  std::string manifest_xxh3;
};

// launcher_attempt.cc
Checkpoint NewestCheckpoint(const std::string& ckpt_dir, ckpt::VerifyLevel level,
                            std::vector<std::string>* warnings);
// The checkpoint an attempt resumes from: the newest that verifies with checksums
// at the run file's checkpoint.resume level (`wanted`), by ckpt::NewestResumable at
// kFull, which is what the trainer's newest_resumable(full=True) runs: with
// "full", the newest whose weights and training state verify, else the newest
// whose weights do (level "weights", a warning in `skipped` saying why). The launcher hands it to
// the trainer (EVENKEEL_RESUME_FROM), which resumes from exactly it, so what the launcher prints is
// what happens. An error (the checkpoint folder cannot be read) is returned: guessing "the start"
// would throw the run's progress away.
Result<Checkpoint> ResumePoint(const std::string& ckpt_dir, ckpt::ResumeLevel wanted);
// "checkpoint step 10 (step-00000020: skipped: checksum mismatch ...), full state",
// "checkpoint step 10, weights only", "the start".
std::string DescribeResume(const Checkpoint& c);

struct AttemptSummary {
  int attempt = 0;
  double start = 0, end = 0;
  Outcome outcome = Outcome::kFailed;
  std::string fr_verdict;  // the flight recorder's line; "" when the attempt did not fail
  bool fr_conclusive = false;
  int64_t checkpoint_before = -1, checkpoint_after = -1;
  std::string resume_level;  // what the attempt resumed: "full", "weights"; "" from the start
  int64_t step_reached = -1;
  Decision decision;
  std::vector<NodeRecord> nodes;
  double gpu_hours = 0, gpu_hours_lost = 0;
  std::vector<RankCause> causes;  // every node's failed ranks, in rank order
  Hang hang;                      // ranks that stopped progressing (judge.h FindHang); none: empty
  // Its part of the launch's goodput account (launch/goodput.h), node 0's; unset elsewhere.
  std::optional<GoodputAccount> goodput;
};

// An attempt of an earlier launcher of this session (one that died, or one that
// ended and whose summary.json this launch replaces): counted in the totals.
struct EarlierAttempt {
  int attempt = 0;
  double start = 0, end = 0;
  double gpu_hours = 0, gpu_hours_lost = 0;
  bool inferred = false;  // no attempt.json: its times come from its last records
  std::vector<RankCause> causes;
  std::string json;  // its entry in attempt_records
};

// launcher_summary.cc
std::string HangToJson(const Hang& h);
std::string CausesToJson(const std::vector<RankCause>& causes);
std::string AttemptToJson(const AttemptSummary& a);
// `json` (an object) with "earlier_launch" and "inferred" first: how summary.json lists an attempt.
std::string Flagged(const std::string& json, bool earlier, bool inferred);

// launcher_earlier.cc
double ModifiedAt(const std::string& path);

class Launcher {
 public:
  Launcher(const LaunchOptions& o, const Say& say) : o_(o), say_(say) {}
  Result<LaunchResult> Run();
  // Empties the lock's record and releases it (a failure is a warning: the next launch
  // would only call the lock stale).
  void ReleaseLock();

 private:
  // One launcher per run and node: takes the session's lock. False (with `refused`
  // set) when another launcher holds it; a Status when the lock cannot be taken.
  Result<bool> Lock(std::string* refused);
  Status Prepare();
  std::vector<std::pair<std::string, std::string>> RankEnv(int attempt) const;
  // Runs the gate; false (with the exit code set) when the launch must stop;
  // a Status when a gate record cannot be written.
  Result<bool> Gate(int* first_attempt, int* exit_code);
  // One attempt on this node; a Status when its folder cannot be made. `resume` is
  // node 0's choice, handed to every rank (EVENKEEL_RESUME_FROM,
  // EVENKEEL_RESUME_MANIFEST_XXH3 and EVENKEEL_RESUME_LEVEL), the same on every node.
  Result<NodeRecord> RunAttempt(int attempt, const ResumeChoice& resume);
  // Node 0: chooses the checkpoint the attempt resumes from (`before`) and writes it
  // to attempt-NNN/resume.json for the other nodes. A Status when no checkpoint can
  // be chosen (the folder cannot be read) or the record cannot be written.
  Result<ResumeChoice> ChooseResume(int attempt, Checkpoint* before);
  // Other nodes: waits for node 0's attempt-NNN/resume.json. False (with the exit
  // code set) when it never comes or cannot be read.
  bool FollowResume(int attempt, ResumeChoice* choice, int* exit_code);
  // Node 0: gathers the facts of an attempt (records, checkpoints, the flight
  // recorder) and asks Judge (launch/judge.h).
  AttemptSummary JudgeAttempt(int attempt, const std::vector<NodeFacts>& nodes,
                              const std::vector<NodeRecord>& records, const Checkpoint& before,
                              int restarts, int* no_progress);
  std::string Summary(int exit_code, const std::string& outcome) const;
  // Node 0: the session's attempts before `first_attempt` (earlier launchers', one
  // that died among them), for the summary's totals and list.
  void ReadEarlierAttempts(int first_attempt);
  // An earlier attempt without attempt.json (its launcher died): its times from its last records.
  EarlierAttempt ReconstructAttempt(int attempt,
                                    const std::vector<ckpt::CheckpointEntry>& checkpoints);
  void StartAgent();
  // launcher_goodput.cc (node 0). While attempt `attempt` runs: polls this node's
  // heartbeats for its steps, saves and start-up times (at most every 0.5 s, or now
  // when `force`), and rewrites goodput.json every kGoodputEveryS.
  void TrackBeats(int attempt, double spawn, bool force);
  // After an attempt is judged: its timeline joins the account, `a` gets its part,
  // goodput.json is rewritten. A goodput.json that cannot be written is a warning.
  void CountGoodput(AttemptSummary* a, const std::vector<NodeRecord>& records,
                    const Checkpoint& before);
  // The launch's account until `now`; with `running`, the attempt under way too.
  GoodputAccount LaunchGoodput(double now, const AttemptTimeline* running) const;
  void WriteGoodputFile(int attempt, bool running, const GoodputAccount& g);
  // A coordination record, written whole through o_.files; an error names it.
  Status WriteRecord(const std::string& path, std::string_view data) const;
  // A record the launch cannot go on without failed: stop what runs, exit 74.
  Status Fail(Status st);

  const LaunchOptions& o_;
  Say say_;
  run::RunFile run_;
  // The run file's checkpoint.resume (checked by its reader).
  ckpt::ResumeLevel WantedResume() const {
    return ckpt::ParseResumeLevel(run_.resume).value_or(ckpt::ResumeLevel::kFull);
  }
  Cluster cluster_;
  Paths paths_;
  std::string torchrun_, python_;
  std::vector<std::string> trainer_;  // the trainer's command before RUN.toml: PYTHON SCRIPT, or
                                      // PYTHON -m evenkeel.train
  // The schedule attempts are judged by (run::MakeSchedule): from the pack's manifest,
  // or, for node-local packs, from every node's block counts in the merged gate report.
  run::Schedule plan_;
  bool has_plan_ = false;
  std::string nonce_ = Nonce();
  double started_ = Now();
  std::vector<AttemptSummary> attempts_;
  std::vector<EarlierAttempt> earlier_;
  std::optional<Child> agent_;
  std::optional<SessionLock> lock_;
  // Node 0: the checkpoint the next attempt resumes from, chosen when the last one
  // was judged (its `after`); unset before the first attempt.
  std::optional<Checkpoint> resume_;
  // The goodput account (launcher_goodput.cc): the attempts ended, the one being tracked.
  std::vector<AttemptTimeline> timelines_;
  BeatTracker tracker_;
  int tracked_attempt_ = 0;
  double tracked_spawn_ = 0;
  double beats_read_at_ = 0, goodput_written_at_ = 0;
};

}  // namespace ek::launch::detail
