// evenkeel agent: serve one node's GPU readings, rank heartbeats and
// checkpoints as /metrics (Prometheus) and /status (JSON).
// evenkeel watch: poll the agents from another host, detect completion, crash,
// hang, deadlock, throughput floor and blindness, and alert (docs/watch.md).
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_server.h"
#include "cli/commands.h"
#include "core/env.h"
#include "core/json_out.h"
#include "net/host_port.h"
#include "net/http_client.h"
#include "run/plan.h"
#include "run/run_file.h"
#include "telemetry/nvidia_smi_live.h"
#include "telemetry/nvml.h"
#include "triage/profile.h"
#include "watch/live_page.h"
#include "watch/watcher.h"

namespace ek::cli {

namespace {

watch::AgentServer* g_server = nullptr;
void StopServer() {
  if (g_server) g_server->Stop();  // an atomic flag and a write(2) to a pipe: async-signal-safe
}

std::string TokenFrom(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("EVENKEEL_AGENT_TOKEN");
  return env ? env : "";
}

// A server that listens beyond loopback serves the node to anyone who can
// reach the port: without a token that is refused as a usage error, unless
// asked for explicitly (then warned). Returns the exit code when refused.
std::optional<int> CheckListenToken(std::string_view what, const std::string& listen,
                                    const std::string& token, bool insecure,
                                    std::string_view token_flags) {
  std::string host;
  int port = 0;
  if (Status st = net::SplitHostPort(listen, &host, &port); !st.ok()) {
    return UsageError(fmt::format("{} {}", what, st.message()));
  }
  if (!token.empty() || net::IsLoopbackHost(host)) return std::nullopt;
  if (insecure) {
    Warn(
        fmt::format("{} {}: listening beyond loopback without a token (--insecure-no-token): "
                    "anyone who can reach this port can read it",
                    what, listen));
    return std::nullopt;
  }
  return UsageError(
      fmt::format("{} {}: listening beyond loopback without a token is refused; give {} "
                  "(or --insecure-no-token where the network is trusted)",
                  what, listen, token_flags));
}

struct AgentFlags {
  std::string run_file;
  std::string listen = "127.0.0.1:9464";
  std::string token;
  std::string heartbeat_dir;
  std::string goodput;
  std::string host;
  std::vector<std::string> telemetry;  // KIND [FILE...]
  double replay_from_s = 0;
  bool replay_hold = false;
  std::string nvidia_smi = "nvidia-smi";
  std::string nvml_library;
  bool insecure_no_token = false;
};

Result<std::unique_ptr<watch::GpuFeed>> MakeFeed(const AgentFlags& f, const run::RunFile& run,
                                                 const std::string& host, Clock* clock) {
  std::string kind = f.telemetry.empty() ? "nvml" : f.telemetry[0];
  std::vector<std::string> files(
      f.telemetry.size() > 1 ? f.telemetry.begin() + 1 : f.telemetry.end(), f.telemetry.end());
  if (kind == "replay") {
    if (files.empty()) return InvalidArgumentError("--telemetry replay needs recorded CSV files");
    return watch::MakeReplayFeed(files, f.host.empty() && files.size() == 1 ? "" : host,
                                 clock->Now(), f.replay_from_s, f.replay_hold);
  }
  if (!files.empty())
    return InvalidArgumentError(fmt::format("--telemetry {} takes no files", kind));
  double interval = std::max(1.0, run.watch_poll_s);
  if (kind == "nvml") {
    EK_ASSIGN_OR_RETURN(auto nvml, telemetry::LoadNvml(f.nvml_library));
    return watch::MakeSourceFeed(
        std::make_unique<telemetry::NvmlSource>(std::move(nvml), clock, host), clock);
  }
  if (kind == "nvidia-smi") {
    EK_ASSIGN_OR_RETURN(auto lines,
                        telemetry::ChildLineStream::Spawn(
                            telemetry::NvidiaSmiCommand(f.nvidia_smi, interval), clock));
    return watch::MakeSourceFeed(
        std::make_unique<telemetry::NvidiaSmiSource>(std::move(lines), clock, host), clock);
  }
  if (kind == "none") return std::unique_ptr<watch::GpuFeed>();
  return InvalidArgumentError(
      fmt::format("--telemetry '{}': nvml, nvidia-smi, replay FILE... or none", kind));
}

Status RunAgentLoop(const AgentFlags& f) {
  EK_ASSIGN_OR_RETURN(run::RunFile run, run::ReadRunFile(f.run_file));
  Clock* clock = Clock::Default();
  watch::AgentOptions options;
  options.run = run.name;
  options.host = f.host.empty() ? telemetry::LocalHostName() : f.host;
  options.heartbeat_dir =
      !f.heartbeat_dir.empty() ? f.heartbeat_dir : run.Resolve(run.heartbeat_dir);
  options.checkpoint_dir = run.Resolve(run.checkpoint_dir);
  options.goodput_path = f.goodput;
  if (int node = run.topology().NodeOfHost(options.host); node >= 0)
    options.rank_base = run.topology().FirstRank(node);
  if (options.heartbeat_dir.empty()) {
    return InvalidArgumentError(
        "agent: no heartbeat directory (--heartbeat-dir or watch.heartbeat_dir)");
  }
  std::string no_feed;
  auto feed = MakeFeed(f, run, options.host, clock);
  if (!feed.ok()) {
    // Telemetry that cannot start is reported, not fatal: the ranks and
    // checkpoints still matter, and the watcher reads the gap as blind.
    if (feed.status().code() != StatusCode::kUnavailable) return feed.status();
    no_feed = feed.status().message();
    Warn(no_feed);
  }
  watch::Agent agent(options, feed.ok() ? std::move(*feed) : nullptr, no_feed, clock);
  EK_ASSIGN_OR_RETURN(auto server, watch::AgentServer::Create(&agent, TokenFrom(f.token)));
  EK_ASSIGN_OR_RETURN(int port, server->Bind(f.listen));
  std::fprintf(stderr, "evenkeel agent: run %s, host %s, listening on %s (port %d)\n",
               run.name.c_str(), options.host.c_str(), f.listen.c_str(), port);
  g_server = server.get();
  CatchStopSignals(StopServer, /*ignore_sigpipe=*/true);
  std::thread sampler([&] {
    while (!StopRequested().load()) {
      double next = clock->Now() + run.watch_poll_s;
      agent.Sample();
      while (!StopRequested().load() && clock->Now() < next)
        clock->SleepUntil(std::min(next, clock->Now() + 0.1));
    }
  });
  Status st = StopRequested() ? Status::Ok() : server->Serve();
  StopRequested() = true;
  sampler.join();
  g_server = nullptr;
  return st;
}

std::vector<std::string> SplitList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t a = 0;
    while (a <= item.size()) {
      size_t b = item.find(',', a);
      if (b == std::string::npos) b = item.size();
      if (b > a) out.push_back(item.substr(a, b - a));
      a = b + 1;
    }
  }
  return out;
}

