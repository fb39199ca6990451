// The run plan: memory, steps, tokens and checkpoints, computed from the run
// file, the model's shape and the pack's manifest. Reproduces the field
// report's figures for Qwen3-32B (plan_test.cc pins them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "packfile/manifest.h"
#include "run/run_file.h"

namespace ek::run {

// One file of a checkpoint and its size: planned (MakePlan) or measured (a
// model directory's file that every checkpoint copies).
struct CheckpointFile {
  std::string name;
  uint64_t bytes = 0;
};

// The files of a model directory that the checkpoint writer copies into every
// checkpoint when present: python/evenkeel/checkpoint.py's CheckpointWriter
// (config.json rewritten with dtype and use_cache, generation_config.json and
// TOKENIZER_FILES, which it reads from this list through the binding).
// tokenizer.model is the SentencePiece model that Gemma, Llama 2 and Mistral ship
// beside tokenizer.json: transformers' slow tokenizer and llama.cpp's GGUF conversion
// of a Gemma read it, not tokenizer.json.
inline constexpr const char* kCheckpointCopiedFiles[] = {"config.json",
                                                         "generation_config.json",
                                                         "tokenizer.json",
                                                         "tokenizer_config.json",
                                                         "special_tokens_map.json",
                                                         "tokenizer.model",
                                                         "vocab.json",
                                                         "merges.txt",
                                                         "chat_template.jinja",
                                                         "chat_template.json",
                                                         "added_tokens.json"};

// Bytes a parameter takes in a checkpoint's training state: fp32 parameter (4),
// AdamW's exp_avg and exp_avg_sq (4 + 4), beside the bf16 export's 2.
inline constexpr double kTrainStateBytesPerParam = 12;
// Whether checkpoints hold the training state, so that the plan (and the gate's
// storage check) counts it: the reference trainer's saver (python/evenkeel/saver.py)
// writes train_state/ with every checkpoint.
inline constexpr bool kCheckpointsHoldTrainState = true;

// What the plan needs of a model; from a Hugging Face config.json, or just a
// parameter count (then has_shape is false and activations are not estimated).
struct ModelShape {
  double params = 0;
  bool has_shape = false;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0,
          vocab = 0;
  bool tied_embeddings = false;
  bool qk_norm = false;  // per-head q/k RMSNorms (Qwen3)
  // The run's model directory (model.path) and the files of it a checkpoint copies
  // (kCheckpointCopiedFiles present there, with their sizes): ModelForRun measures
  // them. model_dir empty: the run names no model.path, the copies are not known.
  std::string model_dir;
  std::vector<CheckpointFile> copied_files;
};

// Parameter count of a decoder-only transformer (Llama / Qwen / Mistral
// families: GQA attention, SwiGLU MLP, RMSNorm, optional q/k norms).
// Extra fields are fine; a size it needs missing, mistyped or not positive (or
// a mistyped tie_word_embeddings or model_type) is an error naming the field.
Result<ModelShape> ModelFromConfigJson(std::string_view json, const std::string& name);

// The schedule: every step-count fact of a run, computed here and nowhere else.
// The gate checks it, the trainer runs it (evenkeel.Plan through the binding),
// the launcher judges completion by it and the report shows it; a second copy
// of this arithmetic drifts (a max_steps cap known to the trainer alone made
// the launcher restart a finished run until its budget was spent).
//
// Rules (docs/run_format.md, "The schedule"):
//   blocks per step     micro_batch x grad_accum (a trailing partial window is dropped)
//   target blocks       evenfix min: the global minimum; pad: the maximum; off: the
//                       minimum (what every rank is sure to have; each rank's own
//                       count is RankStepsPerEpoch)
//   steps per epoch     target blocks / blocks per step
//   total steps         steps per epoch x epochs, capped by max_steps when > 0
//   epoch e trains      min(steps per epoch, total - e x steps per epoch) steps
//   saves               every global step s <= total with s % save_every == 0
//                       (save_every > 0), every epoch end <= total, and the final step
//   learning rate       linear warmup over warmup_steps, cosine decay ending at the
//                       final step
struct Schedule {
  int world = 0;
  int epochs = 0;
  int64_t max_steps = 0;  // the run file's cap; 0: none
  EvenfixMode evenfix = EvenfixMode::kMin;
  uint64_t blocks_per_step = 0;
  uint64_t global_min_blocks = 0, global_max_blocks = 0;
  uint64_t target_blocks = 0;
  uint64_t steps_per_epoch = 0;
  uint64_t total_steps = 0;  // the final step; 0: nothing to train
  std::vector<uint64_t>
      epoch_steps;  // steps trained in each epoch (the cap may end one early, later ones 0)
  std::vector<uint64_t> save_steps;  // ascending; the final step last (when total_steps > 0)
  uint64_t warmup_steps = 0;
  uint64_t decay_end_step = 0;   // cosine decay ends here (the final step)
  uint64_t tokens_per_step = 0;  // world x blocks per step x seq_len
  uint64_t seq_len = 0;
  uint64_t dropped_blocks = 0, dropped_tokens = 0, padded_blocks = 0;
  double dropped_fraction = 0;        // dropped blocks / all blocks (min mode)
  std::vector<uint64_t> rank_blocks;  // by rank, from the manifest
  // By rank: a full epoch's steps and the last step. Equal to steps_per_epoch and
  // total_steps unless evenfix is off (then each rank runs its own count: unsafe
  // with any spread, which is what "off" exists to show).
  std::vector<uint64_t> rank_steps_per_epoch, rank_total_steps;
  // With evenfix off only (else empty): each rank's own save steps (its epoch ends
  // and last step); the shared save_steps are then the shortest rank's.
  std::vector<std::vector<uint64_t>> rank_save_steps;

