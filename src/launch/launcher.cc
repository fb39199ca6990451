#include "launch/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/parse.h"
#include "core/version.h"
#include "flightrec/analyzer.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"
#include "gate/gate.h"
#include "launch/cause.h"
#include "launch/judge.h"
#include "launch/process.h"
#include "launch/rank_exec.h"
#include "launch/records.h"
#include "launch/session_lock.h"
#include "pack/manifest.h"
#include "run/plan.h"
#include "watch/heartbeat.h"

namespace ek::launch {

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Nonce() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string Hostname() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::string DirName(const std::string& p) {
  auto slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A small record's text; nullopt when it does not exist yet (a record is
// always written whole, by rename: a file that exists is complete).
Result<std::optional<std::string>> ReadIfExists(const std::string& path) {
  if (!FileExists(path)) return std::optional<std::string>();
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return std::optional<std::string>(std::move(text));
}

// Waits until `ready` returns true, polling every 0.2 s; false on timeout or a stop signal.
bool WaitFor(double timeout_s, const std::function<bool()>& ready) {
  double deadline = Now() + timeout_s;
  while (true) {
    if (ready()) return true;
    if (StopSignalReceived() || Now() >= deadline) return false;
    SleepInterruptible(0.2);
  }
}

// A launch key naming a program (launch.torchrun, launch.python): a value with
// a '/' is a path, relative to the run file; a bare name is looked up on PATH,
// as a shell would. "" when that finds no executable.
std::string FindProgram(const run::RunFile& run, const std::string& value) {
  return FindExecutable(value.find('/') != std::string::npos ? run.Resolve(value) : value);
}

// Where FindProgram looked, for the error: "not found on PATH", or the path.
std::string WhereLooked(const run::RunFile& run, const std::string& value) {
  if (value.find('/') == std::string::npos) return "is not on PATH";
  return fmt::format("({}, relative to the run file) is not an executable file", run.Resolve(value));
}

// The reference trainer is the Python module evenkeel.train, shipped in
// evenkeel's Python package: run as PYTHON -m evenkeel.train RUN.toml, found by
// the run's Python wherever this binary lives.
inline constexpr const char* kTrainerModule = "evenkeel.train";

// Asks `python` whether it can import the trainer module (find_spec imports
// the evenkeel package, not the trainer: no torch start-up). NotFound naming
// the python, why and what to install when it cannot.
Status CheckTrainerModule(const std::string& python, const std::string& python_from, const std::string& run_path) {
  SpawnOptions so;
  so.argv = {python, "-c",
             // Finds the package without running its __init__ (which imports torch: seconds),
             // so a dry run or a launch asks in tens of milliseconds; a trainer that then
             // cannot import its dependencies fails its first attempt with the reason.
             "import importlib.util, os, sys\n"
             "spec = importlib.util.find_spec('evenkeel')\n"
             "if spec is None:\n"
             "    raise ModuleNotFoundError(\"No module named 'evenkeel'\")\n"
             "if not any(os.path.exists(os.path.join(d, 'train.py')) for d in spec.submodule_search_locations or []):\n"
             "    print('evenkeel is installed but has no evenkeel.train (an older package)')\n"
             "    sys.exit(3)\n"};
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  auto child = Child::Spawn(so);
  if (!child.ok()) return child.status().WithContext(fmt::format("launch: cannot ask {} for {}", python, kTrainerModule));
  std::string out;
  char buf[4096];
  const double deadline = Now() + 120;
  while (true) {
    struct pollfd p = {child->output_fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
      if (got > 0) {
        if (out.size() < 65536) out.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        break;
      }
    }
    if (Now() > deadline) {
      child->Stop(1);
      return UnavailableError(fmt::format("launch: {} did not answer within 120 s whether it can import {}", python,
                                          kTrainerModule));
    }
  }
  ExitStatus st = child->Wait();
  if (st.ok()) return Status::Ok();
  // The last line says why: "ModuleNotFoundError: No module named 'evenkeel'".
  std::string why = st.ToString();
  size_t end = out.find_last_not_of(" \n\r\t");
  if (end != std::string::npos) {
    size_t start = out.find_last_of('\n', end);
    why = out.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
  }
  return NotFoundError(fmt::format(
      "the reference trainer, the Python module {}, cannot be imported by {} ({}): {}; install evenkeel's Python "
      "package into that environment (pip install EVENKEEL_SOURCE_DIR), point launch.python at a python that has it, "
      "or set launch.trainer in {} to a training script",
      kTrainerModule, python, python_from, why, run_path));
}

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
  std::vector<std::string> skipped;  // newer ones that did not verify: "step-00000020: skipped: <headline>"
  // xxh3-64 of its evenkeel-checkpoint.json when it was verified with checksums (ResumePoint):
  // the trainer, handed it, checks that digest and the files' sizes instead of rehashing.
  std::string manifest_xxh3;
};

Checkpoint NewestCheckpoint(const std::string& ckpt_dir, ckpt::VerifyLevel level, std::vector<std::string>* warnings) {
  Checkpoint c;
  auto found = ckpt::NewestVerified(ckpt_dir, level, warnings);
  if (!found.ok() || !*found) return c;
  c.step = (*found)->step;
  c.path = (*found)->path;
  c.mtime = (*found)->mtime;
  if (auto m = ckpt::ReadCheckpointManifest(c.path); m.ok()) {
    c.final = m->final;
    c.tokens = m->tokens_seen;
  }
  return c;
}

// The checkpoint an attempt resumes from: the newest that verifies with checksums,
// by ckpt::NewestVerified at kFull, which is what the trainer's
// newest_verified(full=True) runs. The launcher hands it to the trainer
// (EVENKEEL_RESUME_FROM), which resumes from exactly it, so what the launcher
// prints is what happens. An error (the checkpoint folder cannot be read) is
// returned: guessing "the start" would throw the run's progress away.
Result<Checkpoint> ResumePoint(const std::string& ckpt_dir) {
  Checkpoint c;
  auto found = ckpt::NewestVerified(ckpt_dir, ckpt::VerifyLevel::kFull, &c.skipped);
  if (!found.ok()) return found.status().WithContext("launch: cannot choose the checkpoint to resume from");
  if (!*found) return c;
  c.step = (*found)->step;
  c.path = (*found)->path;
  c.mtime = (*found)->mtime;
  auto m = ckpt::ReadCheckpointManifest(c.path);
  if (!m.ok()) return m.status().WithContext("launch: cannot choose the checkpoint to resume from");
  c.final = m->final;
  c.tokens = m->tokens_seen;
  // The manifest lists every file's size and hash; its digest names what was verified.
  uint64_t size = 0;
  auto digest = HashFile(c.path + "/evenkeel-checkpoint.json", &size);
  if (!digest.ok()) return digest.status().WithContext("launch: cannot choose the checkpoint to resume from");
  c.manifest_xxh3 = fmt::format("{:016x}", *digest);
  return c;
}

// "checkpoint step 10 (step-00000020: skipped: checksum mismatch ...)", "the start".
std::string DescribeResume(const Checkpoint& c) {
  std::string s = c.step >= 0 ? fmt::format("checkpoint step {}", c.step) : "the start";
  if (!c.skipped.empty()) s += fmt::format(" ({})", fmt::join(c.skipped, "; "));
  return s;
}

struct AttemptSummary {
  int attempt = 0;
  double start = 0, end = 0;
  Outcome outcome = Outcome::kFailed;
  std::string fr_verdict;  // the flight recorder's line; "" when the attempt did not fail
  bool fr_conclusive = false;
  int64_t checkpoint_before = -1, checkpoint_after = -1;
  int64_t step_reached = -1;
  Decision decision;
  std::vector<NodeRecord> nodes;
  double gpu_hours = 0, gpu_hours_lost = 0;
  std::vector<RankCause> causes;  // every node's failed ranks, in rank order
  Hang hang;                      // ranks that stopped progressing (judge.h FindHang); none: empty
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

std::string HangToJson(const Hang& h) {
  if (h.ranks.empty()) return "null";
  return fmt::format("{{\"ranks\": [{}], \"step\": {}, \"summary\": {}}}", fmt::join(h.ranks, ", "), h.step,
                     JsonString(h.line));
}

std::string CausesToJson(const std::vector<RankCause>& causes) {
  std::string o = "[";
  for (size_t i = 0; i < causes.size(); ++i) o += (i ? ", " : "") + RankCauseToJson(causes[i]);
  return o + "]";
}

std::string AttemptToJson(const AttemptSummary& a) {
  std::string o = fmt::format(
      "{{\"attempt\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"seconds\": {:.1f}, \"outcome\": {}, "
      "\"step_reached\": {}, \"checkpoint_before\": {}, \"checkpoint_after\": {}, \"flight_recorder\": "
      "{{\"verdict\": {}, \"conclusive\": {}}}, \"gpu_hours\": {:.4f}, \"gpu_hours_lost\": {:.4f}, \"decision\": ",
      a.attempt, a.start, a.end, a.end - a.start, JsonString(OutcomeName(a.outcome)), a.step_reached, a.checkpoint_before,
      a.checkpoint_after, JsonString(a.fr_verdict), a.fr_conclusive ? "true" : "false", a.gpu_hours, a.gpu_hours_lost);
  std::string d = DecisionToJson(a.attempt, a.decision);
  while (!d.empty() && d.back() == '\n') d.pop_back();
  o += d + ", \"causes\": " + CausesToJson(a.causes) + ", \"hang\": " + HangToJson(a.hang) + ", \"nodes\": [";
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    std::string n = NodeRecordToJson(a.nodes[i]);
    while (!n.empty() && n.back() == '\n') n.pop_back();
    o += (i ? ", " : "") + n;
  }
  o += "]}";
  return o;
}

// `json` (an object) with "earlier_launch" and "inferred" first: how summary.json lists an attempt.
std::string Flagged(const std::string& json, bool earlier, bool inferred) {
  std::string o = json;
  if (!o.empty() && o.front() == '{') {
    o.insert(1, fmt::format("\"earlier_launch\": {}, \"inferred\": {}, ", earlier ? "true" : "false",
                            inferred ? "true" : "false"));
  }
  return o;
}

double ModifiedAt(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

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
  // node 0's choice, handed to every rank (EVENKEEL_RESUME_FROM and
  // EVENKEEL_RESUME_MANIFEST_XXH3), the same on every node.
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
  AttemptSummary JudgeAttempt(int attempt, const std::vector<NodeFacts>& nodes, const std::vector<NodeRecord>& records,
                              const Checkpoint& before, int restarts, int* no_progress);
  std::string Summary(int exit_code, const std::string& outcome) const;
  // Node 0: the session's attempts before `first_attempt` (earlier launchers', one
  // that died among them), for the summary's totals and list.
  void ReadEarlierAttempts(int first_attempt);
  // An earlier attempt without attempt.json (its launcher died): its times from its last records.
  EarlierAttempt ReconstructAttempt(int attempt, const std::vector<ckpt::CheckpointEntry>& checkpoints);
  void StartAgent();
  // A coordination record, written whole through o_.files; an error names it.
  Status WriteRecord(const std::string& path, std::string_view data) const;
  // A record the launch cannot go on without failed: stop what runs, exit 74.
  Status Fail(Status st);

  const LaunchOptions& o_;
  Say say_;
  run::RunFile run_;
  Cluster cluster_;
  Paths paths_;
  std::string torchrun_, python_;
  std::vector<std::string> trainer_;  // the trainer's command before RUN.toml: PYTHON SCRIPT, or PYTHON -m evenkeel.train
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
};

Status Launcher::Prepare() {
  // Absolute, so that records, ranks and the agent agree whatever their working directory.
  std::string path = o_.run_path;
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) path = buf;
  EK_ASSIGN_OR_RETURN(run_, run::ReadRunFile(path));
  EK_ASSIGN_OR_RETURN(cluster_, ResolveCluster(run_, o_.node_rank, o_.env));
  if (run_.checkpoint_dir.empty()) {
    return InvalidArgumentError(fmt::format("{}: checkpoint.dir is needed to launch (checkpoints and attempt records)",
                                            run_.path));
  }
  paths_.ckpt_dir = run_.Resolve(run_.checkpoint_dir);
  std::string root = run_.launch_dir.empty() ? paths_.ckpt_dir + "/launch" : run_.Resolve(run_.launch_dir);
  paths_.session = root + "/" + cluster_.run_id;
  paths_.heartbeat = run_.heartbeat_dir.empty() ? fmt::format("{}/heartbeat/node-{}", paths_.session, cluster_.node_rank)
                                                : run_.Resolve(run_.heartbeat_dir);
  torchrun_ = FindProgram(run_, run_.launch_torchrun);
  if (torchrun_.empty()) {
    return NotFoundError(fmt::format("{}: launch.torchrun '{}' {} (install PyTorch in the environment, or set launch.torchrun)",
                                     run_.path, run_.launch_torchrun, WhereLooked(run_, run_.launch_torchrun)));
  }
  std::string python_from;
  if (!run_.launch_python.empty()) {
    python_ = FindProgram(run_, run_.launch_python);
    if (python_.empty()) {
      return NotFoundError(fmt::format("{}: launch.python '{}' {}", run_.path, run_.launch_python,
                                       WhereLooked(run_, run_.launch_python)));
    }
    python_from = "launch.python";
  } else {
    // A virtual environment's bin/ holds both; torchrun's own shebang names that python.
    python_ = FindExecutable(DirName(torchrun_) + "/python");
    python_from = "the python beside " + torchrun_;
    if (python_.empty()) {
      python_ = FindExecutable("python3");
      python_from = "python3 on PATH, none beside " + torchrun_;
    }
    if (python_.empty()) {
      return NotFoundError(fmt::format("{}: no python beside launch.torchrun {} and no python3 on PATH (set launch.python)",
                                       run_.path, torchrun_));
    }
  }
  if (!run_.launch_trainer.empty()) {
    std::string script = run_.Resolve(run_.launch_trainer);
    if (!FileExists(script)) {
      return NotFoundError(fmt::format("{}: launch.trainer '{}': {} does not exist", run_.path, run_.launch_trainer, script));
    }
    trainer_ = {python_, script};
  } else {
    EK_RETURN_IF_ERROR(CheckTrainerModule(python_, python_from, run_.path));
    trainer_ = {python_, "-m", kTrainerModule};
  }
  if (!run_.pack_dir.empty()) {
    if (auto schedule = run::ScheduleForRun(run_); schedule.ok()) {
      plan_ = std::move(*schedule);
      has_plan_ = true;
    }
  }
  if (o_.dry_run) return Status::Ok();
  EK_RETURN_IF_ERROR(MakeDirs(paths_.session, o_.files));
  EK_RETURN_IF_ERROR(MakeDirs(paths_.heartbeat, o_.files));
  return Status::Ok();
}

