// evenkeel launch, one node's side (docs/launch.md). This file prepares the launch,
// takes the session's lock, starts the agent and runs the attempt loop; the other
// parts of the Launcher class are listed in launcher_internal.h.
#include "launch/launcher.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/parse.h"
#include "core/process.h"
#include "core/version.h"
#include "flightrec/analyzer.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"
#include "gate/gate.h"
#include "heartbeat/heartbeat.h"
#include "launch/cause.h"
#include "launch/judge.h"
#include "launch/launcher_internal.h"
#include "launch/rank_exec.h"
#include "launch/records.h"
#include "launch/session_lock.h"
#include "packfile/manifest.h"
#include "run/plan.h"

namespace ek::launch {

namespace detail {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Nonce() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::vector<std::string> ListNames(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  return names.ok() ? std::move(*names) : std::vector<std::string>();
}

// A small record's text; nullopt when it does not exist yet (a record is
// always written whole, by rename: a file that exists is complete).
Result<std::optional<std::string>> ReadIfExists(const std::string& path) {
  if (!FileExists(path)) return std::optional<std::string>();
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return std::optional<std::string>(std::move(text));
}

// Waits until `ready` returns true, polling every 0.2 s on `clock`; false on timeout or a stop
// signal.
bool WaitFor(Clock* clock, double timeout_s, const std::function<bool()>& ready) {
  const double deadline = clock->Monotonic() + timeout_s;
  while (true) {
    if (ready()) return true;
    if (StopSignalReceived() || clock->Monotonic() >= deadline) return false;
    SleepInterruptible(0.2, clock);
  }
}

// A launch key naming a program (launch.torchrun, launch.python): a value with
// a '/' is a path, relative to the run file; a bare name is looked up on PATH,
// as a shell would. "" when that finds no executable.
// Asks `python` whether it can import the trainer module (find_spec imports
// the evenkeel package, not the trainer: no torch start-up). NotFound naming
// the python, why and what to install when it cannot.
Status CheckTrainerModule(const std::string& python, const std::string& python_from,
                          const std::string& run_path) {
  SpawnOptions so;
  so.argv = {python, "-c",
             // Finds the package without running its __init__ (which imports torch: seconds),
             // so a dry run or a launch asks in tens of milliseconds; a trainer that then
             // cannot import its dependencies fails its first attempt with the reason.
             "import importlib.util, os, sys\n"
             "spec = importlib.util.find_spec('evenkeel')\n"
             "if spec is None:\n"
             "    raise ModuleNotFoundError(\"No module named 'evenkeel'\")\n"
             "if not any(os.path.exists(os.path.join(d, 'train.py')) for d in "
             "spec.submodule_search_locations or []):\n"
             "    print('evenkeel is installed but has no evenkeel.train (an older package)')\n"
             "    sys.exit(3)\n"};
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  auto child = Child::Spawn(so);
  if (!child.ok())
    return child.status().WithContext(
        fmt::format("launch: cannot ask {} for {}", python, kTrainerModule));
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
      return UnavailableError(
          fmt::format("launch: {} did not answer within 120 s whether it can import {}", python,
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
    why = out.substr(start == std::string::npos ? 0 : start + 1,
                     end + 1 - (start == std::string::npos ? 0 : start + 1));
  }
  return NotFoundError(
      fmt::format("the reference trainer, the Python module {}, cannot be imported by {} ({}): {}; "
                  "install evenkeel's Python "
                  "package into that environment (pip install EVENKEEL_SOURCE_DIR), point "
                  "launch.python at a python that has it, "
                  "or set launch.trainer in {} to a training script",
                  kTrainerModule, python, python_from, why, run_path));
}

Status Launcher::Prepare() {
  // Absolute, so that records, ranks and the agent agree whatever their working directory.
  std::string path = o_.run_path;
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf)) path = buf;
  EK_ASSIGN_OR_RETURN(run_, run::ReadRunFile(path));
  EK_ASSIGN_OR_RETURN(cluster_, ResolveCluster(run_, o_.node_rank, o_.files, o_.expand_nodelist));
  if (run_.checkpoint_dir.empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: checkpoint.dir is needed to launch (checkpoints and attempt records)", run_.path));
  }
  paths_.ckpt_dir = run_.Resolve(run_.checkpoint_dir);
  std::string root =
      run_.launch_dir.empty() ? paths_.ckpt_dir + "/launch" : run_.Resolve(run_.launch_dir);
  paths_.session = root + "/" + cluster_.run_id;
  paths_.heartbeat = run_.heartbeat_dir.empty()
                         ? fmt::format("{}/heartbeat/node-{}", paths_.session, cluster_.node_rank)
                         : run_.Resolve(run_.heartbeat_dir);
  torchrun_ = FindRunProgram(run_, run_.launch_torchrun);
  if (torchrun_.empty()) {
    return NotFoundError(fmt::format(
        "{}: launch.torchrun '{}' {} (install PyTorch in the environment, or set launch.torchrun)",
        run_.path, run_.launch_torchrun, WhereLooked(run_, run_.launch_torchrun)));
  }
  EK_ASSIGN_OR_RETURN(run::TrainerPython python, run::FindTrainerPython(run_, torchrun_));
  python_ = python.path;
  const std::string& python_from = python.from;
  if (!run_.launch_trainer.empty()) {
    std::string script = run_.Resolve(run_.launch_trainer);
    if (!FileExists(script)) {
      return NotFoundError(fmt::format("{}: launch.trainer '{}': {} does not exist", run_.path,
                                       run_.launch_trainer, script));
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
  int omp = run_.omp_threads > 0 ? run_.omp_threads
                                 : std::max(1, static_cast<int>(cores) / run_.gpus_per_node);
  return {
      // The flight recorder the report needed to name the deadlock: on, dumped on a timeout, per
      // attempt.
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

Result<bool> Launcher::Lock(std::string* refused) {
  const std::string path = LockPath(paths_.session, run_.nodes, cluster_.node_rank);
  LockHolder me{o_.files->HostName(), static_cast<int64_t>(::getpid()), started_, cluster_.run_id,
                cluster_.node_rank};
  auto lock = SessionLock::Acquire(path, me, o_.files);
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kUnavailable) return lock.status();
    *refused = "launch: " + lock.status().message();
    return false;
  }
  lock_ = std::move(*lock);
  if (lock_->stale()) {
    say_(
        fmt::format("launch: taking over the stale lock {}: its holder, {}, is gone (it died "
                    "without releasing it)",
                    path, DescribeHolder(*lock_->stale())));
  } else if (!lock_->stale_unreadable().empty()) {
    say_(fmt::format(
        "launch: taking over the lock {}, left by a launcher that died while writing it ({})", path,
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
  so.argv = {o_.evenkeel_exe,   "agent",          run_.path,
             "--heartbeat-dir", paths_.heartbeat, "--listen",
             o_.agent_listen,   "--goodput",      paths_.session + "/goodput.json"};
  if (!cluster_.hosts.empty())
    so.argv.insert(so.argv.end(), {"--host", cluster_.hosts[cluster_.node_rank]});
  so.output_path = paths_.session + fmt::format("/agent-node-{}.log", cluster_.node_rank);
  so.parent_death_signal = SIGKILL;
  auto c = Child::Spawn(so);
  if (!c.ok()) {
    say_("launch: warning: agent not started: " + c.status().message());
    return;
  }
  say_(fmt::format("launch: agent on {} (pid {}, log {})", o_.agent_listen, c->pid(),
                   so.output_path));
  agent_ = std::move(*c);
}

Result<LaunchResult> Launcher::Run() {
  EK_RETURN_IF_ERROR(Prepare());
  if (o_.dry_run) {
    // What this launcher would run and judge by, without running anything.
    LaunchResult dry;
    dry.exit_code = kExitCompleted;
    JsonWriter w(JsonWriter::kSpaced);
    w.BeginObject()
        .Key("run")
        .Str(run_.name)
        .Key("run_file")
        .Str(run_.path)
        .Key("node")
        .Int(cluster_.node_rank);
    w.Key("world").Int(run_.world()).Key("torchrun").Str(torchrun_).Key("python").Str(python_);
    w.Key("trainer").BeginArray();
    for (const auto& arg : trainer_) w.Str(arg);
    w.EndArray().Key("launch_dir").Str(paths_.session);
    w.Key("final_step")
        .Int(has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1)
        .Key("save_steps")
        .BeginArray();
    if (has_plan_) {
      for (uint64_t step : plan_.save_steps) w.Uint(step);
    }
    w.EndArray().Key("schedule").Raw(has_plan_ ? run::ScheduleToJson(plan_) : "null").EndObject();
    dry.summary_json = w.Line();
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
  say_(fmt::format("launch: run {} ({}), node {} of {} ({}), world {}, run id {}, records in {}",
                   run_.name, run_.Identity(), cluster_.node_rank, run_.nodes, cluster_.source,
                   run_.world(), cluster_.run_id, paths_.session));
  LaunchResult result;
  result.summary_name = cluster_.node_rank == 0
                            ? paths_.session + "/summary.json"
                            : fmt::format("node {}'s launch summary", cluster_.node_rank);
  int attempt = 1;
  EK_ASSIGN_OR_RETURN(bool go, Gate(&attempt, &result.exit_code));
  if (!go) {
    if (cluster_.node_rank == 0)
      ReadEarlierAttempts(std::numeric_limits<int>::max());  // the summary still counts them
    result.summary_json = Summary(result.exit_code, "gate refused");
    if (cluster_.node_rank == 0)
      EK_RETURN_IF_ERROR(WriteRecord(paths_.session + "/summary.json", result.summary_json));
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
    say_(fmt::format(
        "launch: attempt {} ({}{})", attempt, where,
        restarts ? fmt::format(", restart {} of {}", restarts, run_.max_restarts) : ""));
    auto ran = RunAttempt(attempt, resume);
    if (!ran.ok()) return Fail(ran.status());
    const NodeRecord& mine = *ran;
    const std::string dir = paths_.Attempt(attempt);
    if (Status st = WriteRecord(fmt::format("{}/node-{}.json", dir, cluster_.node_rank),
                                NodeRecordToJson(mine));
        !st.ok()) {
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
      WaitFor(o_.files->clock(), run_.stop_grace_s + 120, [&] {
        for (int n = 1; n < run_.nodes; ++n) {
          if (seen.count(n)) continue;
          std::string p = fmt::format("{}/node-{}.json", dir, n);
          auto text = ReadIfExists(p);
          if (text.ok() && !*text) continue;  // not written yet
          seen[n] = true;
          auto rec = text.ok() ? NodeRecordFromJson(**text, p) : Result<NodeRecord>(text.status());
          if (rec.ok() && rec->node != n) {
            rec = CorruptError(
                fmt::format("{}: node: {} where node {} was expected", p, rec->node, n));
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
      std::sort(nodes.begin(), nodes.end(),
                [](const NodeRecord& x, const NodeRecord& y) { return x.node < y.node; });
      AttemptSummary a = JudgeAttempt(attempt, facts, nodes, before, restarts, &no_progress);
      a.resume_level = resume.resume_level;
      CountGoodput(&a, nodes, before);
      attempts_.push_back(a);
      decision = a.decision;
      if (Status st = WriteRecord(dir + "/attempt.json", AttemptToJson(a) + "\n"); !st.ok())
        return Fail(st);
      if (Status st = WriteRecord(dir + "/decision.json", DecisionToJson(attempt, decision));
          !st.ok())
        return Fail(st);
      if (!a.fr_verdict.empty()) say_("launch: flight recorder: " + a.fr_verdict);
      if (!a.hang.ranks.empty())
        say_(fmt::format("launch: attempt {}: hang: {}", attempt, a.hang.line));
    } else {
      const std::string p = dir + "/decision.json";
      bool got = WaitFor(o_.files->clock(), run_.stop_grace_s + 300, [&] {
        auto text = ReadIfExists(p);
        if (text.ok() && !*text) return false;  // not written yet
        auto read =
            text.ok() ? DecisionFromJson(**text, p, attempt) : Result<Decision>(text.status());
        if (read.ok()) {
          decision = *read;
        } else {
          // Node 0's decision cannot be followed: stop, as for any bad input.
          say_("launch: unreadable decision: " + read.status().message());
          decision = {Action::kStop, kExitBadInput,
                      "unreadable decision: " + read.status().message(), 0, 0};
        }
        return true;
      });
      if (!got) {
        decision = {
            Action::kStop, mine.cancelled ? kExitCancelled : kExitError,
            mine.cancelled ? "cancelled by a signal" : "node 0 gave no decision for this attempt",
            0, 0};
      }
      AttemptSummary a;
      a.attempt = attempt;
      a.outcome = decision.action == Action::kDone       ? Outcome::kCompleted
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
    for (const auto& c : attempts_.back().causes)
      say_(fmt::format("launch: attempt {}: rank {}: {}", attempt, c.rank, c.cause));
    say_(fmt::format("launch: attempt {}: {}: {}", attempt, ActionName(decision.action),
                     decision.reason));
    if (decision.action != Action::kRestart) {
      result.exit_code = decision.exit_code;
      break;
    }
    SleepInterruptible(decision.backoff_s, o_.files->clock());
    if (StopSignalReceived()) {
      result.exit_code = kExitCancelled;
      break;
    }
    restarts++;
    attempt = decision.next_attempt > 0 ? decision.next_attempt : attempt + 1;
  }
  if (agent_) agent_->Stop(5);
  std::string outcome = result.exit_code == kExitCompleted      ? "completed"
                        : result.exit_code == kExitCancelled    ? "cancelled"
                        : result.exit_code == kExitDoNotRequeue ? "stopped: do not requeue"
                        : result.exit_code == kExitBudgetSpent  ? "stopped: restart budget spent"
                                                                : "failed";
  result.summary_json = Summary(result.exit_code, outcome);
  if (cluster_.node_rank == 0) {
    EK_RETURN_IF_ERROR(WriteRecord(paths_.session + "/summary.json", result.summary_json));
  } else {
    // Node 0 has the whole run's account; show it here too once it is written.
    const std::string path = paths_.session + "/summary.json";
    WaitFor(o_.files->clock(), 30, [&] {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || st.st_mtim.tv_sec + 1 < static_cast<time_t>(started_))
        return false;
      auto text = ReadFile(path);
      if (!text.ok()) return false;
      result.summary_json = *text;
      result.summary_name = path;
      return true;
    });
  }
  return result;
}

}  // namespace detail

Result<LaunchResult> Launch(const LaunchOptions& options, const Say& say) {
  detail::Launcher l(options, say);
  auto result = l.Run();
  l.ReleaseLock();
  return result;
}

}  // namespace ek::launch
