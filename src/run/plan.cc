// One file over 600 lines: the plan is one fact, computed and rendered (text, JSON) here.
#include "run/plan.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "ckpt/manifest.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/version.h"

namespace ek::run {

Result<ModelShape> ModelFromConfigJson(std::string_view json, const std::string& name) {
  // A Hugging Face config holds many fields this does not read: they are fine.
  // The ones read are checked: missing or mistyped is an error naming the field.
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  // Sizes are positive integers.
  auto size = [&](const char* key, int64_t* out) -> Status {
    EK_RETURN_IF_ERROR(f.Int(key, out));
    if (*out < 1) return f.Err(key, fmt::format("{} is not positive", *out));
    return Status::Ok();
  };
  // Optional sizes may be null: Hugging Face writes None so ("head_dim": null), meaning the
  // default.
  auto optional = [&](const char* key, int64_t* out) -> Status {
    if (f.AbsentOrNull(key)) return Status::Ok();
    return size(key, out);
  };
  ModelShape m;
  EK_RETURN_IF_ERROR(size("hidden_size", &m.hidden));
  EK_RETURN_IF_ERROR(size("num_hidden_layers", &m.layers));
  EK_RETURN_IF_ERROR(size("num_attention_heads", &m.heads));
  EK_RETURN_IF_ERROR(size("intermediate_size", &m.intermediate));
  EK_RETURN_IF_ERROR(size("vocab_size", &m.vocab));
  m.kv_heads = m.heads;
  EK_RETURN_IF_ERROR(optional("num_key_value_heads", &m.kv_heads));
  m.head_dim = m.hidden / m.heads;
  EK_RETURN_IF_ERROR(optional("head_dim", &m.head_dim));
  EK_RETURN_IF_ERROR(f.OptBool("tie_word_embeddings", &m.tied_embeddings));
  std::string type;
  EK_RETURN_IF_ERROR(f.OptStr("model_type", &type));
  const bool qk_norm = type.rfind("qwen3", 0) == 0;
  double h = m.hidden, layers = m.layers, q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  double attn = h * q + 2 * h * kv + q * h;
  double mlp = 3 * h * m.intermediate;
  double norms = 2 * h + (qk_norm ? 2.0 * m.head_dim : 0);
  double embed = static_cast<double>(m.vocab) * h;
  m.params = embed * (m.tied_embeddings ? 1 : 2) + layers * (attn + mlp + norms) + h;
  m.qk_norm = qk_norm;
  m.has_shape = true;
  return m;
}

Result<ModelShape> ModelForRun(const RunFile& run) {
  ModelShape m;
  if (std::string path = run.ConfigPath(); !path.empty()) {
    EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    EK_ASSIGN_OR_RETURN(m, ModelFromConfigJson(text, path));
  } else if (run.params <= 0) {
    return InvalidArgumentError(
        fmt::format("{}: model.path, model.config or model.params is needed for a plan",
                    run.path.empty() ? "run" : run.path));
  } else {
    m.params = run.params;
  }
  if (!run.model_path.empty()) {
    // What the checkpoint writer copies: the regular files (symlinks followed, as
    // shutil.copyfile does) of these names. A missing model directory is the gate's
    // data check's finding; here it only copies nothing.
    m.model_dir = run.Resolve(run.model_path);
    for (const char* name : kCheckpointCopiedFiles) {
      struct stat st;
      std::string file = m.model_dir + "/" + name;
      if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        m.copied_files.push_back({name, static_cast<uint64_t>(st.st_size)});
      }
    }
  }
  return m;
}

bool Schedule::IsSave(uint64_t step) const {
  return std::binary_search(save_steps.begin(), save_steps.end(), step);
}