Status Launcher::WriteRecord(const std::string& path, std::string_view data) const {
  Status st = WriteFileAtomic(path, data, o_.files);
  return st.ok() ? st : st.WithContext("launch");  // the error names the file and the operation
}

Status Launcher::Fail(Status st) {
  // The ranks never run while a record is written (before torchrun starts, or after it
  // ended); the agent may. The other nodes see no record: they time out and stop.
  if (agent_) agent_->Stop(5);
  agent_.reset();
  return Status(StatusCode::kIoError, st.message());
}

std::vector<std::pair<std::string, std::string>> Launcher::RankEnv(int attempt) const {
  std::string fr = paths_.Attempt(attempt) + "/fr/rank_";
  std::string entries = std::to_string(run_.flight_recorder_entries);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  int omp = run_.omp_threads > 0 ? run_.omp_threads : std::max(1, static_cast<int>(cores) / run_.gpus_per_node);
  return {
      // The flight recorder the report needed to name the deadlock: on, dumped on a timeout, per attempt.
      // (torch >= 2.8 names; the TORCH_NCCL_* spellings are deprecated aliases.)
      {"TORCH_FR_BUFFER_SIZE", entries},
      {"TORCH_FR_DUMP_ON_TIMEOUT", "1"},
      {"TORCH_FR_DUMP_TEMP_FILE", fr},
      // A failed or timed-out collective ends the process instead of hanging it.
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"},
      {"EVENKEEL_HEARTBEAT_DIR", paths_.heartbeat},
      {"EVENKEEL_RUN_ID", cluster_.run_id},
      {"EVENKEEL_ATTEMPT", std::to_string(attempt)},
      {"OMP_NUM_THREADS", std::to_string(omp)},
      {"PYTHONUNBUFFERED", "1"},
  };
}