struct WatchFlags {
  std::string run_file;
  std::vector<std::string> agents;
  std::string token;
  std::string state_dir;
  std::string log;
  std::string alertmanager, webhook, command;
  int rounds = 0;
  std::string http, http_token;  // the live page
};

Status RunWatchLoop(const WatchFlags& f) {
  EK_ASSIGN_OR_RETURN(run::RunFile run, run::ReadRunFile(f.run_file));
  watch::WatcherOptions o;
  o.settings.run = run.name;
  o.settings.gpus_per_node = run.gpus_per_node;
  o.settings.hosts = run.hosts;
  o.settings.poll_s = run.watch_poll_s;
  o.settings.hang_floor_s = run.hang_floor_s;
  o.settings.hang_factor = run.hang_factor;
  o.settings.checkpoint_allowance_s = run.checkpoint_allowance_s;
  o.settings.throughput_floor_tok_s = run.throughput_floor_tok_s;
  o.settings.throughput_samples = run.throughput_samples;
  o.settings.stale_after_s = run.stale_after_s;
  // The run's last step is the plan's (run::MakeSchedule) where this host can read
  // the pack's manifest; watch.final_step is for a watcher host that cannot, and must
  // agree with the plan where both are known. Without either, the heartbeats carry
  // the trainer's total_steps (also the plan's).
  o.settings.final_step = run.final_step;
  if (!run.pack_dir.empty()) {
    if (auto schedule = run::ScheduleForRun(run); schedule.ok()) {
      const auto planned = static_cast<int64_t>(schedule->total_steps);
      if (run.final_step > 0 && run.final_step != planned) {
        return InvalidArgumentError(
            fmt::format("{}: watch.final_step = {} but the plan's final step is {} (the "
                        "schedule over {}): remove watch.final_step or correct it",
                        run.path, run.final_step, planned, run.pack_dir));
      }
      o.settings.final_step = planned;
    }
  }
  o.settings.desync_s = run.desync_s;
  EK_ASSIGN_OR_RETURN(o.profile, triage::LoadProfile(run.watch_profile));
  o.agents = SplitList(f.agents);
  if (!run.hosts.empty() && o.agents.size() != run.hosts.size()) {
    return InvalidArgumentError(
        fmt::format("watch: {} agents for the run file's {} hosts (one agent per node)",
                    o.agents.size(), run.hosts.size()));
  }
  o.token = TokenFrom(f.token);
  o.agent_timeout_s = run.agent_timeout_s;
  o.state_dir = !f.state_dir.empty()           ? f.state_dir
                : !run.watch_state_dir.empty() ? run.Resolve(run.watch_state_dir)
                                               : run.Resolve(run.name + ".watch");
  o.backoff_s = run.alert_backoff_s;
  o.backoff_max_s = run.alert_backoff_max_s;
  o.resend_s = run.alert_resend_s;

  auto http = net::MakeHttpClient();
  double sink_timeout = std::max(2.0, run.agent_timeout_s);
  std::vector<std::unique_ptr<watch::Sink>> sinks;
  std::string am = !f.alertmanager.empty() ? f.alertmanager : run.alertmanager_url;
  std::string hook = !f.webhook.empty() ? f.webhook : run.webhook_url;
  std::string cmd = !f.command.empty() ? f.command : run.alert_command;
  if (!am.empty()) sinks.push_back(watch::MakeAlertmanagerSink(am, http.get(), sink_timeout));
  if (!hook.empty()) sinks.push_back(watch::MakeWebhookSink(hook, http.get(), sink_timeout));
  if (!cmd.empty()) sinks.push_back(watch::MakeCommandSink(cmd, 10));
  if (sinks.empty())
    Warn("watch: no alert sink configured ([alert] in the run file); incidents go to the log only");

  std::unique_ptr<WritableFile> log;  // null: stdout
  if (!f.log.empty() && f.log != "-") {
    auto opened = Env::Default()->NewAppendableFile(f.log);
    if (!opened.ok()) return opened.status().WithContext("watch");
    log = std::move(opened).value();
  }
  auto log_fn = [&log](const std::string& line) {
    if (log) {
      (void)log->Append(line + "\n");  // one write(2) a line, as the fflush gave
    } else {
      std::fprintf(stdout, "%s\n", line.c_str());
      std::fflush(stdout);
    }
  };
  std::vector<std::string> page_hosts = !run.hosts.empty() ? run.hosts : o.agents;
  EK_ASSIGN_OR_RETURN(auto watcher, watch::Watcher::Create(std::move(o), std::move(sinks),
                                                           http.get(), Clock::Default(), log_fn));
  std::unique_ptr<watch::LivePage> page;
  if (!f.http.empty()) {
    watch::LivePageOptions po;
    po.listen = f.http;
    po.token = !f.http_token.empty()
                   ? f.http_token
                   : (std::getenv("EVENKEEL_PAGE_TOKEN") ? std::getenv("EVENKEEL_PAGE_TOKEN") : "");
    po.run = {run.name,          run.path, fmt::format("{:016x}", run.xxh3), run.world(), run.nodes,
              run.gpus_per_node, run.hosts};
    po.hosts = page_hosts;
    po.gpus_per_node = run.gpus_per_node;
    po.poll_s = run.watch_poll_s;
    EK_ASSIGN_OR_RETURN(page, watch::LivePage::Start(po));
    watch::LivePage* p = page.get();
    watcher->set_observer([p](double now, const std::vector<watch::AgentPoll>& polls,
                              const triage::Assessment& a,
                              const std::map<std::string, watch::Incident>& open) {
      p->OnRound(now, polls, a, open);
    });
    std::string host = f.http.substr(0, f.http.rfind(':'));
    JsonWriter line;
    line.BeginObject().Key("event").Str("page");
    log_fn(line.Key("url").Str(fmt::format("http://{}:{}/", host, page->port())).EndObject().str());
  }
  CatchStopSignals(StopServer, /*ignore_sigpipe=*/true);
  Status st;
  if (f.rounds > 0) {
    for (int i = 0; i < f.rounds && st.ok() && !StopRequested(); ++i) {
      if (i) std::this_thread::sleep_for(std::chrono::duration<double>(run.watch_poll_s));
      st = watcher->Round();
    }
  } else {
    st = watcher->Run(&StopRequested());
  }
  if (log) (void)log->Close();
  return st;
}

}  // namespace

