// evenkeel launch RUN.toml [--node-rank N] [-- TRAINER ARGS]: the gate, then
// torchrun, retries with judgement, resume (docs/launch.md). And the per-rank
// wrapper torchrun starts, evenkeel launch-rank (not for people).
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/process.h"
#include "heartbeat/goodput_account.h"
#include "launch/launcher.h"
#include "launch/rank_exec.h"
#include "launch/records.h"

namespace ek::cli {

namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "evenkeel";
  buf[n] = 0;
  return buf;
}

// Splits argv at the first "--": what follows goes to the trainer.
std::vector<std::string> SplitAtDashes(int* argc, char** argv) {
  std::vector<std::string> rest;
  for (int i = 1; i < *argc; ++i) {
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < *argc; ++j) rest.emplace_back(argv[j]);
      *argc = i;
      break;
    }
  }
  return rest;
}

// The summary's lines for people; a summary that cannot be read is an error naming it.
Status PrintSummary(const launch::LaunchResult& r) {
  EK_ASSIGN_OR_RETURN(launch::LaunchSummary s,
                      launch::LaunchSummaryFromJson(r.summary_json, r.summary_name));
  // -1 in the summary is "none": no checkpoint yet, no plan (a gate that refused).
  const std::string steps = s.steps >= 0 ? fmt::format("steps {}", s.steps) : "no checkpoint";
  const std::string planned =
      s.planned_steps >= 0 ? fmt::format(" of {} planned", s.planned_steps) : " (no plan)";
  const std::string dropped =
      s.evenfix_dropped_blocks >= 0
          ? fmt::format("; evenfix dropped {} blocks", s.evenfix_dropped_blocks)
          : std::string();
  std::printf(
      "launch: %s: %s%s, %llu tokens, %.0f tok/s; %lld attempt(s); "
      "%.3f GPU-hours used, %.3f lost to failures%s\n",
      s.outcome.c_str(), steps.c_str(), planned.c_str(), static_cast<unsigned long long>(s.tokens),
      s.tokens_per_s, static_cast<long long>(s.attempts), s.gpu_hours_used, s.gpu_hours_lost,
      dropped.c_str());
  if (!s.final_checkpoint.empty())
    std::printf("launch: final checkpoint %s\n", s.final_checkpoint.c_str());
  if (s.goodput) std::printf("launch: %s\n", heartbeat::GoodputLine(*s.goodput).c_str());
  return Status::Ok();
}

}  // namespace

int RunLaunch(int argc, char** argv) {
  std::vector<std::string> extra = SplitAtDashes(&argc, argv);
  CLI::App app{
      "Gate, then train: the six-invariant gate on every node (any FAIL stops every node),\n"
      "torchrun with the flight recorder on, the trainer with the run file, and on a failure\n"
      "the flight recorder's verdict: a conclusive collective desync stops (exit 93, do not\n"
      "requeue), anything else restarts from the newest verified checkpoint until\n"
      "retry.max_restarts, or retry.max_no_progress attempts in a row without a new checkpoint\n"
      "(exit 93). Exit 0 only when the final checkpoint exists and verifies.\n"
      "Exit codes: 0 completed, 1 gate refused, 2 usage, 65 bad input (run file, cluster),\n"
      "69 a peer or component unavailable, 70 launcher error, 74 I/O error, 75 restart budget\n"
      "spent or another launcher already runs this run (requeue), 93 do not requeue, 130 "
      "cancelled.\n"
      "Details: docs/launch.md.",
      "evenkeel launch"};
  launch::LaunchOptions o;
  bool json = false;
  app.add_option("RUN", o.run_path, "the run file (run.toml)")->required();
  app.add_option("--node-rank", o.node_rank,
                 "this node's rank (0..nodes-1); under srun, SLURM_NODEID");
  app.add_flag(
      "--accept-gate-fail", o.accept_gate_fail,
      "start even when the gate FAILs (logged in the attempt records, warned on every node)");
  app.add_flag("--agent", o.agent, "run `evenkeel agent` for this node beside the ranks");
  app.add_option(
         "--agent-listen", o.agent_listen,
         "the agent's HOST:PORT (beyond loopback it needs EVENKEEL_AGENT_TOKEN in the environment)")
      ->capture_default_str();
  app.add_flag("--json", json, "print the launch summary as JSON at the end");
  app.add_flag("--dry-run", o.dry_run,
               "start nothing: print the torchrun, python and trainer command found, and the "
               "schedule (final step, "
               "save steps) the attempts would be judged by");
  app.footer("Arguments after -- are appended to the trainer's command line.");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  o.extra_args = extra;
  o.evenkeel_exe = SelfExe();
  if (o.agent && o.agent_listen == "127.0.0.1:0")
    o.agent_listen = fmt::format("127.0.0.1:{}", 9500 + std::max(0, o.node_rank));
  // The program's choices, made here and not in a library: stop signals are
  // recorded for the main loop, and a closed stdout is an EPIPE error.
  InstallStopSignalHandlers();
  std::signal(SIGPIPE, SIG_IGN);
  auto say = [](const std::string& line) {
    std::fputs(line.c_str(), stdout);
    if (line.empty() || line.back() != '\n') std::fputc('\n', stdout);
    std::fflush(stdout);
  };
  auto r = launch::Launch(o, say);
  if (!r.ok()) return ReportError(r.status());
  if (!r->refused.empty()) {
    // Another launcher runs this run: its error line, and 75 (EX_TEMPFAIL: try again later).
    (void)ReportError(UnavailableError(r->refused));
    return r->exit_code;
  }
  if (o.dry_run) {
    if (json) {
      std::fputs(r->summary_json.c_str(), stdout);
    } else {
      say(r->summary_json);
    }
    return r->exit_code;
  }
  if (Status st = PrintSummary(*r); !st.ok()) return ReportError(st);
  if (json) std::fputs(r->summary_json.c_str(), stdout);
  return r->exit_code;
}

int RunLaunchRank(int argc, char** argv) {
  std::vector<std::string> command = SplitAtDashes(&argc, argv);
  CLI::App app{"The per-rank wrapper evenkeel launch gives torchrun (not for people).",
               "evenkeel launch-rank"};
  launch::RankExecOptions o;
  app.add_option("--attempt-dir", o.attempt_dir, "the attempt's directory")->required();
  app.add_option("--node-rank", o.node_rank, "this node's rank")->required();
  app.add_option("--nproc-per-node", o.nproc_per_node, "processes per node")->required();
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  o.command = command;
  // As for launch: the wrapper forwards a stop signal to its trainer.
  InstallStopSignalHandlers();
  std::signal(SIGPIPE, SIG_IGN);
  auto code = launch::RunRankExec(o);
  if (!code.ok()) return ReportError(code.status());
  return *code;
}

}  // namespace ek::cli
