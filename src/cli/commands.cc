#include "cli/commands.h"

#include <csignal>

namespace ek::cli {

namespace {
// Keep rows in the order a user meets them in a run's life.
constexpr Command kCommands[] = {
    {"tokenize", "encode JSON lines of text into token ids with a tokenizer.json", RunTokenize},
    {"detokenize", "decode JSON lines of token ids back into text", RunDetokenize},
    {"pack", "tokenize once and pack fixed blocks per rank (.i32 files + manifest)", RunPack},
    {"template", "render conversations with a model's chat template exactly as transformers does",
     RunTemplate},
    {"inspect", "verify a pack against its manifest; show a block", RunInspect},
    {"plan", "memory, steps, tokens and checkpoints of a run", RunPlan},
    {"gate", "preflight: six invariants checked before a launch, with a pass log", RunGate},
    {"launch",
     "gate, then torchrun the trainer; retry with judgement, resume from the last verified "
     "checkpoint",
     RunLaunch},
    {"triage",
     "name a run's state (healthy, checkpoint, deadlock, ...) from GPU power and utilization",
     RunTriage},
    {"fr", "read every rank's flight-recorder dump and name the desynced ranks", RunFr},
    {"agent", "serve a node's GPU readings, rank heartbeats and checkpoints (/metrics, /status)",
     RunAgent},
    {"watch", "watch a run from another host: completion, crash, hang, deadlock; alert", RunWatch},
    {"report",
     "a run made visible: per-rank heatmaps, verdicts, throughput, incidents, as one HTML file",
     RunReport},
    {"ckpt", "verify a checkpoint (safetensors shards, index, hashes); list a run's checkpoints",
     RunCkpt},
    {"version", "print the evenkeel version", RunVersion},
    {"launch-rank", "(internal) the per-rank wrapper launch gives torchrun", RunLaunchRank},
};
}  // namespace

std::span<const Command> Commands() { return kCommands; }

namespace {
void (*g_on_stop)() = nullptr;
void OnStopSignal(int) {
  StopRequested() = true;
  if (g_on_stop) g_on_stop();
}
}  // namespace

std::atomic<bool>& StopRequested() {
  static std::atomic<bool> stop{false};
  return stop;
}

void CatchStopSignals(void (*on_stop)(), bool ignore_sigpipe) {
  StopRequested();  // constructed before a handler can run
  g_on_stop = on_stop;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (ignore_sigpipe) signal(SIGPIPE, SIG_IGN);
}

}  // namespace ek::cli