int RunAgent(int argc, char** argv) {
  AgentFlags f;
  CLI::App app{
      "Serve this node's GPU readings, rank heartbeats and checkpoints to Prometheus and the "
      "watcher",
      "evenkeel agent"};
  app.add_option("RUN", f.run_file, "the run file (run.toml)")->required();
  app.add_option("--listen", f.listen, "HOST:PORT to serve on (loopback by default)")
      ->capture_default_str();
  app.add_option("--token", f.token,
                 "require 'Authorization: Bearer TOKEN' (or EVENKEEL_AGENT_TOKEN)");
  app.add_option("--heartbeat-dir", f.heartbeat_dir,
                 "where the ranks' heartbeat files are (watch.heartbeat_dir)");
  app.add_option("--goodput", f.goodput,
                 "the launcher's goodput.json, exported as evenkeel_goodput_* (launch --agent "
                 "passes it)");
  app.add_option("--host", f.host, "this node's name in the run (default: the host name)");
  app.add_option("--telemetry", f.telemetry, "nvml (default) | nvidia-smi | replay FILE... | none")
      ->expected(1, -1);
  app.add_option("--replay-from", f.replay_from_s,
                 "replay: start this many seconds into the recording");
  app.add_flag("--replay-hold", f.replay_hold,
               "replay: after the end, keep serving the last readings as fresh");
  app.add_option("--nvidia-smi", f.nvidia_smi, "the nvidia-smi program")->capture_default_str();
  app.add_option("--nvml-library", f.nvml_library, "the NVML library to dlopen");
  app.add_flag(
      "--insecure-no-token", f.insecure_no_token,
      "serve beyond loopback without a token (anyone who can reach the port reads the node)");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (auto code = CheckListenToken("agent --listen", f.listen, TokenFrom(f.token),
                                   f.insecure_no_token, "--token or EVENKEEL_AGENT_TOKEN")) {
    return *code;
  }
  Status st = RunAgentLoop(f);
  return st.ok() ? 0 : ReportError(st);
}

