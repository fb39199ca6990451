// evenkeel plan / gate / gate merge.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/file.h"
#include "gate/gate.h"
#include "packfile/manifest.h"
#include "run/plan.h"
#include "run/run_file.h"
#include "telemetry/nvml.h"

namespace ek::cli {

namespace {

gate::GpuFacts ProbeGpus() {
  gate::GpuFacts f;
  auto api = telemetry::LoadNvml();
  if (!api.ok()) {
    f.why_unavailable = api.status().message();
    return f;
  }
  auto n = (*api)->DeviceCount();
  if (!n.ok()) {
    f.why_unavailable = n.status().message();
    return f;
  }
  f.available = true;
  f.count = *n;
  for (int i = 0; i < *n; ++i) {
    auto r = (*api)->Read(i);
    if (!r.ok()) continue;
    if (r->processes) f.foreign_processes += *r->processes;
    if (r->mem_total_mib) {
      double b = *r->mem_total_mib * 1024.0 * 1024.0;
      f.memory_bytes = f.memory_bytes == 0 ? b : std::min(f.memory_bytes, b);
    }
  }
  return f;
}

int ExitFor(gate::Verdict v) { return v == gate::Verdict::kFail ? kExitNo : kExitOk; }

}  // namespace

int RunPlan(int argc, char** argv) {
  CLI::App app{
      "Print the plan of a run: memory per GPU, tokens per step, steps per epoch from\n"
      "the pack, checkpoint size and schedule, tokens dropped by evenfix.\n"
      "Flags override the run file, or stand in for it.",
      "evenkeel plan"};
  std::string path, config, pack_dir, evenfix;
  double params = 0, memory_gb = 0;
  int nodes = 0, gpn = 0, world = 0, seq = 0, mb = 0, ga = 0, epochs = 0, save_every = -1;
  int64_t min_blocks = -1;
  bool json = false, ckpt = false;
  app.add_option("run", path, "run.toml (optional)");
  app.add_option("--params", params, "parameter count, e.g. 32.76e9");
  app.add_option("--config", config, "the model's Hugging Face config.json");
  app.add_option("--nodes", nodes, "nodes");
  app.add_option("--gpus-per-node", gpn, "GPUs per node");
  app.add_option("--world", world, "world size (nodes x GPUs per node)");
  app.add_option("--seq-len", seq, "tokens per block");
  app.add_option("--micro-batch", mb, "micro-batch");
  app.add_option("--grad-accum", ga, "gradient accumulation");
  app.add_option("--epochs", epochs, "epochs");
  app.add_option("--save-every", save_every, "steps between checkpoints");
  app.add_option("--pack", pack_dir, "pack directory (its manifest gives the blocks)");
  app.add_option("--min-blocks", min_blocks, "global minimum blocks per rank, without a pack");
  app.add_option("--evenfix", evenfix, "min | pad | off");
  app.add_option("--gpu-memory-gb", memory_gb, "GPU memory per device");
  app.add_flag("--gradient-checkpointing", ckpt, "plan with recomputation");
  app.add_flag("--json", json, "machine-readable plan");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (path.empty() && params <= 0 && config.empty()) {
    return UsageError(
        "plan needs a run file, or --params or --config with the shape flags (evenkeel plan "
        "--help)");
  }
  run::RunFile run;
  if (!path.empty()) {
    auto r = run::ReadRunFile(path);
    if (!r.ok()) return ReportError(r.status());
    run = *r;
  }
  if (params > 0) run.params = params, run.config.clear();
  if (!config.empty()) run.config = config;
  if (nodes > 0) run.nodes = nodes;
  if (gpn > 0) run.gpus_per_node = gpn;
  if (world > 0) run.nodes = 1, run.gpus_per_node = world;
  if (seq > 0) run.seq_len = seq;
  if (mb > 0) run.micro_batch = mb;
  if (ga > 0) run.grad_accum = ga;
  if (epochs > 0) run.epochs = epochs;
  if (save_every >= 0) run.save_every = save_every;
  if (!pack_dir.empty()) run.pack_dir = pack_dir;
  if (memory_gb > 0) run.memory_gb = memory_gb;
  if (ckpt) run.gradient_checkpointing = true;
  if (!evenfix.empty()) {
    auto m = run::ParseEvenfixMode(evenfix);
    if (!m.ok()) return ReportError(m.status());
    run.evenfix = *m;
  }
  if (Status st = run::ValidateRunFile(run); !st.ok()) return ReportError(st);
  auto model = run::ModelForRun(run);
  if (!model.ok()) return ReportError(model.status());
  pack::Manifest manifest;
  const pack::Manifest* mp = nullptr;
  if (min_blocks >= 0) {
    manifest.world = run.world();
    manifest.seq_len = run.seq_len;
    for (int r = 0; r < run.world(); ++r) {
      pack::RankInfo rank;  // by name: a positional list follows the struct's order silently
      rank.rank = r;
      rank.blocks = static_cast<uint64_t>(min_blocks);
      manifest.ranks.push_back(std::move(rank));
    }
    mp = &manifest;
  } else if (!run.pack_dir.empty()) {
    auto m = pack::ReadManifest(run.Resolve(run.pack_dir));
    if (!m.ok()) return ReportError(m.status());
    manifest = *m;
    mp = &manifest;
  }
  auto plan = run::MakePlan(run, *model, mp);
  if (!plan.ok()) return ReportError(plan.status());
  if (json) {
    std::printf("%s\n", run::PlanToJson(run, *plan).c_str());
  } else {
    std::fputs(run::PlanToText(run, *plan).c_str(), stdout);
  }
  return kExitOk;
}

namespace {

int RunGateMerge(int argc, char** argv) {
  CLI::App app{
      "Merge node parts written by 'evenkeel gate RUN --node-rank N' into one verdict.\n"
      "Every node of the run must have sent a part: a missing node is a FAIL naming it and\n"
      "its ranks; two parts of one node are bad input (exit 65).",
      "evenkeel gate merge"};
  std::vector<std::string> parts;
  std::string run_path, log;
  bool json = false;
  app.add_option("parts", parts, "part JSON files, one per node")->required();
  app.add_option("--run", run_path,
                 "run.toml: the run's nodes (else the parts' own record of them) and the balance "
                 "over all ranks");
  app.add_option("--log", log, "write the merged pass log here");
  app.add_flag("--json", json, "print the merged log as JSON");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  std::vector<gate::GateReport> reps;
  for (const auto& p : parts) {
    auto text = ReadFile(p);
    if (!text.ok()) return ReportError(text.status());
    auto r = gate::GateReportFromJson(*text, p);
    if (!r.ok()) return ReportError(r.status());
    reps.push_back(*r);
  }
  run::RunFile run;
  const run::RunFile* rp = nullptr;
  if (!run_path.empty()) {
    auto r = run::ReadRunFile(run_path);
    if (!r.ok()) return ReportError(r.status());
    run = *r;
    rp = &run;
  }
  auto merged = gate::MergeGateReports(reps, rp);
  if (!merged.ok()) return ReportError(merged.status());
  if (!log.empty()) {
    if (Status st = gate::WriteGateLog(log, *merged); !st.ok()) return ReportError(st);
  }
  std::fputs(
      json ? gate::GateReportToJson(*merged).c_str() : gate::GateReportToText(*merged).c_str(),
      stdout);
  return ExitFor(merged->overall());
}

}  // namespace

int RunGate(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "merge") return RunGateMerge(argc - 1, argv + 1);
  CLI::App app{
      "Check seven invariants before a launch (data, balance, schedule, memory, storage,\n"
      "distributed safety, document isolation); exit 1 on any FAIL. Writes a pass log (JSON).\n"
      "Multi-node: each node runs --node-rank N; 'evenkeel gate merge PARTS...' combines.",
      "evenkeel gate"};
  std::string path, log;
  int node_rank = -1;
  size_t threads = 0;
  bool json = false;
  app.add_option("run", path, "run.toml")->required();
  app.add_option("--node-rank", node_rank,
                 "check only this node's ranks, disks and GPUs (writes a part)");
  app.add_option("--log", log,
                 "pass log path (default: CHECKPOINT_DIR/gate-log.json, or gate-node-N.json)");
  app.add_option("--threads", threads, "verification threads (default: all cores)");
  app.add_flag("--json", json, "print the log as JSON");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  auto run = run::ReadRunFile(path);
  if (!run.ok()) return ReportError(run.status());
  gate::GateEnv env;
  env.gpus = ProbeGpus();
  env.threads = threads;
  auto rep = gate::RunGate(*run, node_rank, env);
  if (!rep.ok()) return ReportError(rep.status());
  if (log.empty() && !run->checkpoint_dir.empty()) {
    std::string dir = run->Resolve(run->checkpoint_dir);
    log = node_rank < 0 ? dir + "/gate-log.json"
                        : fmt::format("{}/gate-node-{}.json", dir, node_rank);
  }
  if (!log.empty()) {
    Status st = gate::WriteGateLog(log, *rep);
    if (!st.ok()) Warn("pass log not written: " + st.message());
  }
  std::fputs(json ? gate::GateReportToJson(*rep).c_str() : gate::GateReportToText(*rep).c_str(),
             stdout);
  if (!json && !log.empty()) std::printf("log: %s\n", log.c_str());
  return ExitFor(rep->overall());
}

}  // namespace ek::cli
