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
#include "core/version.h"
#include "flightrec/analyzer.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"
#include "gate/gate.h"
#include "launch/process.h"
#include "launch/rank_exec.h"
#include "launch/records.h"
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

std::string DirName(const std::string& p) {
  auto slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
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

// The reference trainer shipped beside this binary (a source or install tree).
std::string DefaultTrainer(const std::string& exe) {
  std::string dir = DirName(exe);
  for (const char* rel : {"/../../../trainer/train.py", "/../share/evenkeel/trainer/train.py", "/../trainer/train.py"}) {
    std::string p = dir + rel;
    if (FileExists(p)) {
      char buf[PATH_MAX];
      return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
    }
  }
  return "";
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

struct AttemptSummary {
  int attempt = 0;
  double start = 0, end = 0;
  std::string outcome;  // "completed", "failed", "cancelled"
  std::string fr_verdict;
  bool fr_conclusive = false;
  int64_t checkpoint_before = -1, checkpoint_after = -1;
  int64_t step_reached = -1;
  Decision decision;
  std::vector<NodeRecord> nodes;
  double gpu_hours = 0, gpu_hours_lost = 0;
};

std::string AttemptToJson(const AttemptSummary& a) {
  std::string o = fmt::format(
      "{{\"attempt\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"seconds\": {:.1f}, \"outcome\": {}, "
      "\"step_reached\": {}, \"checkpoint_before\": {}, \"checkpoint_after\": {}, \"flight_recorder\": "
      "{{\"verdict\": {}, \"conclusive\": {}}}, \"gpu_hours\": {:.4f}, \"gpu_hours_lost\": {:.4f}, \"decision\": ",
      a.attempt, a.start, a.end, a.end - a.start, JsonString(a.outcome), a.step_reached, a.checkpoint_before,
      a.checkpoint_after, JsonString(a.fr_verdict), a.fr_conclusive ? "true" : "false", a.gpu_hours, a.gpu_hours_lost);
  std::string d = DecisionToJson(a.attempt, a.decision);
  while (!d.empty() && d.back() == '\n') d.pop_back();
  o += d + ", \"nodes\": [";
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    std::string n = NodeRecordToJson(a.nodes[i]);
    while (!n.empty() && n.back() == '\n') n.pop_back();
    o += (i ? ", " : "") + n;
  }
  o += "]}";
  return o;
}

class Launcher {
 public:
  Launcher(const LaunchOptions& o, const Say& say) : o_(o), say_(say) {}
  Result<LaunchResult> Run();

 private:
  Status Prepare();
  std::vector<std::pair<std::string, std::string>> RankEnv(int attempt) const;
  // Runs the gate; returns false (with the exit code set) when the launch must stop.
  bool Gate(int* first_attempt, int* exit_code);
  NodeRecord RunAttempt(int attempt);
  AttemptSummary Judge(int attempt, const std::vector<NodeRecord>& nodes, const Checkpoint& before, int restarts,
                       int* no_progress);
  std::string Summary(int exit_code, const std::string& outcome) const;
  void StartAgent();

  const LaunchOptions& o_;
  Say say_;
  run::RunFile run_;
  Cluster cluster_;
  Paths paths_;
  std::string torchrun_, python_, trainer_;
  run::Plan plan_;
  bool has_plan_ = false;
  std::string nonce_ = Nonce();
  double started_ = Now();
  std::vector<AttemptSummary> attempts_;
  std::optional<Child> agent_;
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
  torchrun_ = FindExecutable(run_.Resolve(run_.launch_torchrun).find('/') != std::string::npos
                                 ? run_.Resolve(run_.launch_torchrun)
                                 : run_.launch_torchrun);
  if (torchrun_.empty()) {
    return NotFoundError(fmt::format("launch.torchrun '{}' not found (install PyTorch, or set it in {})",
                                     run_.launch_torchrun, run_.path));
  }
  if (!run_.launch_python.empty()) {
    python_ = FindExecutable(run_.launch_python.find('/') != std::string::npos ? run_.Resolve(run_.launch_python)
                                                                               : run_.launch_python);
    if (python_.empty()) return NotFoundError(fmt::format("launch.python '{}' not found", run_.launch_python));
  } else {
    std::string beside = DirName(torchrun_) + "/python";
    python_ = FileExists(beside) ? beside : FindExecutable("python3");
  }
  trainer_ = run_.launch_trainer.empty() ? DefaultTrainer(o_.evenkeel_exe) : run_.Resolve(run_.launch_trainer);
  if (trainer_.empty() || !FileExists(trainer_)) {
    return NotFoundError(fmt::format("the trainer '{}' does not exist (launch.trainer in {})",
                                     trainer_.empty() ? "trainer/train.py" : trainer_, run_.path));
  }
  auto model = run::ModelForRun(run_);
  std::optional<pack::Manifest> manifest;
  if (!run_.pack_dir.empty()) {
    if (auto m = pack::ReadManifest(run_.Resolve(run_.pack_dir)); m.ok()) manifest = *m;
  }
  if (model.ok()) {
    auto plan = run::MakePlan(run_, *model, manifest ? &*manifest : nullptr);
    if (plan.ok() && plan->has_pack) {
      plan_ = *plan;
      has_plan_ = true;
    }
  }
  EK_RETURN_IF_ERROR(MakeDirs(paths_.session));
  EK_RETURN_IF_ERROR(MakeDirs(paths_.heartbeat));
  return Status::Ok();
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

bool Launcher::Gate(int* first_attempt, int* exit_code) {
  gate::GateEnv genv = gate::RealGateEnv();
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
  (void)MakeDirs(gate_dir);
  std::string verdict_text;
  int next = 1;
  if (cluster_.node_rank == 0) {
    for (const auto& name : ListNames(paths_.session)) {
      if (name.starts_with("attempt-")) next = std::max(next, std::atoi(name.c_str() + 8) + 1);
    }
  }
  if (!multi) {
    gate::GateReport rep = *part;
    if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", rep); !st.ok()) {
      say_("launch: warning: " + st.message());
    }
    say_(gate::GateReportToText(rep));
    bool fail = rep.overall() == gate::Verdict::kFail;
    GateVerdict verdict;
    verdict.overall = std::string(gate::VerdictName(rep.overall()));
    verdict.accepted = fail && o_.accept_gate_fail;
    verdict.first_attempt = next;
    (void)WriteFileAtomic(verdict_path, GateVerdictToJson(verdict));
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
    for (const auto& name : ListNames(gate_dir)) (void)Env::Default()->RemoveFile(gate_dir + "/" + name);
    (void)WriteFileAtomic(my_part, part_json);
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
    std::string overall, reasons;
    std::vector<int64_t> missing;
    for (int n = 0; n < run_.nodes; ++n) {
      if (!done.count(n)) missing.push_back(n);
    }
    std::string text;
    if (!unreadable.empty()) {
      overall = "FAIL";
      reasons = fmt::format("unreadable gate part(s): {}", fmt::join(unreadable, " | "));
    } else if (!all) {
      overall = "FAIL";
      reasons = fmt::format("node(s) {} did not report a gate part within {:.0f} s{}", CompactRanges(missing),
                            run_.gate_timeout_s, StopSignalReceived() ? " (stopped)" : "");
    } else {
      auto merged = gate::MergeGateReports(reps, &run_);
      if (!merged.ok()) {
        overall = "FAIL";
        reasons = merged.status().message();
      } else {
        overall = std::string(gate::VerdictName(merged->overall()));
        text = gate::GateReportToText(*merged);
        for (const auto& c : merged->checks) {
          if (c.verdict == gate::Verdict::kFail) reasons += (reasons.empty() ? "" : " | ") + c.name + ": " + c.reason;
        }
        if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", *merged); !st.ok()) {
          say_("launch: warning: " + st.message());
        }
      }
    }
    bool fail = overall == "FAIL";
    verdict_text = GateVerdictToJson({overall, fail && o_.accept_gate_fail, next, reasons, text, nonces});
    (void)WriteFileAtomic(verdict_path, verdict_text);
  } else {
    bool got = WaitFor(run_.gate_timeout_s + 30, [&] {
      auto text = ReadFile(my_part);
      if (!text.ok() || text->find(nonce_) == std::string::npos) (void)WriteFileAtomic(my_part, part_json);
      auto v = ReadFile(verdict_path);
      if (!v.ok() || v->find(JsonString(nonce_)) == std::string::npos) return false;
      verdict_text = *v;
      return true;
    });
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
  if (v.overall == "FAIL") {
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

NodeRecord Launcher::RunAttempt(int attempt) {
  NodeRecord rec;
  rec.node = cluster_.node_rank;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  rec.host = host;
  const std::string dir = paths_.Attempt(attempt);
  (void)MakeDirs(dir + "/fr");
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
                           "--nproc-per-node", std::to_string(run_.gpus_per_node), "--", python_, trainer_, run_.path});
  argv.insert(argv.end(), o_.extra_args.begin(), o_.extra_args.end());
  SpawnOptions so;
  so.argv = argv;
  so.env = RankEnv(attempt);
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  const std::string log_path = fmt::format("{}/torchrun-node-{}.log", dir, cluster_.node_rank);
  // A log that cannot be opened is not worth failing the attempt for.
  std::unique_ptr<WritableFile> log;
  if (auto opened = Env::Default()->NewAppendableFile(log_path); opened.ok()) log = std::move(opened).value();
  (void)WriteFileAtomic(dir + fmt::format("/command-node-{}.txt", cluster_.node_rank), fmt::format("{}\n", fmt::join(argv, " ")));
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
  for (int r = cluster_.node_rank * run_.gpus_per_node; r < (cluster_.node_rank + 1) * run_.gpus_per_node; ++r) {
    std::string p = fmt::format("{}/rank-{}.json", dir, r);
    auto text = ReadIfExists(p);
    if (text.ok() && !*text) continue;  // the rank never started (or its wrapper was killed first)
    auto rr = text.ok() ? RankRecordFromJson(**text, p) : Result<RankRecord>(text.status());
    if (rr.ok()) {
      rec.ranks.push_back(*rr);
    } else {
      say_("launch: warning: rank record left out: " + rr.status().message());
    }
  }
  std::vector<std::string> problems;
  for (const auto& hb : watch::ReadHeartbeatDir(paths_.heartbeat, &problems)) {
    rec.step_reached = std::max<int64_t>(rec.step_reached, hb.step);
  }
  return rec;
}

AttemptSummary Launcher::Judge(int attempt, const std::vector<NodeRecord>& nodes, const Checkpoint& before,
                               int restarts, int* no_progress) {
  AttemptSummary a;
  a.attempt = attempt;
  a.nodes = nodes;
  a.start = 1e300;
  for (const auto& n : nodes) {
    a.start = std::min(a.start, n.start);
    a.end = std::max(a.end, n.end);
    a.step_reached = std::max(a.step_reached, n.step_reached);
  }
  if (nodes.empty()) a.start = a.end = Now();
  a.checkpoint_before = before.step;
  std::vector<std::string> warnings;
  Checkpoint after = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
  a.checkpoint_after = after.step;
  const int world = run_.world();
  a.gpu_hours = world * std::max(0.0, a.end - a.start) / 3600;
  bool cancelled = std::any_of(nodes.begin(), nodes.end(), [](const NodeRecord& n) { return n.cancelled; });
  bool all_ok = static_cast<int>(nodes.size()) == run_.nodes &&
                std::all_of(nodes.begin(), nodes.end(), [](const NodeRecord& n) {
                  return n.error.empty() && !n.cancelled && n.torchrun_code == 0 && n.torchrun_signal == 0;
                });
  Decision& d = a.decision;
  if (cancelled) {
    a.outcome = "cancelled";
    d = {"stop", kExitCancelled, "cancelled by a signal", 0, 0};
  } else if (all_ok) {
    Checkpoint final = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kFull, &warnings);
    bool planned = !has_plan_ || final.step == static_cast<int64_t>(plan_.total_steps);
    if (final.step >= 0 && final.final && planned) {
      a.outcome = "completed";
      d = {"done", kExitCompleted,
           fmt::format("the final checkpoint {} (step {}) verifies with checksums", final.path, final.step), 0, 0};
    } else {
      a.outcome = "failed";
      d.reason = final.step < 0 ? "every rank exited 0 but no checkpoint verifies"
                                : fmt::format("every rank exited 0 but the newest verified checkpoint (step {}) is not the "
                                              "final one{}",
                                              final.step,
                                              has_plan_ ? fmt::format(" ({} steps planned)", plan_.total_steps) : "");
    }
  } else {
    a.outcome = "failed";
    std::vector<std::string> why;
    for (const auto& n : nodes) {
      if (!n.error.empty()) why.push_back(fmt::format("node {}: {}", n.node, n.error));
      for (const auto& r : n.ranks) {
        if (r.exit_code != 0 || r.signal) {
          ExitStatus es{r.exit_code, r.signal};
          why.push_back(fmt::format("rank {} {}", r.rank, es.ToString()));
        }
      }
    }
    if (static_cast<int>(nodes.size()) < run_.nodes) why.push_back("a node did not report");
    d.reason = why.empty() ? "torchrun failed" : fmt::format("{}", fmt::join(why.begin(), why.begin() + std::min<size_t>(why.size(), 6), ", "));
  }
  if (a.outcome == "failed") {
    // Why: the flight recorder, as `evenkeel fr` reads it.
    std::string fr_dir = paths_.Attempt(attempt) + "/fr";
    if (!ListNames(fr_dir).empty()) {
      auto load = flightrec::LoadDumps(fr_dir, {});
      if (load.ok() && !load->dumps.empty()) {
        flightrec::Analysis analysis = flightrec::Analyze(load->dumps);
        a.fr_verdict = flightrec::VerdictLine(*load, analysis);
        a.fr_conclusive = flightrec::Conclusive(analysis);
      } else {
        a.fr_verdict = load.ok() ? "no readable flight-recorder dump" : load.status().message();
      }
    } else {
      a.fr_verdict = "no flight-recorder dumps";
    }
    bool progress = after.step > before.step;
    *no_progress = progress ? 0 : *no_progress + 1;
    double saved_at = progress ? std::max(a.start, after.mtime) : a.start;
    a.gpu_hours_lost = world * std::max(0.0, a.end - saved_at) / 3600;
    if (a.fr_conclusive) {
      d = {"stop", kExitDoNotRequeue,
           "deterministic collective desync (a restart would deadlock again): " + a.fr_verdict, 0, 0};
    } else if (*no_progress >= run_.max_no_progress) {
      d = {"stop", kExitDoNotRequeue,
           fmt::format("{} attempt(s) in a row without a new verified checkpoint (retry.max_no_progress = {}); last: {}",
                       *no_progress, run_.max_no_progress, d.reason),
           0, 0};
    } else if (restarts >= run_.max_restarts) {
      d = {"stop", kExitBudgetSpent,
           fmt::format("restart budget spent (retry.max_restarts = {}); last: {}", run_.max_restarts, d.reason), 0, 0};
    } else {
      double backoff = std::min(run_.retry_backoff_max_s, run_.retry_backoff_s * std::pow(2.0, restarts));
      std::string reason = d.reason;
      d = {"restart", 0,
           fmt::format("{}; restarting from {} after {:.0f} s", reason,
                       after.step >= 0 ? fmt::format("checkpoint step {}", after.step) : std::string("the start"), backoff),
           attempt + 1, backoff};
    }
  }
  return a;
}