namespace {

// The schedule over these ranks' block counts, however many there are (the plan's
// summary over the ranks a node or a part has seen); MakeSchedule insists on the world.
Result<Schedule> ScheduleOver(const RunFile& run, const std::vector<uint64_t>& rank_blocks) {
  const std::string name = run.path.empty() ? "run" : run.path;
  if (rank_blocks.empty())
    return InvalidArgumentError(fmt::format("{}: a schedule needs block counts", name));
  if (run.micro_batch < 1 || run.grad_accum < 1 || run.epochs < 1 || run.seq_len < 1) {
    return InvalidArgumentError(
        fmt::format("{}: micro_batch, grad_accum, epochs and seq_len must be positive", name));
  }
  Schedule s;
  s.world = run.world();
  s.epochs = run.epochs;
  s.max_steps = run.max_steps;
  s.evenfix = run.evenfix;
  s.seq_len = static_cast<uint64_t>(run.seq_len);
  s.rank_blocks = rank_blocks;
  s.blocks_per_step = static_cast<uint64_t>(run.micro_batch) * run.grad_accum;
  s.tokens_per_step = static_cast<uint64_t>(s.world) * s.blocks_per_step * s.seq_len;
  s.global_min_blocks = *std::min_element(rank_blocks.begin(), rank_blocks.end());
  s.global_max_blocks = *std::max_element(rank_blocks.begin(), rank_blocks.end());
  const bool pad = run.evenfix == EvenfixMode::kPad;
  s.target_blocks = pad ? s.global_max_blocks : s.global_min_blocks;
  s.steps_per_epoch = s.target_blocks / s.blocks_per_step;
  s.total_steps = s.steps_per_epoch * static_cast<uint64_t>(run.epochs);
  if (run.max_steps > 0)
    s.total_steps = std::min<uint64_t>(s.total_steps, static_cast<uint64_t>(run.max_steps));
  for (int e = 0; e < run.epochs; ++e) {
    uint64_t base = s.steps_per_epoch * e;
    s.epoch_steps.push_back(s.total_steps > base ? std::min(s.steps_per_epoch, s.total_steps - base)
                                                 : 0);
  }
  const uint64_t every = run.save_every > 0 ? static_cast<uint64_t>(run.save_every) : 0;
  auto saves = [every](uint64_t steps_per_epoch, uint64_t total) {
    std::vector<uint64_t> out;
    for (uint64_t step = 1; step <= total; ++step) {
      if ((every && step % every == 0) || step % steps_per_epoch == 0 || step == total)
        out.push_back(step);
    }
    return out;
  };
  s.save_steps = saves(s.steps_per_epoch, s.total_steps);
  for (uint64_t b : rank_blocks) {
    uint64_t own = run.evenfix == EvenfixMode::kOff ? b / s.blocks_per_step : s.steps_per_epoch;
    uint64_t total = own * static_cast<uint64_t>(run.epochs);
    if (run.max_steps > 0) total = std::min<uint64_t>(total, static_cast<uint64_t>(run.max_steps));
    s.rank_steps_per_epoch.push_back(own);
    s.rank_total_steps.push_back(total);
    if (run.evenfix == EvenfixMode::kOff) s.rank_save_steps.push_back(saves(own, total));
  }
  s.warmup_steps = run.warmup_steps > 0 ? static_cast<uint64_t>(run.warmup_steps) : 0;
  s.decay_end_step = s.total_steps;
  uint64_t total_blocks = 0;
  for (uint64_t b : rank_blocks) {
    total_blocks += b;
    if (pad) {
      s.padded_blocks += s.global_max_blocks - b;
    } else {
      s.dropped_blocks += b - s.global_min_blocks;
    }
  }
  if (run.evenfix == EvenfixMode::kOff)
    s.dropped_blocks = 0;  // nothing pinned: each rank trains its own
  s.dropped_tokens = s.dropped_blocks * s.seq_len;
  s.dropped_fraction = total_blocks ? static_cast<double>(s.dropped_blocks) / total_blocks : 0;
  return s;
}

// One tensor the checkpoint writer saves: its name and shape, in the order of
// the model's named_parameters() (tied parameters once), which is the order the
// writer fills its shards in.
struct PlannedTensor {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t Numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

// The tensors of a Llama / Qwen / Mistral decoder as transformers names them;
// their element counts add up to ModelFromConfigJson's parameter count.
std::vector<PlannedTensor> DecoderTensors(const ModelShape& m) {
  const int64_t h = m.hidden, q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim,
                i = m.intermediate;
  std::vector<PlannedTensor> t;
  t.push_back({"model.embed_tokens.weight", {m.vocab, h}});
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    t.push_back({p + "self_attn.q_proj.weight", {q, h}});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    t.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (m.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {m.head_dim}});
      t.push_back({p + "self_attn.k_norm.weight", {m.head_dim}});
    }
    t.push_back({p + "mlp.gate_proj.weight", {i, h}});
    t.push_back({p + "mlp.up_proj.weight", {i, h}});
    t.push_back({p + "mlp.down_proj.weight", {h, i}});
    t.push_back({p + "input_layernorm.weight", {h}});
    t.push_back({p + "post_attention_layernorm.weight", {h}});
  }
  t.push_back({"model.norm.weight", {h}});
  if (!m.tied_embeddings) t.push_back({"lm_head.weight", {m.vocab, h}});
  return t;
}