Result<bool> Launcher::Gate(int* first_attempt, int* exit_code) {
  gate::GateEnv genv = gate::RealGateEnv();
  genv.files = o_.files;
  auto overlay = RankEnv(1);
  auto base = genv.getenv;
  genv.getenv = [overlay, base](const std::string& k) -> std::optional<std::string> {
    for (const auto& [key, v] : overlay) {
      if (key == k) return v;
    }
    return base(k);
  };
  const bool multi = run_.nodes > 1;
  say_(fmt::format("launch: gate ({}{})", multi ? fmt::format("node {} of {}", cluster_.node_rank, run_.nodes) : "one node",
                   cluster_.slurm_job_id.empty() ? "" : ", SLURM job " + cluster_.slurm_job_id));
  auto part = gate::RunGate(run_, multi ? cluster_.node_rank : -1, genv);
  if (!part.ok()) {
    say_("launch: gate error: " + part.status().message());
    *exit_code = kExitGateRefused;
    return false;
  }
  const std::string gate_dir = paths_.session + "/gate";
  const std::string verdict_path = gate_dir + "/verdict.json";
  if (Status st = MakeDirs(gate_dir, o_.files); !st.ok()) return st.WithContext("launch: cannot make " + gate_dir);
  std::string verdict_text;
  int next = 1;
  if (cluster_.node_rank == 0) {
    for (const auto& name : ListNames(paths_.session)) {
      if (name.starts_with("attempt-")) next = std::max(next, std::atoi(name.c_str() + 8) + 1);
    }
  }
  if (!multi) {
    gate::GateReport rep = *part;
    if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", rep, o_.files); !st.ok()) {
      say_("launch: warning: " + st.message());
    }
    say_(gate::GateReportToText(rep));
    bool fail = rep.overall() == gate::Verdict::kFail;
    GateVerdict verdict;
    verdict.overall = rep.overall();
    verdict.accepted = fail && o_.accept_gate_fail;
    verdict.first_attempt = next;
    EK_RETURN_IF_ERROR(WriteRecord(verdict_path, GateVerdictToJson(verdict)));
    if (fail && !o_.accept_gate_fail) {
      say_("launch: the gate refused the run: nothing was started");
      *exit_code = kExitGateRefused;
      return false;
    }
    if (fail) say_("launch: warning: gate FAIL accepted (--accept-gate-fail): starting an unsafe run as asked");
    *first_attempt = next;
    return true;
  }
  // Several nodes: parts and the verdict travel through the session directory.
  std::string part_json = gate::GateReportToJson(*part);
  // Tag the part with this launcher's nonce and start time.
  part_json.insert(1, fmt::format("\n  \"launch_nonce\": {}, \"launch_started\": {:.3f},", JsonString(nonce_), started_));
  const std::string my_part = fmt::format("{}/node-{}.json", gate_dir, cluster_.node_rank);
  if (cluster_.node_rank == 0) {
    // A new session: no verdict, no part from before this launch.
    // A stale part left behind would be merged as this launch's. Only the records
    // themselves go: another node may be writing its part right now, and removing
    // its temp file would fail that node's rename (it rewrites a part removed here).
    for (const auto& name : ListNames(gate_dir)) {
      const bool record = name == "verdict.json" || (name.starts_with("node-") && name.ends_with(".json"));
      if (!record) continue;
      if (Status st = o_.files->RemoveFile(gate_dir + "/" + name); !st.ok()) {
        return st.WithContext("launch: cannot clear the previous launch's gate record");
      }
    }
    EK_RETURN_IF_ERROR(WriteRecord(my_part, part_json));
    std::map<int, gate::GateReport> parts;
    std::map<int, std::string> nonces;
    std::vector<std::string> unreadable;  // parts that exist but cannot be read: "file: field: what"
    std::map<int, bool> done;
    bool all = WaitFor(run_.gate_timeout_s, [&] {
      for (int n = 0; n < run_.nodes; ++n) {
        if (done.count(n)) continue;
        std::string p = fmt::format("{}/node-{}.json", gate_dir, n);
        auto text = ReadIfExists(p);
        if (text.ok() && !*text) continue;  // not written yet
        Result<gate::GateReport> rep = text.ok() ? gate::GateReportFromJson(**text, p) : text.status();
        Result<std::string> nonce = rep.ok() ? GatePartNonce(**text, p) : rep.status();
        done[n] = true;
        if (!nonce.ok()) {
          unreadable.push_back(nonce.status().message());
          continue;
        }
        parts[n] = *rep;
        nonces[n] = *nonce;
      }
      return static_cast<int>(done.size()) == run_.nodes;
    });
    std::vector<gate::GateReport> reps;
    for (auto& [n, r] : parts) reps.push_back(r);
    gate::Verdict overall = gate::Verdict::kFail;
    std::string reasons;
    std::vector<int64_t> missing;
    for (int n = 0; n < run_.nodes; ++n) {
      if (!done.count(n)) missing.push_back(n);
    }
    std::string text;
    if (!unreadable.empty()) {
      reasons = fmt::format("unreadable gate part(s): {}", fmt::join(unreadable, " | "));
    } else if (!all) {
      reasons = fmt::format("node(s) {} did not report a gate part within {:.0f} s{}", CompactRanges(missing),
                            run_.gate_timeout_s, StopSignalReceived() ? " (stopped)" : "");
    } else {
      auto merged = gate::MergeGateReports(reps, &run_);
      if (!merged.ok()) {
        reasons = merged.status().message();
      } else {
        if (!has_plan_ && static_cast<int>(merged->rank_blocks.size()) == run_.world()) {
          std::vector<uint64_t> blocks;
          for (const auto& [rank, count] : merged->rank_blocks) blocks.push_back(count);
          if (auto schedule = run::MakeSchedule(run_, blocks); schedule.ok()) {
            plan_ = std::move(*schedule);
            has_plan_ = true;
          }
        }
        overall = merged->overall();
        text = gate::GateReportToText(*merged);
        for (const auto& c : merged->checks) {
          if (c.verdict == gate::Verdict::kFail) reasons += (reasons.empty() ? "" : " | ") + c.name + ": " + c.reason;
        }
        if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", *merged, o_.files); !st.ok()) {
          say_("launch: warning: " + st.message());
        }
      }
    }
    bool fail = overall == gate::Verdict::kFail;
    verdict_text = GateVerdictToJson({overall, fail && o_.accept_gate_fail, next, reasons, text, nonces});
    EK_RETURN_IF_ERROR(WriteRecord(verdict_path, verdict_text));
  } else {
    Status written;
    bool got = WaitFor(run_.gate_timeout_s + 30, [&] {
      auto text = ReadFile(my_part);
      if (!text.ok() || text->find(nonce_) == std::string::npos) {
        written = WriteRecord(my_part, part_json);
        if (!written.ok()) return true;  // node 0 will not hear from this node: stop now
      }
      auto v = ReadFile(verdict_path);
      if (!v.ok() || v->find(JsonString(nonce_)) == std::string::npos) return false;
      verdict_text = *v;
      return true;
    });
    EK_RETURN_IF_ERROR(written);
    if (!got) {
      say_(fmt::format("launch: no gate verdict from node 0 within {:.0f} s: nothing was started", run_.gate_timeout_s + 30));
      *exit_code = kExitGateRefused;
      return false;
    }
  }
  auto read = GateVerdictFromJson(verdict_text, verdict_path);
  if (read.ok() && multi) {
    auto mine = read->parts.find(cluster_.node_rank);
    if (mine == read->parts.end() || mine->second != nonce_) {
      read = CorruptError(mine == read->parts.end()
                              ? fmt::format("{}: parts.{}: missing (the verdict does not name this node's part)",
                                            verdict_path, cluster_.node_rank)
                              : fmt::format("{}: parts.{}: {} is not this launcher's nonce {}", verdict_path,
                                            cluster_.node_rank, JsonString(mine->second), JsonString(nonce_)));
    }
  }
  if (!read.ok()) {
    say_("launch: unreadable gate verdict: " + read.status().message());
    *exit_code = kExitBadInput;
    return false;
  }
  const GateVerdict& v = *read;
  if (!v.text.empty()) say_(v.text);
  if (v.overall == gate::Verdict::kFail) {
    say_("launch: gate FAIL: " + v.reasons);
    if (v.accepted) {
      say_("launch: warning: gate FAIL accepted (--accept-gate-fail): starting an unsafe run as asked");
    } else {
      say_("launch: the gate refused the run on every node: nothing was started");
      *exit_code = kExitGateRefused;
      return false;
    }
  }
  *first_attempt = v.first_attempt;
  return true;
}

