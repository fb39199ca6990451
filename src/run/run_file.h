// run.toml: one training run, described once for every evenkeel command and
// for the trainer (docs/run_format.md). This is the only parser of the file:
// gate, plan, triage, agent, watch, launch and the Python package (through the
// binding) all read it here. Unknown keys and wrong types are errors naming
// the file, the key and its line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "topology/topology.h"

namespace ek::run {

enum class EvenfixMode { kMin, kPad, kOff };
Result<EvenfixMode> ParseEvenfixMode(std::string_view s);
std::string_view EvenfixModeName(EvenfixMode m);

// One [[data.source]] of the run file: a corpus file, directory or glob the pack reads,
// how its records are shaped, and its part in the mixture. The names (format, shape, the
// columns and tags maps) are the packer's to check (src/pack, src/ingest): the run file
// keeps them as written and the packer's error names the key.
struct DataSource {
  std::string name;  // "" = the path's file name
  std::string path;  // a file, a directory (datasets) or a glob; relative to the run file
  std::string format = "auto";  // auto | jsonl | json | parquet | arrow | datasets
  std::string split;            // a DatasetDict's split
  std::string shape = "auto";   // auto | text | messages | sharegpt | alpaca | prompt-completion
  std::string text_field;       // "" = "text"
  // LLaMA-Factory's dataset_info maps, in the file's order: columns (record field names:
  // messages = "conversations", ...) and tags (role_tag = "from", user_tag = "human", ...).
  std::vector<std::pair<std::string, std::string>> columns, tags;
  double weight = 0;  // the share of the pack's tokens (weights are normalized); 0: not given
  int epochs = 0;     // whole passes over the source; 0: not given
  int line = 0;       // where the entry starts in the file
};

struct RunFile {
  std::string path;   // where it was read from; "" when built from flags
  uint64_t xxh3 = 0;  // xxh3-64 of the file's bytes: the run's identity in logs and checkpoints
  // "section.key=value" overrides applied on top of the file (the trainer's --set), in
  // order; xxh3 stays the file's, so a run with overrides records them beside it.
  std::vector<std::string> overrides;

  // [run]
  std::string name = "run";
  // [cluster]
  int nodes = 1;
  int gpus_per_node = 1;
  std::vector<std::string> hosts;  // optional, one per node, in node-rank order
  // [data]
  std::string pack_dir;
  std::string cache_dir;  // node-local cache (defaults to pack_dir)
  // What `evenkeel pack RUN.toml` packs, and how (docs/run_format.md): the sources, the
  // shard mode, the chat template, the loss mask and the mixture's seed. The tokenizer is
  // the model's (model.path), the world the cluster's, the block length train.seq_len.
  std::vector<DataSource> sources;
  std::string shard = "balanced";      // balanced | contiguous | strided
  std::string chat_template = "auto";  // auto | none | chatml | llama3 | FILE.jinja (relative)
  std::string loss_mask = "none";      // none | assistant
  // Whether a packed block trains as one sequence ("cross": every token attends to the
  // documents packed before it) or each document alone ("isolated": positions restart
  // and attention stops at the pack's document boundaries; docs/trainer.md).
  std::string attention = "isolated";  // isolated | cross
  int64_t mixture_seed = 0;            // which records a weighted mixture takes
  int64_t mixture_tokens = 0;  // a weighted mixture's size (0: the largest repeating no source)
  std::string packing = "sequential";  // sequential | bfd (best-fit-decreasing, pack/bfd.h)
  int64_t packing_seed = 0;            // bfd: the order of documents of equal length
  // [model]
  std::string model_name;
  std::string model_path;  // a Hugging Face model directory (config.json, safetensors, tokenizer)
  double params = 0;       // parameter count; or from config
  std::string config;      // config.json; defaults to model_path/config.json
  bool gradient_checkpointing = false;
  // [train]
  int seq_len = 2048;
  int micro_batch = 1;
  int grad_accum = 1;
  int epochs = 1;
  int64_t max_steps = 0;  // 0: no cap
  int warmup_steps = 0;
  int save_every = 0;  // 0: only at epoch end
  double lr = 1e-5;
  double weight_decay = 0.0;
  double min_lr_ratio = 0.0;   // the cosine decays to lr x this
  double max_grad_norm = 1.0;  // 0: no clipping
  int64_t seed = 0;
  bool shuffle = true;
  std::string precision = "auto";  // auto (bf16 on CUDA, fp32 on CPU) | bf16 | fp32
  int log_every = 1;
  // [checkpoint]
  std::string checkpoint_dir;
  int keep = 2;              // checkpoints kept on disk
  double write_gbps = 1.0;   // planned write bandwidth, GB/s, for the save time
  double shard_size_gb = 5;  // largest safetensors shard, GB (10^9 bytes)
  // What a restart restores: "full" (weights and the training state: optimizer,
  // scheduler, RNG, data position) or "weights"; ckpt::ParseResumeLevel's names.
  std::string resume = "full";
  // [evenfix]
  EvenfixMode evenfix = EvenfixMode::kMin;
  double evenfix_max_drop_pct =
      1.0;  // the gate FAILs when evenfix min would drop more of the tokens
  // [distributed]
  std::string backend = "nccl";
  double watchdog_timeout_min = 30;
  double watchdog_floor_min = 30;
  bool require_flight_recorder = true;
  // [gpu]
  double memory_gb = 0;    // per GPU, when NVML cannot be asked
  double headroom = 0.10;  // fraction of GPU memory kept free
  // [watch] (used by evenkeel agent/watch and the trainer's heartbeat)
  double watch_poll_s = 1;
  double hang_floor_s = 120;
  double hang_factor = 10;
  double checkpoint_allowance_s = 600;
  double throughput_floor_tok_s = 0;
  int throughput_samples = 5;
  double stale_after_s = 10;
  std::string heartbeat_dir;           // where ranks' Heartbeat files are (agent, trainer)
  std::string watch_profile = "B300";  // triage power profile (watcher's deadlock/starvation)
  int64_t final_step = 0;              // the run's last step; 0: from the heartbeats' total_steps
  double agent_timeout_s = 2;          // one agent's poll, connect and read together
  double desync_s = 10;  // a rank in a barrier/save phase this long while others train: deadlock
  std::string
      watch_state_dir;  // watcher state and spool; "" = <run name>.watch beside the run file
  // [alert] (used by evenkeel watch)
  std::string alertmanager_url;  // e.g. http://127.0.0.1:9093
  std::string webhook_url;       // JSON {"text": ...} (Slack-compatible)
  std::string alert_command;     // run with /bin/sh -c, the alert as JSON on stdin
  double alert_backoff_s = 1;    // first retry delay; doubles per failure
  double alert_backoff_max_s = 60;
  double alert_resend_s = 60;  // Alertmanager: re-post firing alerts (its resolve_timeout is 5m)