std::string Launcher::Summary(int exit_code, const std::string& outcome) const {
  std::vector<std::string> warnings;
  Checkpoint final = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
  double used = 0, lost = 0, train_s = 0;
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
      "\"final_checkpoint\": {}, \"attempts\": {}, \"gpu_hours_used\": {:.4f}, \"gpu_hours_lost\": {:.4f}, "
      "\"evenfix_dropped_blocks\": {}, \"launch_dir\": {}, \"evenkeel_version\": {}, \"attempt_records\": [",
      JsonString(run_.name), JsonString(run_.path), run_.xxh3, JsonString(cluster_.run_id), run_.nodes, run_.world(),
      JsonString(outcome), exit_code, final.step, has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1, final.tokens,
      train_s > 0 ? trained_tokens / train_s : 0.0, JsonString(final.final ? final.path : ""), attempts_.size(), used, lost,
      has_plan_ ? static_cast<int64_t>(plan_.evenfix_dropped_blocks) : -1, JsonString(paths_.session), JsonString(kVersion));
  for (size_t i = 0; i < attempts_.size(); ++i) o += (i ? ", " : "") + AttemptToJson(attempts_[i]);
  o += "]}\n";
  return o;
}

Result<LaunchResult> Launcher::Run() {
  EK_RETURN_IF_ERROR(Prepare());
  say_(fmt::format("launch: run {} ({}), node {} of {} ({}), world {}, run id {}, records in {}", run_.name,
                   run_.Identity(), cluster_.node_rank, run_.nodes, cluster_.source, run_.world(), cluster_.run_id,
                   paths_.session));
  LaunchResult result;
  result.summary_name = cluster_.node_rank == 0 ? paths_.session + "/summary.json"
                                                : fmt::format("node {}'s launch summary", cluster_.node_rank);
  int attempt = 1;
  if (!Gate(&attempt, &result.exit_code)) {
    result.summary_json = Summary(result.exit_code, "gate refused");
    if (cluster_.node_rank == 0) (void)WriteFileAtomic(paths_.session + "/summary.json", result.summary_json);
    return result;
  }
  StartAgent();
  int restarts = 0, no_progress = 0;
  while (true) {
    std::vector<std::string> warnings;
    Checkpoint before = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
    say_(fmt::format("launch: attempt {} ({}{})", attempt,
                     before.step >= 0 ? fmt::format("resuming from checkpoint step {}", before.step) : "from the start",
                     restarts ? fmt::format(", restart {} of {}", restarts, run_.max_restarts) : ""));
    NodeRecord mine = RunAttempt(attempt);
    const std::string dir = paths_.Attempt(attempt);
    (void)WriteFileAtomic(fmt::format("{}/node-{}.json", dir, cluster_.node_rank), NodeRecordToJson(mine));
    Decision decision;
    if (cluster_.node_rank == 0) {
      std::vector<NodeRecord> nodes = {mine};
      std::map<int, bool> seen = {{0, true}};
      std::vector<std::string> unreadable;  // records that exist but cannot be read: "file: field: what"
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
          } else {
            unreadable.push_back(rec.status().message());
          }
        }
        return static_cast<int>(seen.size()) == run_.nodes;
      });
      std::sort(nodes.begin(), nodes.end(), [](const NodeRecord& x, const NodeRecord& y) { return x.node < y.node; });
      AttemptSummary a = Judge(attempt, nodes, before, restarts, &no_progress);
      if (!unreadable.empty()) {
        // Not a failure a restart can mend: every node stops, as for any bad input.
        a.decision = {"stop", kExitBadInput, fmt::format("unreadable node record(s): {}", fmt::join(unreadable, " | ")), 0, 0};
      }
      attempts_.push_back(a);
      decision = a.decision;
      (void)WriteFileAtomic(dir + "/attempt.json", AttemptToJson(a) + "\n");
      (void)WriteFileAtomic(dir + "/decision.json", DecisionToJson(attempt, decision));
      if (!a.fr_verdict.empty()) say_("launch: flight recorder: " + a.fr_verdict);
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
          decision = {"stop", kExitBadInput, "unreadable decision: " + read.status().message(), 0, 0};
        }
        return true;
      });
      if (!got) {
        decision = {"stop", mine.cancelled ? kExitCancelled : kExitError,
                    mine.cancelled ? "cancelled by a signal" : "node 0 gave no decision for this attempt", 0, 0};
      }
      AttemptSummary a;
      a.attempt = attempt;
      a.start = mine.start;
      a.end = mine.end;
      a.decision = decision;
      a.nodes = {mine};
      a.gpu_hours = run_.gpus_per_node * std::max(0.0, mine.end - mine.start) / 3600;
      attempts_.push_back(a);
    }
    say_(fmt::format("launch: attempt {}: {}: {}", attempt, decision.action, decision.reason));
    if (decision.action != "restart") {
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
    (void)WriteFileAtomic(paths_.session + "/summary.json", result.summary_json);
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
  return l.Run();
}

}  // namespace ek::launch