// Bytes of a file as the manifest lists it, in chunk hashes.
ckpt::FileRecord PlannedRecord(const std::string& name, uint64_t bytes) {
  ckpt::FileRecord f;
  f.name = name;
  f.size = bytes;
  f.chunks.assign(std::max<uint64_t>(1, (bytes + ckpt::kChunkBytes - 1) / ckpt::kChunkBytes), 0);
  return f;
}

// The trainer's `extra` object in evenkeel-checkpoint.json (pinned blocks, batch
// sizes, seed, total steps, the data position): about 200 bytes; reserved whole.
constexpr uint64_t kManifestExtraBytes = 512;

// Shards listed one by one in Plan::checkpoint_files; a larger checkpoint (only
// an absurd model.params makes one) is counted, not listed, past these.
constexpr size_t kListedShards = 4096;
// Past this many tensors (a config.json claiming absurd layers) the weights are
// planned from the parameter count alone.
constexpr int64_t kMaxPlannedTensors = 1 << 20;

// One save as python/evenkeel/checkpoint.py's CheckpointWriter writes it:
//   model-0000k-of-0000n.safetensors  bf16 tensors, a new shard when the next tensor
//                                     would pass shard_size_gb (as _plan_shards splits),
//                                     each with its JSON header (8 B length + the header,
//                                     padded to 8 bytes)
//   model.safetensors.index.json      json.dump(indent=2): a line per tensor
//   the copied model files            measured in model.path (kCheckpointCopiedFiles)
//   evenkeel-checkpoint.json          the manifest writer's own text over these files
// Exact for the weights of the decoder families ModelFromConfigJson knows; the
// headers and the index to within a few bytes a tensor. With only model.params the
// weights are 2 B/param in ceil(bytes / shard size) equal shards, and the headers
// and the index are not known (each shard's header counts its metadata only).
void PlanCheckpoint(const RunFile& run, const ModelShape& model, Plan* p) {
  constexpr double kBf16 = 2;
  const double shard_bytes = std::max(1.0, std::floor(run.shard_size_gb * 1e9));
  const uint64_t meta_header = std::string_view(R"({"__metadata__":{"format":"pt"}})").size();
  auto padded = [](uint64_t header) { return 8 + (header + 7) / 8 * 8; };
  // Per shard: its tensors' bytes and the header's; every shard when the shape is known.
  std::vector<uint64_t> data, header;
  std::vector<std::pair<std::string, size_t>> index;  // tensor name, shard
  double shards = 0, weights = 0, weight_data = 0;
  const int64_t per_layer = 9 + (model.qk_norm ? 2 : 0);
  if (model.has_shape && model.layers <= kMaxPlannedTensors / per_layer) {
    uint64_t used = 0;
    for (const PlannedTensor& t : DecoderTensors(model)) {
      const uint64_t bytes = t.Numel() * static_cast<uint64_t>(kBf16);
      if (data.empty() || (used && used + bytes > shard_bytes)) {
        data.push_back(0);
        header.push_back(meta_header);
        used = 0;
      }
      // "NAME":{"dtype":"BF16","shape":[A,B],"data_offsets":[BEGIN,END]},
      std::string dims;
      for (size_t k = 0; k < t.shape.size(); ++k)
        dims += (k ? "," : "") + std::to_string(t.shape[k]);
      header.back() +=
          fmt::format(R"("{}":{{"dtype":"BF16","shape":[{}],"data_offsets":[{},{}]}},)", t.name,
                      dims, data.back(), data.back() + bytes)
              .size();
      data.back() += bytes;
      used += bytes;
      index.emplace_back(t.name, data.size() - 1);
    }
    shards = static_cast<double>(data.size());
    for (size_t k = 0; k < data.size(); ++k) {
      weights += static_cast<double>(padded(header[k]) + data[k]);
      weight_data += static_cast<double>(data[k]);
    }
  } else {
    weight_data = std::round(kBf16 * model.params);
    shards = std::max(1.0, std::ceil(weight_data / shard_bytes));
    weights = weight_data + shards * static_cast<double>(padded(meta_header));
    const size_t listed = static_cast<size_t>(std::min<double>(shards, kListedShards));
    const uint64_t each = static_cast<uint64_t>(weight_data / shards);
    data.assign(listed, each);
    header.assign(listed, meta_header);
  }
  const uint64_t count = static_cast<uint64_t>(shards);
  auto shard_name = [count](size_t k) {
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, count);
  };
  std::vector<CheckpointFile> files;
  for (size_t k = 0; k < data.size() && k < kListedShards; ++k)
    files.push_back({shard_name(k), padded(header[k]) + data[k]});
  const double unlisted = shards - static_cast<double>(files.size());
  // {"metadata": {"total_size": N}, "weight_map": {NAME: SHARD, ...}}, indent 2, a newline at the
  // end.
  uint64_t index_bytes = fmt::format(
                             "{{\n  \"metadata\": {{\n    \"total_size\": {:.0f}\n  }},\n  "
                             "\"weight_map\": {{\n  }}\n}}\n",
                             weight_data)
                             .size();
  // A line per tensor: `    "NAME": "SHARD",`.
  for (const auto& [name, k] : index)
    index_bytes += 4 + (name.size() + 2) + 2 + (shard_name(k).size() + 2) + 2;
  files.push_back({"model.safetensors.index.json", index_bytes});
  for (const CheckpointFile& f : model.copied_files) files.push_back(f);
  auto by_name = [](const auto& a, const auto& b) { return a.name < b.name; };
  std::sort(files.begin(), files.end(), by_name);
  ckpt::CheckpointManifest meta;
  meta.run.name = run.name;
  meta.run.path = run.path;
  meta.pack.dir = run.Resolve(run.pack_dir);
  meta.created = "2026-01-01T00:00:00Z";
  meta.evenkeel_version = kVersion;
  for (const CheckpointFile& f : files) meta.files.push_back(PlannedRecord(f.name, f.bytes));
  // The training state (format 2): DCP's files in train_state/, each rank's
  // __R_0.distcp its 12 x params / world (fp32 parameters, AdamW's two
  // moments), listed in the manifest too. The small .metadata and the
  // scheduler, RNG and data states are within the manifest's reserve.
  const double state_bytes =
      kCheckpointsHoldTrainState ? kTrainStateBytesPerParam * model.params : 0;
  const int world = std::max(1, run.world());
  double more_chunks = 0;
  double chunk_hash_bytes = 0;  // what one more chunk hash adds to a record
  if (kCheckpointsHoldTrainState) {
    meta.train_state = ckpt::TrainStateRef{};
    meta.train_state->world = world;
    meta.train_state->precision = "fp32";
    meta.train_state->contents = {"model", "optimizer", "scheduler", "rng", "data"};
    meta.files.push_back(PlannedRecord(std::string(ckpt::kTrainStateDir) + "/.metadata", 0));
    // Each rank's record is listed with one chunk hash and the rest counted (an
    // absurd model.params would make billions of them).
    const double rank_state = std::floor(state_bytes / world);
    more_chunks = std::max(0.0, std::ceil(rank_state / static_cast<double>(ckpt::kChunkBytes)) - 1);
    for (int r = 0; r < world && static_cast<size_t>(r) < kListedShards; ++r) {
      const std::string name = fmt::format("{}/__{}_0.distcp", ckpt::kTrainStateDir, r);
      meta.files.push_back(PlannedRecord(name, 1));
      if (r == 0) {
        const size_t one = ckpt::CheckpointManifestToJson(meta).size();
        meta.files.back() = PlannedRecord(name, ckpt::kChunkBytes + 1);
        chunk_hash_bytes = static_cast<double>(ckpt::CheckpointManifestToJson(meta).size() - one);
      }
      meta.files.back().size = static_cast<uint64_t>(rank_state);
      meta.files.back().chunks.resize(1);
    }
  }
  double manifest_bytes =
      more_chunks * chunk_hash_bytes * static_cast<double>(std::min<size_t>(world, kListedShards)) +
      static_cast<double>(ckpt::CheckpointManifestToJson(meta).size() + kManifestExtraBytes);
  if (unlisted > 0) {
    // Each shard past the listed ones adds a record like the last listed shard's.
    const size_t before = ckpt::CheckpointManifestToJson(meta).size();
    meta.files.push_back(
        PlannedRecord(shard_name(kListedShards - 1), padded(header.back()) + data.back()));
    manifest_bytes +=
        unlisted * static_cast<double>(ckpt::CheckpointManifestToJson(meta).size() - before);
  }
  files.push_back({std::string(ckpt::kManifestName), static_cast<uint64_t>(manifest_bytes)});
  std::sort(files.begin(), files.end(), by_name);
  double extra = 0;
  for (const CheckpointFile& f : files) {
    if (f.name.rfind("model-", 0) != 0)
      extra += static_cast<double>(f.bytes);  // the shards are the weights
  }
  p->checkpoint_weight_bytes = weights;
  p->checkpoint_extra_bytes = extra;
  p->checkpoint_state_bytes = state_bytes;
  p->checkpoint_bytes =
      p->checkpoint_weight_bytes + p->checkpoint_extra_bytes + p->checkpoint_state_bytes;
  p->checkpoint_shards = static_cast<int64_t>(shards);
  p->checkpoint_copies_measured = !model.model_dir.empty();
  p->checkpoint_files = std::move(files);
}

}  // namespace

