// run.toml: one training run, described once for every evenkeel command
// (docs/run_format.md). Unknown keys and wrong types are errors naming the key.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ek::gate {

enum class EvenfixMode { kMin, kPad, kOff };
Result<EvenfixMode> ParseEvenfixMode(std::string_view s);
std::string_view EvenfixModeName(EvenfixMode m);

struct RunFile {
  std::string path;  // where it was read from; "" when built from flags

  // [run]
  std::string name = "run";
  // [cluster]
  int nodes = 1;
  int gpus_per_node = 1;
  std::vector<std::string> hosts;  // optional, one per node
  // [data]
  std::string pack_dir;
  std::string cache_dir;  // node-local cache (defaults to pack_dir)
  // [model]
  std::string model_name;
  double params = 0;       // parameter count; or from config
  std::string config;      // Hugging Face config.json (path relative to the run file)
  bool gradient_checkpointing = false;
  // [train]
  int seq_len = 2048;
  int micro_batch = 1;
  int grad_accum = 1;
  int epochs = 1;
  int warmup_steps = 0;
  int save_every = 0;      // 0: only at epoch end
  // [checkpoint]
  std::string checkpoint_dir;
  int keep = 2;            // checkpoints kept on disk
  double write_gbps = 1.0; // planned write bandwidth, GB/s, for the save time
  // [evenfix]
  EvenfixMode evenfix = EvenfixMode::kMin;
  // [distributed]
  std::string backend = "nccl";
  double watchdog_timeout_min = 30;
  double watchdog_floor_min = 30;
  bool require_flight_recorder = true;
  // [gpu]
  double memory_gb = 0;    // per GPU, when NVML cannot be asked
  double headroom = 0.10;  // fraction of GPU memory kept free
  // [watch] (used by evenkeel agent/watch)
  double watch_poll_s = 1;
  double hang_floor_s = 120;
  double hang_factor = 10;
  double checkpoint_allowance_s = 600;
  double throughput_floor_tok_s = 0;
  int throughput_samples = 5;
  double stale_after_s = 10;
  std::string heartbeat_dir;       // where ranks' Heartbeat files are (agent)
  std::string watch_profile = "B300";  // triage power profile (watcher's deadlock/starvation)
  long long final_step = 0;        // the run's last step; 0: from the heartbeats' total_steps
  double agent_timeout_s = 2;      // one agent's poll, connect and read together
  std::string watch_state_dir;     // watcher state and spool; "" = <run name>.watch beside the run file
  // [alert] (used by evenkeel watch)
  std::string alertmanager_url;    // e.g. http://127.0.0.1:9093
  std::string webhook_url;         // JSON {"text": ...} (Slack-compatible)
  std::string alert_command;       // run with /bin/sh -c, the alert as JSON on stdin
  double alert_backoff_s = 1;      // first retry delay; doubles per failure
  double alert_backoff_max_s = 60;
  double alert_resend_s = 60;      // Alertmanager: re-post firing alerts (its resolve_timeout is 5m)

  int world() const { return nodes * gpus_per_node; }
  // A path in the run file, resolved against the run file's directory.
  std::string Resolve(const std::string& p) const;
};

Result<RunFile> ParseRunFile(std::string_view toml, const std::string& name);
Result<RunFile> ReadRunFile(const std::string& path);
// Checks cross-field sanity (positive sizes, known modes). Called by Parse.
Status ValidateRunFile(const RunFile& r);

}  // namespace ek::gate