Result<bool> Launcher::Lock(std::string* refused) {
  const std::string path = LockPath(paths_.session, run_.nodes, cluster_.node_rank);
  LockHolder me{Hostname(), static_cast<int64_t>(::getpid()), started_, cluster_.run_id, cluster_.node_rank};
  auto lock = SessionLock::Acquire(path, me, o_.files);
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kUnavailable) return lock.status();
    *refused = "launch: " + lock.status().message();
    return false;
  }
  lock_ = std::move(*lock);
  if (lock_->stale()) {
    say_(fmt::format("launch: taking over the stale lock {}: its holder, {}, is gone (it died without releasing it)",
                     path, DescribeHolder(*lock_->stale())));
  } else if (!lock_->stale_unreadable().empty()) {
    say_(fmt::format("launch: taking over the lock {}, left by a launcher that died while writing it ({})", path,
                     lock_->stale_unreadable()));
  }
  return true;
}

void Launcher::ReleaseLock() {
  if (!lock_) return;
  if (Status st = lock_->Release(); !st.ok()) say_("launch: warning: " + st.message());
  lock_.reset();
}

void Launcher::StartAgent() {
  if (!o_.agent) return;
  SpawnOptions so;
  so.argv = {o_.evenkeel_exe, "agent", run_.path, "--heartbeat-dir", paths_.heartbeat, "--listen", o_.agent_listen};
  if (!cluster_.hosts.empty()) so.argv.insert(so.argv.end(), {"--host", cluster_.hosts[cluster_.node_rank]});
  so.output_path = paths_.session + fmt::format("/agent-node-{}.log", cluster_.node_rank);
  so.parent_death_signal = SIGKILL;
  auto c = Child::Spawn(so);
  if (!c.ok()) {
    say_("launch: warning: agent not started: " + c.status().message());
    return;
  }
  say_(fmt::format("launch: agent on {} (pid {}, log {})", o_.agent_listen, c->pid(), so.output_path));
  agent_ = std::move(*c);
}

Result<ResumeChoice> Launcher::ChooseResume(int attempt, Checkpoint* before) {
  if (!resume_) {
    EK_ASSIGN_OR_RETURN(Checkpoint pick, ResumePoint(paths_.ckpt_dir));
    resume_ = pick;
  }
  *before = *resume_;
  resume_.reset();
  ResumeChoice c;
  if (std::find(o_.extra_args.begin(), o_.extra_args.end(), "--no-resume") != o_.extra_args.end()) {
    c.where = "from the start, as --no-resume asks";
  } else if (before->step >= 0) {
    c = {before->path, before->step, before->manifest_xxh3, "resuming from " + DescribeResume(*before)};
  } else {
    c.where = "from " + DescribeResume(*before);
  }
  // Written before torchrun starts, so a node whose ranks join the rendezvous has read it.
  const std::string dir = paths_.Attempt(attempt);
  if (Status st = MakeDirs(dir, o_.files); !st.ok()) {
    return Status(StatusCode::kIoError, st.WithContext("launch: cannot make " + dir).message());
  }
  if (Status st = WriteRecord(dir + "/resume.json", ResumeChoiceToJson(attempt, c)); !st.ok()) {
    return Status(StatusCode::kIoError, st.message());
  }
  return c;
}

bool Launcher::FollowResume(int attempt, ResumeChoice* choice, int* exit_code) {
  const std::string p = paths_.Attempt(attempt) + "/resume.json";
  // Node 0 verifies the checkpoint with checksums before it writes this: minutes for a big one.
  const double timeout = 600 + run_.stop_grace_s;
  std::optional<Status> bad;
  bool got = WaitFor(timeout, [&] {
    auto text = ReadIfExists(p);
    if (text.ok() && !*text) return false;  // not written yet
    auto read = text.ok() ? ResumeChoiceFromJson(**text, p, attempt) : Result<ResumeChoice>(text.status());
    if (read.ok()) {
      *choice = *read;
    } else {
      bad = read.status();
    }
    return true;
  });
  if (bad) {
    // Node 0's choice cannot be followed, and no other may be made here: stop, as for any bad input.
    say_("launch: unreadable resume decision: " + bad->message());
    *exit_code = kExitBadInput;
    return false;
  }
  if (!got) {
    say_(fmt::format("launch: node 0 handed no checkpoint for attempt {} within {:.0f} s ({}): nothing was started",
                     attempt, timeout, p));
    *exit_code = StopSignalReceived() ? kExitCancelled : kExitError;
    return false;
  }
  return true;
}