Result<Schedule> MakeSchedule(const RunFile& run, const std::vector<uint64_t>& rank_blocks) {
  if (static_cast<int>(rank_blocks.size()) != run.world()) {
    return InvalidArgumentError(
        fmt::format("{}: a schedule needs the block count of each of the {} ranks, got {}",
                    run.path.empty() ? "run" : run.path, run.world(), rank_blocks.size()));
  }
  return ScheduleOver(run, rank_blocks);
}

Result<Schedule> MakeSchedule(const RunFile& run, const pack::Manifest& manifest) {
  std::vector<uint64_t> blocks(static_cast<size_t>(std::max(0, manifest.world)), 0);
  std::vector<bool> seen(blocks.size(), false);
  for (const auto& r : manifest.ranks) {
    if (r.rank < 0 || r.rank >= manifest.world) continue;
    blocks[r.rank] = r.blocks;
    seen[r.rank] = true;
  }
  std::vector<int64_t> missing;
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) missing.push_back(static_cast<int64_t>(r));
  }
  const std::string name = run.path.empty() ? "run" : run.path;
  if (!missing.empty()) {
    return FailedPreconditionError(
        fmt::format("{}: the pack manifest has no block count for rank(s) {} of world {} (a "
                    "node-local pack: merge the "
                    "nodes' manifests with `evenkeel pack merge`, or give every rank's count)",
                    name, CompactRanges(missing), manifest.world));
  }
  if (manifest.world != run.world()) {
    return FailedPreconditionError(
        fmt::format("{}: world {} = {} nodes x {} GPUs, but the pack was made for world {}", name,
                    run.world(), run.nodes, run.gpus_per_node, manifest.world));
  }
  return MakeSchedule(run, blocks);
}