  // [launch] (evenkeel launch)
  std::string launch_torchrun =
      "torchrun";               // a name on PATH, or a path (it has a '/') relative to the run file
  std::string launch_python;    // the trainer's interpreter, the same way; "": the python beside
                                // torchrun, else python3
  std::string launch_trainer;   // a training script; "": evenkeel's reference trainer, python -m
                                // evenkeel.train
  std::string rdzv_endpoint;    // c10d rendezvous HOST:PORT; "": environment, SLURM, first host
  int rdzv_port = 29500;        // the port when the endpoint is derived
  std::string run_id;           // rendezvous id; "": environment, SLURM_JOB_ID, run name
  std::string launch_dir;       // attempt records; "": CHECKPOINT_DIR/launch
  double gate_timeout_s = 300;  // how long node 0 waits for every node's gate part
  int flight_recorder_entries = 2000;  // TORCH_FR_BUFFER_SIZE for the ranks
  int omp_threads = 0;                 // OMP_NUM_THREADS per rank; 0: cores / processes per node
  double stop_grace_s = 30;            // SIGTERM to SIGKILL when stopping the ranks
  // [retry]
  int max_restarts = 3;         // attempts after the first
  int max_no_progress = 2;      // attempts in a row without a new verified checkpoint: stop
  double retry_backoff_s = 10;  // first wait before a restart; doubles per restart
  double retry_backoff_max_s = 300;

  int world() const { return nodes * gpus_per_node; }
  Topology topology() const { return Topology(nodes, gpus_per_node, hosts); }
  // A path in the run file, resolved against the run file's directory.
  std::string Resolve(const std::string& p) const;
  // model.config, or model.path/config.json; "" when neither is set.
  std::string ConfigPath() const;
  // "run.toml (xxh3 0123456789abcdef)".
  std::string Identity() const;
};

// `overrides` are "section.key=value" texts (the trainer's --set), applied after the
// file's keys with the file's own checks: an unknown key or a wrong type is the error the
// file would get, naming the override in place of the line
// ("run.toml: train.lr (--set train.lr=fast) must be a number"). The value is a TOML
// value (2e-5, true, "x", ["a", "b"]); text that does not parse as one is a string, so
// paths and words need no quotes (checkpoint.dir=/nfs/ckpt, evenfix.mode=off).
Result<RunFile> ParseRunFile(std::string_view toml, const std::string& name,
                             const std::vector<std::string>& overrides = {});
Result<RunFile> ReadRunFile(const std::string& path,
                            const std::vector<std::string>& overrides = {});
// Checks cross-field sanity (positive sizes, known modes). Called by Parse.
Status ValidateRunFile(const RunFile& r);

// Every key as JSON, in sections named as in the TOML ({"train": {"micro_batch": 1, ...}}),
// paths resolved against the run file, plus "path", "xxh3", "world" and "overrides": what
// the Python package's RunFile exposes.
std::string RunFileToJson(const RunFile& r);

}  // namespace ek::run