int RunWatch(int argc, char** argv) {
  WatchFlags f;
  CLI::App app{
      "Watch a run from another host: completion, crash, hang, deadlock, throughput, blind; alert",
      "evenkeel watch"};
  app.add_option("RUN", f.run_file, "the run file (run.toml)")->required();
  app.add_option("--agents", f.agents,
                 "HOST:PORT of every node's agent, comma-separated, in node order")
      ->required();
  app.add_option("--token", f.token, "bearer token for the agents (or EVENKEEL_AGENT_TOKEN)");
  app.add_option("--state-dir", f.state_dir,
                 "state and outbox (watch.state_dir; default RUN_NAME.watch)");
  app.add_option("--log", f.log, "JSON-lines log file (default stdout)");
  app.add_option("--alertmanager", f.alertmanager,
                 "Alertmanager base URL (alert.alertmanager_url)");
  app.add_option("--webhook", f.webhook, "JSON webhook URL (alert.webhook_url)");
  app.add_option("--command", f.command, "command run per notice (alert.command)");
  app.add_option("--rounds", f.rounds, "stop after this many rounds (0: until SIGINT/SIGTERM)");
  app.add_option("--http", f.http,
                 "serve the live run page on HOST:PORT (loopback; port 0 picks one)");
  app.add_option("--http-token", f.http_token,
                 "the page's bearer token (or EVENKEEL_PAGE_TOKEN); needed off loopback");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (!f.http.empty()) {
    const char* env = std::getenv("EVENKEEL_PAGE_TOKEN");
    std::string token = !f.http_token.empty() ? f.http_token : env ? env : "";
    if (auto code = CheckListenToken("watch --http", f.http, token, false,
                                     "--http-token or EVENKEEL_PAGE_TOKEN")) {
      return *code;
    }
  }
  Status st = RunWatchLoop(f);
  return st.ok() ? 0 : ReportError(st);
}

}  // namespace ek::cli