Result<Schedule> ScheduleForRun(const RunFile& run) {
  if (run.pack_dir.empty()) {
    return InvalidArgumentError(fmt::format("{}: data.pack_dir is needed for a schedule",
                                            run.path.empty() ? "run" : run.path));
  }
  EK_ASSIGN_OR_RETURN(pack::Manifest m, pack::ReadManifest(run.Resolve(run.pack_dir)));
  return MakeSchedule(run, m);
}

namespace {

void WriteSchedule(JsonWriter& w, const Schedule& s) {
  w.BeginObject().Key("world").Int(s.world).Key("epochs").Int(s.epochs);
  w.Key("max_steps").Int(s.max_steps).Key("evenfix").Str(EvenfixModeName(s.evenfix));
  w.Key("blocks_per_step").Uint(s.blocks_per_step).Key("seq_len").Uint(s.seq_len);
  w.Key("global_min_blocks").Uint(s.global_min_blocks);
  w.Key("global_max_blocks").Uint(s.global_max_blocks);
  w.Key("target_blocks").Uint(s.target_blocks).Key("steps_per_epoch").Uint(s.steps_per_epoch);
  w.Key("total_steps").Uint(s.total_steps);
  w.Key("epoch_steps").IntArray(s.epoch_steps);
  w.Key("save_steps").IntArray(s.save_steps);
  w.Key("warmup_steps").Uint(s.warmup_steps).Key("decay_end_step").Uint(s.decay_end_step);
  w.Key("tokens_per_step").Uint(s.tokens_per_step).Key("dropped_blocks").Uint(s.dropped_blocks);
  w.Key("dropped_tokens").Uint(s.dropped_tokens).Key("padded_blocks").Uint(s.padded_blocks);
  // Nine significant digits, the form the trainer and the tests have always read.
  w.Key("dropped_fraction").Raw(fmt::format("{:.9g}", s.dropped_fraction));
  w.Key("rank_blocks").IntArray(s.rank_blocks);
  w.Key("rank_steps_per_epoch").IntArray(s.rank_steps_per_epoch);
  w.Key("rank_total_steps").IntArray(s.rank_total_steps);
  w.Key("rank_save_steps").BeginArray();
  for (const auto& v : s.rank_save_steps) w.IntArray(v);
  w.EndArray().EndObject();
}

}  // namespace