  bool IsSave(uint64_t step) const;
};

// The schedule of `run` over these block counts (one per rank of the run's world).
Result<Schedule> MakeSchedule(const RunFile& run, const std::vector<uint64_t>& rank_blocks);
// The same over a pack manifest; a node-local manifest that lacks ranks of the
// world is an error naming them (the trainer then passes every rank's count).
Result<Schedule> MakeSchedule(const RunFile& run, const pack::Manifest& manifest);
// The schedule of a run file read from disk, with the manifest of its data.pack_dir.
Result<Schedule> ScheduleForRun(const RunFile& run);
// {"world":..,"steps_per_epoch":..,"total_steps":..,"save_steps":[..],...}: the
// format `evenkeel plan --json` ("schedule"), the trainer's --dry-run and
// evenkeel.Plan share (docs/run_format.md).
std::string ScheduleToJson(const Schedule& s);

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
  // Steps: the schedule over the manifest's ranks (has_pack), read from it and
  // stated nowhere else in the plan; without a pack it is empty (every count 0).
  bool has_pack = false;
  Schedule schedule;
  // Checkpoints: one save as the trainer writes it (docs/run_format.md, "The checkpoint").
  double checkpoint_bytes = 0;  // weight + extra + state bytes: what one save puts on disk
  double checkpoint_weight_bytes =
      0;  // bf16 safetensors shards: 2 B/param (tied embeddings once) + headers
  double checkpoint_extra_bytes =
      0;  // beside them: the copied model files, the index, evenkeel-checkpoint.json
  // The training state in train_state/ (checkpoint format 2, written by DCP): fp32
  // parameters and AdamW's two moments, kTrainStateBytesPerParam in all, written sharded
  // (each rank its 12 x params / world), so 12 x params on a shared checkpoint.dir;
  // 0 while kCheckpointsHoldTrainState is false.
  double checkpoint_state_bytes = 0;
  int64_t checkpoint_shards = 0;
  bool checkpoint_copies_measured =
      false;  // the copied files' sizes are model.path's (else not counted)
  std::vector<CheckpointFile>
      checkpoint_files;  // every file of one save, by name, with its planned size
                         // (at most 4,096 shards listed; checkpoint_shards counts them all)
  double checkpoint_write_s = 0;  // checkpoint_bytes / write_gbps
};

// `manifest` may be null (no pack yet); `gpu_memory_bytes` overrides the run
// file when NVML reported a size (0 = not known).
Result<Plan> MakePlan(const RunFile& run, const ModelShape& model, const pack::Manifest* manifest,
                      double nvml_gpu_memory_bytes = 0);

// The model shape a run file names: config.json when given, else params; with
// model.path, the sizes of the files there that a checkpoint copies (a file that
// cannot be stat'ed is not copied: it counts 0).
Result<ModelShape> ModelForRun(const RunFile& run);

std::string FormatBytes(double bytes);  // "525 GB" (decimal, 3 significant digits)
std::string Thousands(uint64_t v);      // "30,835"
// "17.4 MB = weights 8.26 MB (bf16, 2 B/param, 1 shard) + 9.13 MB beside them
// (tokenizer.json 7.03 MB, ...; index and manifest 4.10 KB)": the plan's and the gate's.
std::string CheckpointSizeText(const Plan& p);
std::string PlanToText(const RunFile& run, const Plan& p);
std::string PlanToJson(const RunFile& run, const Plan& p);

}  // namespace ek::run
