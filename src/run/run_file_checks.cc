// The run file's value checks (ValidateRunFile): ranges, enumerations and the rules
// across keys, after run/run_file.cc has read every key with its type.
#include <fmt/core.h>

#include <string_view>

#include "ckpt/checkpoint.h"
#include "packfile/manifest.h"
#include "run/run_file.h"

namespace ek::run {

Status ValidateRunFile(const RunFile& r) {
  auto bad = [&](std::string_view what) {
    return InvalidArgumentError(fmt::format("{}: {}", r.path.empty() ? "run" : r.path, what));
  };
  if (r.nodes < 1) return bad("cluster.nodes must be at least 1");
  if (r.gpus_per_node < 1) return bad("cluster.gpus_per_node must be at least 1");
  if (!r.hosts.empty() && static_cast<int>(r.hosts.size()) != r.nodes) {
    return bad(fmt::format("cluster.hosts lists {} hosts for {} nodes", r.hosts.size(), r.nodes));
  }
  if (r.seq_len < 1) return bad("train.seq_len must be positive");
  if (r.micro_batch < 1) return bad("train.micro_batch must be positive");
  if (r.grad_accum < 1) return bad("train.grad_accum must be positive");
  if (r.epochs < 1) return bad("train.epochs must be positive");
  if (r.max_steps < 0) return bad("train.max_steps must be >= 0 (0: no cap)");
  if (r.warmup_steps < 0 || r.save_every < 0)
    return bad("train.warmup_steps and train.save_every must be >= 0");
  if (r.lr <= 0) return bad("train.lr must be positive");
  if (r.weight_decay < 0) return bad("train.weight_decay must be >= 0");
  if (r.min_lr_ratio < 0 || r.min_lr_ratio > 1) return bad("train.min_lr_ratio must be in [0, 1]");
  if (r.max_grad_norm < 0) return bad("train.max_grad_norm must be >= 0 (0: no clipping)");
  if (r.seed < 0) return bad("train.seed must be >= 0");
  if (r.precision != "auto" && r.precision != "bf16" && r.precision != "fp32") {
    return bad(fmt::format("train.precision '{}' (auto, bf16, fp32)", r.precision));
  }
  if (r.log_every < 1) return bad("train.log_every must be positive");
  if (r.keep < 1) return bad("checkpoint.keep must be at least 1");
  if (r.write_gbps <= 0) return bad("checkpoint.write_gbps must be positive");
  if (r.shard_size_gb <= 0) return bad("checkpoint.shard_size_gb must be positive");
  if (!ckpt::ParseResumeLevel(r.resume)) {
    return bad(fmt::format("checkpoint.resume '{}' (full, weights)", r.resume));
  }
  if (r.headroom < 0 || r.headroom >= 1) return bad("gpu.headroom must be in [0, 1)");
  if (!(r.evenfix_max_drop_pct >= 0 && r.evenfix_max_drop_pct <= 100)) {
    return bad("evenfix.max_drop_pct must be in [0, 100]");
  }
  if (r.params < 0 || r.memory_gb < 0) return bad("model.params and gpu.memory_gb must be >= 0");
  if (r.backend != "nccl" && r.backend != "gloo")
    return bad("distributed.backend must be nccl or gloo");
  if (r.watchdog_timeout_min <= 0) return bad("distributed.watchdog_timeout_min must be positive");
  if (r.watch_poll_s <= 0 || r.stale_after_s <= 0 || r.agent_timeout_s <= 0) {
    return bad("watch.poll_s, watch.stale_after_s and watch.agent_timeout_s must be positive");
  }
  if (r.hang_floor_s <= 0 || r.hang_factor <= 0 || r.checkpoint_allowance_s < 0) {
    return bad(
        "watch.hang_floor_s and watch.hang_factor must be positive, checkpoint_allowance_s >= 0");
  }
  if (r.throughput_floor_tok_s < 0 || r.throughput_samples < 1 || r.final_step < 0) {
    return bad(
        "watch.throughput_floor_tok_s and watch.final_step must be >= 0, throughput_samples >= 1");
  }
  if (r.alert_backoff_s <= 0 || r.alert_backoff_max_s < r.alert_backoff_s ||
      r.alert_resend_s <= 0) {
    return bad("alert.backoff_s and alert.resend_s must be positive, backoff_max_s >= backoff_s");
  }
  if (r.desync_s <= 0) return bad("watch.desync_s must be positive");
  if (r.rdzv_port < 1 || r.rdzv_port > 65535)
    return bad("launch.rdzv_port must be a port (1-65535)");
  if (r.gate_timeout_s <= 0 || r.stop_grace_s < 0) {
    return bad("launch.gate_timeout_s must be positive and launch.stop_grace_s >= 0");
  }
  if (r.flight_recorder_entries < 0 || r.omp_threads < 0) {
    return bad("launch.flight_recorder_entries and launch.omp_threads must be >= 0");
  }
  if (r.launch_torchrun.empty()) return bad("launch.torchrun must name torchrun");
  if (r.attention != "isolated" && r.attention != "cross") {
    return bad(fmt::format("data.attention '{}' (isolated, cross)", r.attention));
  }
  if (r.mixture_seed < 0) return bad("data.mixture_seed must be >= 0");
  if (r.mixture_tokens < 0) return bad("data.mixture_tokens must be >= 0");
  if (auto shard = pack::ParseShardMode(r.shard); !shard.ok()) {
    return bad(fmt::format("data.shard: {}", shard.status().message()));
  }
  if (auto packing = pack::ParsePacking(r.packing); !packing.ok()) {
    return bad(fmt::format("data.packing: {}", packing.status().message()));
  }
  if (r.packing_seed < 0) return bad("data.packing_seed must be >= 0");
  if (!r.sources.empty()) {
    const bool weighted = r.sources[0].weight > 0;
    for (size_t i = 1; i < r.sources.size(); ++i) {
      if ((r.sources[i].weight > 0) != weighted) {
        return bad(fmt::format(
            "data.source[{}] (line {}) {} and data.source[0] (line {}) {}: give every "
            "source a weight (shares of the tokens) or none (each source in whole passes, "
            "epochs = 1 by default)",
            i, r.sources[i].line, r.sources[i].weight > 0 ? "has a weight" : "has no weight",
            r.sources[0].line, weighted ? "has one" : "has none"));
      }
    }
  }
  if (r.max_restarts < 0 || r.max_no_progress < 1) {
    return bad("retry.max_restarts must be >= 0 and retry.max_no_progress >= 1");
  }
  if (r.retry_backoff_s < 0 || r.retry_backoff_max_s < r.retry_backoff_s) {
    return bad("retry.backoff_s must be >= 0 and retry.backoff_max_s >= backoff_s");
  }
  return Status::Ok();
}

}  // namespace ek::run