std::string ScheduleToJson(const Schedule& s) {
  JsonWriter w;
  WriteSchedule(w, s);
  return w.str();
}

Result<Plan> MakePlan(const RunFile& run, const ModelShape& model, const pack::Manifest* manifest,
                      double nvml_gpu_memory_bytes) {
  Plan p;
  p.world = run.world();
  p.params = model.params;
  const double seq = run.seq_len, mb = run.micro_batch;
  p.tokens_per_step =
      static_cast<uint64_t>(p.world) * run.micro_batch * run.grad_accum * run.seq_len;
  p.state_bytes = 16.0 * model.params;
  p.state_bytes_per_gpu = p.state_bytes / p.world;
  if (model.has_shape) {
    // bf16 tensors a SwiGLU decoder layer keeps for backward, per token, with
    // fused (flash) attention: norm in/out x2, q/k/v, attention out, o-proj
    // in, residual, gate/up outputs, activation, down-proj input.
    double h = model.hidden, q = model.heads * model.head_dim, kv = model.kv_heads * model.head_dim;
    double per_token_layer = 2.0 * (4 * h + q + 2 * kv + q + h + 4.0 * model.intermediate);
    p.activation_bytes = per_token_layer * model.layers * seq * mb;
    // Recomputation keeps each layer's input, and one layer's activations live.
    p.activation_bytes_ckpt = 2.0 * h * model.layers * seq * mb + per_token_layer * seq * mb;
    p.has_activations = true;
    // Two layers all-gathered in bf16 (compute + prefetch) and the fp32 logits with their gradient.
    double layer_params =
        (model.params - model.vocab * h * (model.tied_embeddings ? 1 : 2)) / model.layers;
    p.transient_bytes = 2 * 2 * layer_params + 2 * 4.0 * model.vocab * seq * mb;
  }
  double act = run.gradient_checkpointing ? p.activation_bytes_ckpt : p.activation_bytes;
  p.per_gpu_bytes = p.state_bytes_per_gpu + act + p.transient_bytes;
  if (nvml_gpu_memory_bytes > 0) {
    p.gpu_memory_bytes = nvml_gpu_memory_bytes;
    p.gpu_memory_source = "nvml";
  } else if (run.memory_gb > 0) {
    p.gpu_memory_bytes = run.memory_gb * 1e9;
    p.gpu_memory_source = "run file";
  }
  PlanCheckpoint(run, model, &p);
  p.checkpoint_write_s = p.checkpoint_bytes / (run.write_gbps * 1e9);
  if (manifest && !manifest->ranks.empty()) {
    // Over the ranks the manifest has (a node's part sees its own); whether they are the
    // run's whole world is the gate's check, not a reason to have no plan.
    std::vector<uint64_t> blocks;
    for (const auto& r : manifest->ranks) blocks.push_back(r.blocks);
    EK_ASSIGN_OR_RETURN(Schedule sch, ScheduleOver(run, blocks));
    p.has_pack = true;
    p.schedule = std::move(sch);
  }
  return p;
}

std::string FormatBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) {
    b /= 1000;
    ++u;
  }
  if (b >= 100) return fmt::format("{:.0f} {}", b, units[u]);
  if (b >= 10) return fmt::format("{:.1f} {}", b, units[u]);
  return fmt::format("{:.2f} {}", b, units[u]);
}

std::string Thousands(uint64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out.push_back(',');
    out.push_back(*it);
    ++n;
  }
  return std::string(out.rbegin(), out.rend());
}