Result<NodeRecord> Launcher::RunAttempt(int attempt, const ResumeChoice& resume) {
  NodeRecord rec;
  rec.node = cluster_.node_rank;
  rec.host = Hostname();
  const std::string dir = paths_.Attempt(attempt);
  // The ranks' records and dumps go here: no attempt without it.
  if (Status st = MakeDirs(dir + "/fr", o_.files); !st.ok()) return st.WithContext("launch: cannot make " + dir + "/fr");
  std::vector<std::string> argv = {torchrun_, "--nnodes", std::to_string(run_.nodes), "--nproc-per-node",
                                   std::to_string(run_.gpus_per_node)};
  if (cluster_.standalone) {
    argv.push_back("--standalone");
  } else {
    argv.insert(argv.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", cluster_.rdzv_endpoint, "--rdzv-id",
                             fmt::format("{}-{}", cluster_.run_id, attempt)});
  }
  argv.insert(argv.end(), {"--max-restarts", "0", "--monitor-interval", "1", "--no-python", o_.evenkeel_exe,
                           "launch-rank", "--attempt-dir", dir, "--node-rank", std::to_string(cluster_.node_rank),
                           "--nproc-per-node", std::to_string(run_.gpus_per_node), "--"});
  argv.insert(argv.end(), trainer_.begin(), trainer_.end());
  argv.push_back(run_.path);
  argv.insert(argv.end(), o_.extra_args.begin(), o_.extra_args.end());
  SpawnOptions so;
  so.argv = argv;
  so.env = RankEnv(attempt);
  so.env.push_back({"EVENKEEL_RESUME_FROM", resume.resume_from});
  if (!resume.manifest_xxh3.empty()) so.env.push_back({"EVENKEEL_RESUME_MANIFEST_XXH3", resume.manifest_xxh3});
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  const std::string log_path = fmt::format("{}/torchrun-node-{}.log", dir, cluster_.node_rank);
  // A log that cannot be opened is not worth failing the attempt for.
  std::unique_ptr<WritableFile> log;
  if (auto opened = o_.files->NewAppendableFile(log_path); opened.ok()) {
    log = std::move(opened).value();
  } else {
    say_("launch: warning: torchrun's output is not logged: " + opened.status().message());
  }
  EK_RETURN_IF_ERROR(WriteRecord(dir + fmt::format("/command-node-{}.txt", cluster_.node_rank),
                                 fmt::format("{}\n", fmt::join(argv, " "))));
  rec.start = Now();
  auto child = Child::Spawn(so);
  if (!child.ok()) {
    rec.end = Now();
    rec.error = child.status().message();
    say_("launch: cannot start torchrun: " + rec.error);
    return rec;
  }
  std::string pending;
  char buf[65536];
  bool pipe_open = true;
  auto flush_lines = [&](bool all) {
    size_t start = 0;
    while (true) {
      size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) break;
      std::string line = pending.substr(start, nl - start);
      if (line.starts_with("[rank ") || line.starts_with("[evenfix]")) say_(line);
      start = nl + 1;
    }
    pending.erase(0, start);
    if (all && !pending.empty()) {
      if (pending.starts_with("[rank ")) say_(pending);
      pending.clear();
    }
  };
  std::optional<ExitStatus> st;
  while (!st) {
    if (int sig = StopSignalReceived()) {
      say_(fmt::format("launch: {} received: stopping the ranks (grace {:.0f} s)", sigabbrev_np(sig) ? std::string("SIG") + sigabbrev_np(sig) : std::string("a signal"),
                       run_.stop_grace_s));
      rec.cancelled = true;
      st = child->Stop(run_.stop_grace_s);
      break;
    }
    if (pipe_open) {
      struct pollfd p = {child->output_fd(), POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
        if (got > 0) {
          if (log) (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
          pending.append(buf, static_cast<size_t>(got));
          flush_lines(false);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          pipe_open = false;
        }
      }
    } else {
      SleepInterruptible(0.2);
    }
    st = child->Poll();
  }
  // Whatever is left in the pipe.
  while (pipe_open) {
    ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
    if (got <= 0) break;
    if (log) (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
    pending.append(buf, static_cast<size_t>(got));
  }
  flush_lines(true);
  if (log) (void)log->Close();
  rec.end = Now();
  rec.torchrun_code = st->code;
  rec.torchrun_signal = st->signal;
  const int first_rank = cluster_.node_rank * run_.gpus_per_node, end_rank = first_rank + run_.gpus_per_node;
  // A wrapper torchrun left behind (torchrun killed, or gone first) stops its trainer within
  // kStopGraceS and then writes its end: wait for it (even after a stop signal) before inferring one.
  const double wait_until = Now() + kStopGraceS + 5;
  while (Now() < wait_until) {
    bool pending = false;
    for (int r = first_rank; r < end_rank && !pending; ++r) {
      std::string p = fmt::format("{}/rank-{}.json", dir, r);
      auto text = ReadIfExists(p);
      if (!text.ok() || !*text) continue;
      auto rr = RankRecordFromJson(**text, p);
      pending = rr.ok() && rr->status != "exited" && watch::ProcessAlive(rr->pid);
    }
    if (!pending) break;
    ::usleep(200000);
  }
  // This attempt's heartbeats (an older beat is an earlier attempt's): how far each rank got, and when.
  std::vector<std::string> problems;
  std::map<int, watch::Heartbeat> beats;
  for (const auto& hb : watch::ReadHeartbeatDir(paths_.heartbeat, &problems)) {
    rec.step_reached = std::max<int64_t>(rec.step_reached, hb.step);
    if (hb.rank >= first_rank && hb.rank < end_rank && hb.time >= rec.start - 1) beats[hb.rank] = hb;
  }
  for (const auto& [r, hb] : beats) rec.progress.push_back({r, hb.step, hb.phase, hb.phase_step, hb.time, hb.pid});
  for (int r = first_rank; r < end_rank; ++r) {
    std::string p = fmt::format("{}/rank-{}.json", dir, r);
    auto text = ReadIfExists(p);
    const std::string log = fmt::format("{}/rank-{}.log", dir, r);
    if (text.ok() && !*text) {
      // No record at all: the rank never started, unless it left a log or a beat.
      if (!beats.count(r) && !FileExists(log)) continue;
      RankRecord x;
      x.rank = r;
      x.local_rank = r - first_rank;
      x.node_rank = cluster_.node_rank;
      x.host = rec.host;
      x.pid = beats.count(r) ? beats[r].pid : 0;
      x.start = rec.start;
      x.log = log;
      x.status = "missing";
      x.note = "its wrapper left no record; start and end are torchrun's, the trainer is taken as killed with its wrapper";
      text = std::optional<std::string>(RankRecordToJson(x));
    }
    auto rr = text.ok() ? RankRecordFromJson(**text, p) : Result<RankRecord>(text.status());
    if (!rr.ok()) {
      say_("launch: warning: rank record left out: " + rr.status().message());
      continue;
    }
    if (rr->status != "exited") {
      // The wrapper was killed before its trainer ended: torchrun SIGKILLs the wrapper's
      // process group (the trainer is in it) 30 s after its SIGTERM, and a trainer outlives
      // a killed wrapper by no more than its parent-death signal, SIGKILL.
      if (rr->status != "missing") {
        rr->note = fmt::format("its wrapper was killed while its record said \"{}\"{}: the trainer died with it "
                               "(SIGKILL); the end is torchrun's",
                               rr->status, rr->stop_signal ? fmt::format(" (stop signal {} at {:.3f})", rr->stop_signal,
                                                                         rr->stop_time)
                                                           : "");
      }
      rr->inferred = true;
      rr->exit_code = -1;
      rr->signal = SIGKILL;
      rr->end = rec.end;
      // The rank's own record says so too, marked as the launcher's inference.
      EK_RETURN_IF_ERROR(WriteRecord(p, RankRecordToJson(*rr)));
    }
    rec.ranks.push_back(*rr);
  }
  // Why each failed rank failed: its log's first error, else its exit status or signal.
  for (const auto& rr : rec.ranks) {
    ExitStatus es{rr.exit_code, rr.signal};
    if (es.ok()) continue;
    std::string cause;
    if (auto log = ReadIfExists(rr.log); log.ok() && *log) cause = FirstError(**log, rr.rank);
    if (cause.empty()) cause = es.ToString() + (rr.inferred ? " (inferred: its wrapper was killed first)" : "");
    rec.causes.push_back({rr.rank, cause});
  }
  return rec;
}

AttemptSummary Launcher::JudgeAttempt(int attempt, const std::vector<NodeFacts>& nodes,
                                      const std::vector<NodeRecord>& records, const Checkpoint& before, int restarts,
                                      int* no_progress) {
  AttemptSummary a;
  a.attempt = attempt;
  a.nodes = records;
  a.start = 1e300;
  for (const auto& n : records) {
    a.causes.insert(a.causes.end(), n.causes.begin(), n.causes.end());
    a.start = std::min(a.start, n.start);
    a.end = std::max(a.end, n.end);
    a.step_reached = std::max(a.step_reached, n.step_reached);
  }
  if (records.empty()) a.start = a.end = Now();
  // The newest checkpoint that verifies with checksums: progress, done, and the next attempt's resume point.
  Checkpoint after;
  if (auto pick = ResumePoint(paths_.ckpt_dir); pick.ok()) {
    after = *pick;
    resume_ = after;
  } else {
    say_("launch: warning: " + pick.status().message());  // the next attempt asks again, and stops on it
  }
  auto facts_of = [](const Checkpoint& c) { return CheckpointFacts{c.step, c.final, c.path}; };
  JudgeFacts f;
  f.attempt = attempt;
  f.nodes = nodes;
  f.planned_steps = has_plan_ ? static_cast<int64_t>(plan_.total_steps) : 0;
  f.before = facts_of(before);
  f.after = facts_of(after);
  f.verified = f.after;  // `after` is verified with checksums
  f.skipped = after.skipped;
  f.restarts = restarts;
  f.no_progress = *no_progress;
  f.max_restarts = run_.max_restarts;
  f.max_no_progress = run_.max_no_progress;
  f.backoff_s = run_.retry_backoff_s;
  f.backoff_max_s = run_.retry_backoff_max_s;
  // Why it failed, if it did: the flight recorder, as `evenkeel fr` reads it.
  const std::string fr_dir = paths_.Attempt(attempt) + "/fr";
  if (ListNames(fr_dir).empty()) {
    f.fr = FrVerdict::kNoDumps;
    f.fr_line = "no flight-recorder dumps";
  } else {
    auto load = flightrec::LoadDumps(fr_dir, {});
    if (load.ok() && !load->dumps.empty()) {
      flightrec::Analysis analysis = flightrec::Analyze(load->dumps);
      f.fr = flightrec::Conclusive(analysis) ? FrVerdict::kConclusive : FrVerdict::kUndecided;
      f.fr_line = flightrec::VerdictLine(*load, analysis);
      for (const auto& d : load->dumps) {
        int64_t last = -1;
        for (const auto& e : d.entries) last = std::max(last, e.collective_seq_id);
        if (d.rank >= 0 && d.rank <= std::numeric_limits<int>::max()) f.fr_dumps[static_cast<int>(d.rank)] = last;
      }
    } else {
      f.fr = FrVerdict::kUnreadable;
      f.fr_line = load.ok() ? "no readable flight-recorder dump" : load.status().message();
    }
  }
  Judgement j = Judge(f);
  *no_progress = j.no_progress;
  a.outcome = j.outcome;
  a.decision = j.decision;
  a.hang = j.hang;
  a.checkpoint_before = before.step;
  a.checkpoint_after = after.step;
  const int world = run_.world();
  a.gpu_hours = world * std::max(0.0, a.end - a.start) / 3600;
  if (j.outcome == Outcome::kFailed) {
    a.fr_verdict = f.fr_line;
    a.fr_conclusive = f.fr == FrVerdict::kConclusive;
    double saved_at = after.step > before.step ? std::max(a.start, after.mtime) : a.start;
    a.gpu_hours_lost = world * std::max(0.0, a.end - saved_at) / 3600;
  }
  return a;
}

void Launcher::ReadEarlierAttempts(int first_attempt) {
  std::vector<ckpt::CheckpointEntry> checkpoints;
  if (auto list = ckpt::ListCheckpoints(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure); list.ok()) checkpoints = *list;
  for (const auto& name : ListNames(paths_.session)) {
    if (!name.starts_with("attempt-")) continue;
    auto n = ParseIntIn(std::string_view(name).substr(8), 1, std::numeric_limits<int>::max());
    if (!n || *n >= first_attempt) continue;
    const std::string path = fmt::format("{}/{}/attempt.json", paths_.session, name);
    auto text = ReadIfExists(path);
    if (text.ok() && *text) {
      auto account = AttemptAccountFromJson(**text, path);
      if (account.ok()) {
        EarlierAttempt e{account->attempt, account->start, account->end, account->gpu_hours, account->gpu_hours_lost,
                         false, account->causes, Flagged(account->json, true, false)};
        earlier_.push_back(std::move(e));
        continue;
      }
      // A record that cannot be read is not counted twice: its attempt is reconstructed instead, and said.
      say_("launch: warning: " + account.status().message() + "; counting the attempt from its other records");
    }
    earlier_.push_back(ReconstructAttempt(static_cast<int>(*n), checkpoints));
  }
  std::sort(earlier_.begin(), earlier_.end(), [](const EarlierAttempt& a, const EarlierAttempt& b) { return a.attempt < b.attempt; });
  for (const auto& e : earlier_) {
    if (e.inferred) {
      say_(fmt::format("launch: attempt {} of an earlier launch has no attempt.json (its launcher died): counted as "
                       "{:.0f} s from its last records ({:.4f} GPU-hours, inferred)", e.attempt, e.end - e.start,
                       e.gpu_hours));
    }
  }
}

EarlierAttempt Launcher::ReconstructAttempt(int attempt, const std::vector<ckpt::CheckpointEntry>& checkpoints) {
  const std::string dir = paths_.Attempt(attempt);
  EarlierAttempt e;
  e.attempt = attempt;
  e.inferred = true;
  std::string first_from, last_from;
  auto widen = [&](double t, const std::string& from) {
    if (t <= 0) return;
    if (e.start == 0 || t < e.start) {
      e.start = t;
      first_from = from;
    }
    if (t > e.end) {
      e.end = t;
      last_from = from;
    }
  };
  std::vector<std::string> ranks;
  std::map<int, bool> have_cause;
  for (const auto& name : ListNames(dir)) {
    const std::string p = dir + "/" + name;
    if (name.starts_with("node-") && name.ends_with(".json")) {
      auto text = ReadIfExists(p);
      auto rec = text.ok() && *text ? NodeRecordFromJson(**text, p) : Result<NodeRecord>(CorruptError(p + ": unreadable"));
      if (!rec.ok()) {
        say_("launch: warning: " + rec.status().message());
        continue;
      }
      widen(rec->start, name + " start");
      widen(rec->end, name + " end");
      for (const auto& c : rec->causes) {
        e.causes.push_back(c);
        have_cause[c.rank] = true;
      }
    } else if (name.starts_with("rank-") && name.ends_with(".json")) {
      auto text = ReadIfExists(p);
      auto rr = text.ok() && *text ? RankRecordFromJson(**text, p) : Result<RankRecord>(CorruptError(p + ": unreadable"));
      if (!rr.ok()) {
        say_("launch: warning: " + rr.status().message());
        continue;
      }
      widen(rr->start, name + " start");
      widen(rr->end, name + " end");
      widen(rr->stop_time, name + " stop_time");
      std::string r = RankRecordToJson(*rr);
      while (!r.empty() && r.back() == '\n') r.pop_back();
      ranks.push_back(r);
      ExitStatus es{rr->exit_code, rr->signal};
      if (rr->status == "exited" && !es.ok() && !have_cause[rr->rank]) e.causes.push_back({rr->rank, es.ToString()});
    } else if (name.ends_with(".log") || name.starts_with("command-node-")) {
      // Logs are appended while the attempt runs: the newest write is about when it ended.
      widen(ModifiedAt(p), name + " modified");
    } else if (name == "fr") {
      for (const auto& dump : ListNames(p)) widen(ModifiedAt(p + "/" + dump), "fr/" + dump + " modified");
    }
  }
  std::sort(e.causes.begin(), e.causes.end(), [](const RankCause& a, const RankCause& b) { return a.rank < b.rank; });
  const int world = run_.world();
  e.gpu_hours = world * std::max(0.0, e.end - e.start) / 3600;
  // Lost: what ran after the newest checkpoint saved during it (all of it when none was).
  double saved_at = e.start;
  for (const auto& c : checkpoints) {
    if (c.ok && !c.temp && c.mtime > e.start && c.mtime <= e.end) saved_at = std::max(saved_at, c.mtime);
  }
  e.gpu_hours_lost = world * std::max(0.0, e.end - saved_at) / 3600;
  std::string o = fmt::format(
      "{{\"attempt\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"seconds\": {:.1f}, \"outcome\": \"interrupted\", "
      "\"gpu_hours\": {:.4f}, \"gpu_hours_lost\": {:.4f}, \"flight_recorder\": {{\"verdict\": \"\", \"conclusive\": false}}, "
      "\"decision\": {{\"attempt\": {}, \"action\": \"none\", \"reason\": \"its launcher died before judging it\"}}, "
      "\"note\": {}, \"causes\": {}, \"ranks\": [{}]}}",
      attempt, e.start, e.end, e.end - e.start, e.gpu_hours, e.gpu_hours_lost, attempt,
      JsonString(e.end > 0 ? fmt::format("no attempt.json: the launcher running it died; start from {}, end from {} "
                                         "(the newest of its records)", first_from, last_from)
                           : std::string("no attempt.json and no record with a time: counted as 0 s")),
      CausesToJson(e.causes), fmt::join(ranks, ", "));
  e.json = Flagged(o, true, true);
  return e;
}

std::string Launcher::Summary(int exit_code, const std::string& outcome) const {
  std::vector<std::string> warnings;
  Checkpoint final = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
  double used = 0, lost = 0, train_s = 0;
  size_t inferred = 0;
  for (const auto& e : earlier_) {  // earlier launchers' attempts count in the totals, not in tokens/s
    used += e.gpu_hours;
    lost += e.gpu_hours_lost;
    inferred += e.inferred;
  }
  for (const auto& a : attempts_) {
    used += a.gpu_hours;
    lost += a.gpu_hours_lost;
    train_s += std::max(0.0, a.end - a.start);
  }
  int64_t first_ckpt = attempts_.empty() ? -1 : attempts_.front().checkpoint_before;
  double tokens_per_step = static_cast<double>(run_.world()) * run_.micro_batch * run_.grad_accum * run_.seq_len;
  double trained_tokens = final.step > first_ckpt ? (final.step - std::max<int64_t>(first_ckpt, 0)) * tokens_per_step : 0;
  std::string o = fmt::format(
      "{{\"run\": {}, \"run_file\": {{\"path\": {}, \"xxh3\": \"{:016x}\"}}, \"run_id\": {}, \"nodes\": {}, \"world\": {}, "
      "\"outcome\": {}, \"exit_code\": {}, \"steps\": {}, \"planned_steps\": {}, \"tokens\": {}, \"tokens_per_s\": {:.1f}, "
      "\"final_checkpoint\": {}, \"attempts\": {}, \"attempts_this_launch\": {}, \"attempts_inferred\": {}, "
      "\"gpu_hours_used\": {:.4f}, \"gpu_hours_lost\": {:.4f}, "
      "\"evenfix_dropped_blocks\": {}, \"launch_dir\": {}, \"evenkeel_version\": {}, \"attempt_records\": [",
      JsonString(run_.name), JsonString(run_.path), run_.xxh3, JsonString(cluster_.run_id), run_.nodes, run_.world(),
      JsonString(outcome), exit_code, final.step, has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1, final.tokens,
      train_s > 0 ? trained_tokens / train_s : 0.0, JsonString(final.final ? final.path : ""),
      earlier_.size() + attempts_.size(), attempts_.size(), inferred, used, lost,
      has_plan_ ? static_cast<int64_t>(plan_.dropped_blocks) : -1, JsonString(paths_.session), JsonString(kVersion));
  bool listed = false;
  for (const auto& e : earlier_) {
    o += (listed ? ", " : "") + e.json;
    listed = true;
  }
  for (const auto& a : attempts_) {
    o += (listed ? ", " : "") + Flagged(AttemptToJson(a), false, false);
    listed = true;
  }
  // Every failed rank of every attempt, for the 3 a.m. reader: what broke, where.
  o += "], \"causes\": [";
  bool first = true;
  for (const auto& e : earlier_) {
    for (const auto& c : e.causes) {
      o += fmt::format("{}{{\"attempt\": {}, \"rank\": {}, \"cause\": {}}}", first ? "" : ", ", e.attempt, c.rank,
                       JsonString(c.cause));
      first = false;
    }
  }
  for (const auto& a : attempts_) {
    for (const auto& c : a.causes) {
      o += fmt::format("{}{{\"attempt\": {}, \"rank\": {}, \"cause\": {}}}", first ? "" : ", ", a.attempt, c.rank,
                       JsonString(c.cause));
      first = false;
    }
  }
  // The ranks that stopped progressing, attempt by attempt (judge.h FindHang).
  o += "], \"hangs\": [";
  first = true;
  for (const auto& a : attempts_) {
    if (a.hang.ranks.empty()) continue;
    o += fmt::format("{}{{\"attempt\": {}, \"ranks\": [{}], \"step\": {}, \"summary\": {}}}", first ? "" : ", ",
                     a.attempt, fmt::join(a.hang.ranks, ", "), a.hang.step, JsonString(a.hang.line));
    first = false;
  }
  o += "]}\n";
  return o;
}

Result<LaunchResult> Launcher::Run() {
  EK_RETURN_IF_ERROR(Prepare());
  if (o_.dry_run) {
    // What this launcher would run and judge by, without running anything.
    LaunchResult dry;
    dry.exit_code = kExitCompleted;
    std::string command;
    for (size_t i = 0; i < trainer_.size(); ++i) command += (i ? "," : "") + JsonString(trainer_[i]);
    dry.summary_json = fmt::format(
        "{{\"run\": {}, \"run_file\": {}, \"node\": {}, \"world\": {}, \"torchrun\": {}, \"python\": {}, "
        "\"trainer\": [{}], \"launch_dir\": {}, \"final_step\": {}, \"save_steps\": [{}], \"schedule\": {}}}\n",
        JsonString(run_.name), JsonString(run_.path), cluster_.node_rank, run_.world(), JsonString(torchrun_),
        JsonString(python_), command, JsonString(paths_.session), has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1,
        has_plan_ ? fmt::format("{}", fmt::join(plan_.save_steps, ",")) : "",
        has_plan_ ? run::ScheduleToJson(plan_) : "null");
    return dry;
  }
  {
    std::string refused;
    auto locked = Lock(&refused);
    if (!locked.ok()) return Fail(locked.status());
    if (!*locked) {
      LaunchResult busy;
      busy.exit_code = kExitRunBusy;
      busy.refused = refused;
      return busy;
    }
  }
  say_(fmt::format("launch: run {} ({}), node {} of {} ({}), world {}, run id {}, records in {}", run_.name,
                   run_.Identity(), cluster_.node_rank, run_.nodes, cluster_.source, run_.world(), cluster_.run_id,
                   paths_.session));
  LaunchResult result;
  result.summary_name = cluster_.node_rank == 0 ? paths_.session + "/summary.json"
                                                : fmt::format("node {}'s launch summary", cluster_.node_rank);
  int attempt = 1;
  EK_ASSIGN_OR_RETURN(bool go, Gate(&attempt, &result.exit_code));
  if (!go) {
    if (cluster_.node_rank == 0) ReadEarlierAttempts(std::numeric_limits<int>::max());  // the summary still counts them
    result.summary_json = Summary(result.exit_code, "gate refused");
    if (cluster_.node_rank == 0) EK_RETURN_IF_ERROR(WriteRecord(paths_.session + "/summary.json", result.summary_json));
    return result;
  }
  if (cluster_.node_rank == 0) ReadEarlierAttempts(attempt);
  StartAgent();
  int restarts = 0, no_progress = 0;
  while (true) {
    // Node 0 chooses the checkpoint; every node hands that one to its ranks (resume.json).
    Checkpoint before;
    ResumeChoice resume;
    std::string where;
    if (cluster_.node_rank == 0) {
      auto chosen = ChooseResume(attempt, &before);
      if (!chosen.ok()) {
        if (agent_) agent_->Stop(5);
        return chosen.status();  // 74 for resume.json that cannot be written
      }
      resume = *chosen;
      where = resume.where;
    } else {
      if (!FollowResume(attempt, &resume, &result.exit_code)) break;
      where = resume.where + ", node 0's choice";
    }
    say_(fmt::format("launch: attempt {} ({}{})", attempt, where,
                     restarts ? fmt::format(", restart {} of {}", restarts, run_.max_restarts) : ""));
    auto ran = RunAttempt(attempt, resume);
    if (!ran.ok()) return Fail(ran.status());
    const NodeRecord& mine = *ran;
    const std::string dir = paths_.Attempt(attempt);
    if (Status st = WriteRecord(fmt::format("{}/node-{}.json", dir, cluster_.node_rank), NodeRecordToJson(mine)); !st.ok()) {
      return Fail(st);
    }
    Decision decision;
    if (cluster_.node_rank == 0) {
      std::vector<NodeRecord> nodes = {mine};
      std::vector<NodeFacts> facts(run_.nodes);
      for (int n = 0; n < run_.nodes; ++n) facts[n].node = n;
      facts[0] = FactsOf(mine);
      std::map<int, bool> seen = {{0, true}};
      // The other nodes' accounts; a node whose ranks failed ends soon after ours.
      WaitFor(run_.stop_grace_s + 120, [&] {
        for (int n = 1; n < run_.nodes; ++n) {
          if (seen.count(n)) continue;
          std::string p = fmt::format("{}/node-{}.json", dir, n);
          auto text = ReadIfExists(p);
          if (text.ok() && !*text) continue;  // not written yet
          seen[n] = true;
          auto rec = text.ok() ? NodeRecordFromJson(**text, p) : Result<NodeRecord>(text.status());
          if (rec.ok() && rec->node != n) {
            rec = CorruptError(fmt::format("{}: node: {} where node {} was expected", p, rec->node, n));
          }
          if (rec.ok()) {
            nodes.push_back(*rec);
            facts[n] = FactsOf(*rec);
          } else {
            facts[n].unreadable = rec.status().message();
          }
        }
        return static_cast<int>(seen.size()) == run_.nodes;
      });
      std::sort(nodes.begin(), nodes.end(), [](const NodeRecord& x, const NodeRecord& y) { return x.node < y.node; });
      AttemptSummary a = JudgeAttempt(attempt, facts, nodes, before, restarts, &no_progress);
      attempts_.push_back(a);
      decision = a.decision;
      if (Status st = WriteRecord(dir + "/attempt.json", AttemptToJson(a) + "\n"); !st.ok()) return Fail(st);
      if (Status st = WriteRecord(dir + "/decision.json", DecisionToJson(attempt, decision)); !st.ok()) return Fail(st);
      if (!a.fr_verdict.empty()) say_("launch: flight recorder: " + a.fr_verdict);
      if (!a.hang.ranks.empty()) say_(fmt::format("launch: attempt {}: hang: {}", attempt, a.hang.line));
    } else {
      const std::string p = dir + "/decision.json";
      bool got = WaitFor(run_.stop_grace_s + 300, [&] {
        auto text = ReadIfExists(p);
        if (text.ok() && !*text) return false;  // not written yet
        auto read = text.ok() ? DecisionFromJson(**text, p, attempt) : Result<Decision>(text.status());
        if (read.ok()) {
          decision = *read;
        } else {
          // Node 0's decision cannot be followed: stop, as for any bad input.
          say_("launch: unreadable decision: " + read.status().message());
          decision = {Action::kStop, kExitBadInput, "unreadable decision: " + read.status().message(), 0, 0};
        }
        return true;
      });
      if (!got) {
        decision = {Action::kStop, mine.cancelled ? kExitCancelled : kExitError,
                    mine.cancelled ? "cancelled by a signal" : "node 0 gave no decision for this attempt", 0, 0};
      }
      AttemptSummary a;
      a.attempt = attempt;
      a.outcome = decision.action == Action::kDone           ? Outcome::kCompleted
                  : decision.exit_code == kExitCancelled ? Outcome::kCancelled
                                                         : Outcome::kFailed;
      a.start = mine.start;
      a.end = mine.end;
      a.decision = decision;
      a.nodes = {mine};
      a.causes = mine.causes;
      a.gpu_hours = run_.gpus_per_node * std::max(0.0, mine.end - mine.start) / 3600;
      attempts_.push_back(a);
    }
    for (const auto& c : attempts_.back().causes) say_(fmt::format("launch: attempt {}: rank {}: {}", attempt, c.rank, c.cause));
    say_(fmt::format("launch: attempt {}: {}: {}", attempt, ActionName(decision.action), decision.reason));
    if (decision.action != Action::kRestart) {
      result.exit_code = decision.exit_code;
      break;
    }
    SleepInterruptible(decision.backoff_s);
    if (StopSignalReceived()) {
      result.exit_code = kExitCancelled;
      break;
    }
    restarts++;
    attempt = decision.next_attempt > 0 ? decision.next_attempt : attempt + 1;
  }
  if (agent_) agent_->Stop(5);
  std::string outcome = result.exit_code == kExitCompleted     ? "completed"
                        : result.exit_code == kExitCancelled   ? "cancelled"
                        : result.exit_code == kExitDoNotRequeue ? "stopped: do not requeue"
                        : result.exit_code == kExitBudgetSpent  ? "stopped: restart budget spent"
                                                                : "failed";
  result.summary_json = Summary(result.exit_code, outcome);
  if (cluster_.node_rank == 0) {
    EK_RETURN_IF_ERROR(WriteRecord(paths_.session + "/summary.json", result.summary_json));
  } else {
    // Node 0 has the whole run's account; show it here too once it is written.
    const std::string path = paths_.session + "/summary.json";
    WaitFor(30, [&] {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || st.st_mtim.tv_sec + 1 < static_cast<time_t>(started_)) return false;
      auto text = ReadFile(path);
      if (!text.ok()) return false;
      result.summary_json = *text;
      result.summary_name = path;
      return true;
    });
  }
  return result;
}

}  // namespace

Result<LaunchResult> Launch(const LaunchOptions& options, const Say& say) {
  Launcher l(options, say);
  auto result = l.Run();
  l.ReleaseLock();
  return result;
}

}  // namespace ek::launch
