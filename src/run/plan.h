// The run plan: memory, steps, tokens and checkpoints, computed from the run
// file, the model's shape and the pack's manifest. Reproduces the field
// report's figures for Qwen3-32B (plan_test.cc pins them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "run/run_file.h"
#include "pack/manifest.h"

namespace ek::run {

// What the plan needs of a model; from a Hugging Face config.json, or just a
// parameter count (then has_shape is false and activations are not estimated).
struct ModelShape {
  double params = 0;
  bool has_shape = false;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0, vocab = 0;
  bool tied_embeddings = false;
};

// Parameter count of a decoder-only transformer (Llama / Qwen / Mistral
// families: GQA attention, SwiGLU MLP, RMSNorm, optional q/k norms).
// Extra fields are fine; a size it needs missing, mistyped or not positive (or
// a mistyped tie_word_embeddings or model_type) is an error naming the field.
Result<ModelShape> ModelFromConfigJson(std::string_view json, const std::string& name);

struct Plan {
  int world = 0;
  double params = 0;
  uint64_t tokens_per_step = 0;  // world x micro_batch x grad_accum x seq_len
  // Memory, bytes.
  double state_bytes = 0;          // 16 B/param: bf16 params + grads, fp32 master, Adam m, v
  double state_bytes_per_gpu = 0;  // FULL_SHARD: states / world
  bool has_activations = false;
  double activation_bytes = 0;       // one micro-batch, no recomputation
  double activation_bytes_ckpt = 0;  // with gradient checkpointing
  double transient_bytes = 0;        // FSDP all-gathered layers in flight + logits
  double per_gpu_bytes = 0;          // states + activations (as configured) + transient
  double gpu_memory_bytes = 0;       // 0 when unknown
  std::string gpu_memory_source;     // "nvml", "run file", ""
  // Steps.
  bool has_pack = false;
  uint64_t global_min_blocks = 0, global_max_blocks = 0;
  uint64_t steps_per_epoch = 0;  // floor(min blocks / (micro_batch x grad_accum))
  uint64_t total_steps = 0;
  uint64_t evenfix_target_blocks = 0;  // min (or max for pad)
  uint64_t evenfix_dropped_blocks = 0;
  uint64_t evenfix_dropped_tokens = 0;
  uint64_t evenfix_padded_blocks = 0;
  double evenfix_dropped_fraction = 0;
  // Checkpoints.
  double checkpoint_bytes = 0;      // bf16 consolidated: 2 B/param
  double checkpoint_write_s = 0;    // checkpoint_bytes / write_gbps
  std::vector<uint64_t> save_steps; // global steps at which a checkpoint is written (capped list)
  uint64_t save_count = 0;
};

// `manifest` may be null (no pack yet); `gpu_memory_bytes` overrides the run
// file when NVML reported a size (0 = not known).
Result<Plan> MakePlan(const RunFile& run, const ModelShape& model, const pack::Manifest* manifest,
                      double nvml_gpu_memory_bytes = 0);

// The model shape a run file names: config.json when given, else params.
Result<ModelShape> ModelForRun(const RunFile& run);

std::string FormatBytes(double bytes);    // "525 GB" (decimal, 3 significant digits)
std::string Thousands(uint64_t v);        // "30,835"
std::string PlanToText(const RunFile& run, const Plan& p);
std::string PlanToJson(const RunFile& run, const Plan& p);

}  // namespace ek::run