std::string CheckpointSizeText(const Plan& p) {
  std::vector<CheckpointFile> copied;
  double small = 0;  // the index and the manifest: the files the writer makes besides the shards
  for (const CheckpointFile& f : p.checkpoint_files) {
    if (f.name == ckpt::kManifestName || f.name == "model.safetensors.index.json") {
      small += static_cast<double>(f.bytes);
    } else if (f.name.size() < 12 || f.name.compare(f.name.size() - 12, 12, ".safetensors") != 0) {
      copied.push_back(f);
    }
  }
  std::stable_sort(copied.begin(), copied.end(),
                   [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  std::string beside;
  for (size_t i = 0; i < copied.size() && i < 3; ++i) {
    beside += fmt::format("{}{} {}", i ? ", " : "", copied[i].name,
                          FormatBytes(static_cast<double>(copied[i].bytes)));
  }
  if (copied.size() > 3) beside += fmt::format(" and {} more", copied.size() - 3);
  if (!p.checkpoint_copies_measured) {
    beside = "the model files a save copies are not counted: the run names no model.path";
  } else if (copied.empty()) {
    beside = "model.path has none of the files a save copies";
  }
  std::string o = fmt::format(
      "{} = weights {} (bf16, 2 B/param, {} shard{}) + {} beside them ({}; index and manifest {})",
      FormatBytes(p.checkpoint_bytes), FormatBytes(p.checkpoint_weight_bytes), p.checkpoint_shards,
      p.checkpoint_shards == 1 ? "" : "s", FormatBytes(p.checkpoint_extra_bytes), beside,
      FormatBytes(small));
  if (p.checkpoint_state_bytes > 0)
    o += fmt::format(" + training state {}", FormatBytes(p.checkpoint_state_bytes));
  return o;
}

std::string PlanToText(const RunFile& run, const Plan& p) {
  std::string o;
  o += fmt::format("run {}: {} node(s) x {} GPU(s) = world {}\n", run.name, run.nodes,
                   run.gpus_per_node, p.world);
  o += fmt::format("model: {:.2f}B parameters{}\n", p.params / 1e9,
                   run.model_name.empty() ? "" : " (" + run.model_name + ")");
  o += fmt::format("model states (16 B/param): {} total, {} per GPU (FULL_SHARD over {})\n",
                   FormatBytes(p.state_bytes), FormatBytes(p.state_bytes_per_gpu), p.world);
  if (p.has_activations) {
    o += fmt::format(
        "activations per micro-batch (estimate): {} without gradient checkpointing, {} with{}\n",
        FormatBytes(p.activation_bytes), FormatBytes(p.activation_bytes_ckpt),
        run.gradient_checkpointing ? " (on)" : " (off)");
    o += fmt::format("transient (gathered layers, logits): {}\n", FormatBytes(p.transient_bytes));
  } else {
    o += "activations: not estimated (give model.config, the model's config.json)\n";
  }
  o += fmt::format("per GPU: {}", FormatBytes(p.per_gpu_bytes));
  if (p.gpu_memory_bytes > 0) {
    o += fmt::format(" of {} ({}, {:.0f}%)", FormatBytes(p.gpu_memory_bytes), p.gpu_memory_source,
                     100 * p.per_gpu_bytes / p.gpu_memory_bytes);
  }
  o += "\n";
  o += fmt::format("tokens per step: {} ({} x micro-batch {} x accumulation {} x seq {})\n",
                   Thousands(p.tokens_per_step), p.world, run.micro_batch, run.grad_accum,
                   run.seq_len);
  if (p.has_pack) {
    const Schedule& s = p.schedule;
    o += fmt::format("blocks per rank: min {}, max {}, spread {}\n", Thousands(s.global_min_blocks),
                     Thousands(s.global_max_blocks),
                     Thousands(s.global_max_blocks - s.global_min_blocks));
    const bool capped =
        run.max_steps > 0 && s.total_steps < s.steps_per_epoch * static_cast<uint64_t>(run.epochs);
    o += fmt::format(
        "steps per epoch: {} (from {} blocks, evenfix {}), {} epoch(s): {} steps{}\n",
        Thousands(s.steps_per_epoch), Thousands(s.target_blocks), EvenfixModeName(run.evenfix),
        run.epochs, Thousands(s.total_steps),
        capped ? fmt::format(" (capped by max_steps = {} of {})", run.max_steps,
                             Thousands(s.steps_per_epoch * static_cast<uint64_t>(run.epochs)))
               : "");
    if (run.evenfix == EvenfixMode::kPad) {
      o += fmt::format("evenfix pad: {} blocks repeated so no data is dropped\n",
                       Thousands(s.padded_blocks));
    } else {
      o += fmt::format("evenfix drops {} blocks = {} tokens ({:.3f}% of the data)\n",
                       Thousands(s.dropped_blocks), Thousands(s.dropped_tokens),
                       100 * s.dropped_fraction);
    }
  } else {
    o += "steps: no pack manifest (data.pack_dir) yet\n";
  }
  o += "checkpoint as written: " + CheckpointSizeText(p) +
       fmt::format(", about {:.0f} s at {} GB/s\n", p.checkpoint_write_s, run.write_gbps);
  if (p.has_pack) {
    const auto& saves = p.schedule.save_steps;
    std::string at;
    for (size_t i = 0; i < saves.size() && i < 12; ++i) at += (i ? ", " : "") + Thousands(saves[i]);
    if (saves.size() > 12)
      at += fmt::format(", ... {} ({} in all)", Thousands(saves.back()), saves.size());
    o += fmt::format(
        "checkpoints: {} (every {} steps, at each epoch end and at the final step), {} kept: at "
        "{}\n",
        Thousands(saves.size()), run.save_every, run.keep, at.empty() ? "none" : at);
    o += fmt::format("learning rate: warmup {} steps, cosine decay to step {}\n",
                     Thousands(p.schedule.warmup_steps), Thousands(p.schedule.decay_end_step));
  }
  return o;
}

std::string PlanToJson(const RunFile& run, const Plan& p) {
  JsonWriter w;
  w.BeginObject().Key("run").Str(run.name).Key("world").Int(p.world);
  w.Key("params").Fixed(p.params, 0).Key("tokens_per_step").Uint(p.tokens_per_step);
  w.Key("state_bytes").Fixed(p.state_bytes, 0);
  w.Key("state_bytes_per_gpu").Fixed(p.state_bytes_per_gpu, 0);
  if (p.has_activations) {
    w.Key("activation_bytes").Fixed(p.activation_bytes, 0);
    w.Key("activation_bytes_ckpt").Fixed(p.activation_bytes_ckpt, 0);
    w.Key("transient_bytes").Fixed(p.transient_bytes, 0);
  }
  w.Key("gradient_checkpointing").Bool(run.gradient_checkpointing);
  w.Key("per_gpu_bytes").Fixed(p.per_gpu_bytes, 0);
  w.Key("gpu_memory_bytes").Fixed(p.gpu_memory_bytes, 0);
  w.Key("checkpoint_bytes").Fixed(p.checkpoint_bytes, 0);
  w.Key("checkpoint_weight_bytes").Fixed(p.checkpoint_weight_bytes, 0);
  w.Key("checkpoint_extra_bytes").Fixed(p.checkpoint_extra_bytes, 0);
  w.Key("checkpoint_state_bytes").Fixed(p.checkpoint_state_bytes, 0);
  w.Key("checkpoint_shards").Int(p.checkpoint_shards);
  w.Key("checkpoint_copies_measured").Bool(p.checkpoint_copies_measured);
  w.Key("checkpoint_files").BeginArray();
  for (const auto& f : p.checkpoint_files)
    w.BeginObject().Key("name").Str(f.name).Key("bytes").Uint(f.bytes).EndObject();
  w.EndArray().Key("checkpoint_write_s").Fixed(p.checkpoint_write_s, 1);
  if (p.has_pack) {
    const Schedule& s = p.schedule;
    w.Key("global_min_blocks").Uint(s.global_min_blocks);
    w.Key("global_max_blocks").Uint(s.global_max_blocks);
    w.Key("spread").Uint(s.global_max_blocks - s.global_min_blocks);
    w.Key("evenfix").Str(EvenfixModeName(run.evenfix));
    w.Key("evenfix_target_blocks").Uint(s.target_blocks);
    w.Key("steps_per_epoch").Uint(s.steps_per_epoch).Key("total_steps").Uint(s.total_steps);
    w.Key("evenfix_dropped_blocks").Uint(s.dropped_blocks);
    w.Key("evenfix_dropped_tokens").Uint(s.dropped_tokens);
    w.Key("evenfix_padded_blocks").Uint(s.padded_blocks);
    w.Key("save_count").Uint(s.save_steps.size());
    w.Key("schedule");
    WriteSchedule(w, p.schedule);
  }
  w.Key("has_pack").Bool(p.has_pack);
  return w.EndObject().str();
}

}  // namespace ek::run
