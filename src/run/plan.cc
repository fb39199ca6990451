#include "run/plan.h"

#include <simdjson.h>

#include <cmath>

#include <fmt/core.h>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"

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
  // Optional sizes may be null: Hugging Face writes None so ("head_dim": null), meaning the default.
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
  m.has_shape = true;
  return m;
}

Result<ModelShape> ModelForRun(const RunFile& run) {
  if (std::string path = run.ConfigPath(); !path.empty()) {
    EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    return ModelFromConfigJson(text, path);
  }
  if (run.params <= 0) {
    return InvalidArgumentError(fmt::format("{}: model.path, model.config or model.params is needed for a plan",
                                            run.path.empty() ? "run" : run.path));
  }
  ModelShape m;
  m.params = run.params;
  return m;
}

Result<Plan> MakePlan(const RunFile& run, const ModelShape& model, const pack::Manifest* manifest,
                      double nvml_gpu_memory_bytes) {
  Plan p;
  p.world = run.world();
  p.params = model.params;
  const double seq = run.seq_len, mb = run.micro_batch;
  p.tokens_per_step = static_cast<uint64_t>(p.world) * run.micro_batch * run.grad_accum * run.seq_len;
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
    double layer_params = (model.params - model.vocab * h * (model.tied_embeddings ? 1 : 2)) / model.layers;
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
  p.checkpoint_bytes = 2.0 * model.params;
  p.checkpoint_write_s = p.checkpoint_bytes / (run.write_gbps * 1e9);
  if (manifest && !manifest->ranks.empty()) {
    p.has_pack = true;
    p.global_min_blocks = manifest->min_blocks();
    p.global_max_blocks = manifest->max_blocks();
    uint64_t per_step = static_cast<uint64_t>(run.micro_batch) * run.grad_accum;
    bool pad = run.evenfix == EvenfixMode::kPad;
    p.evenfix_target_blocks = pad ? p.global_max_blocks : p.global_min_blocks;
    p.steps_per_epoch = p.evenfix_target_blocks / per_step;
    p.total_steps = p.steps_per_epoch * run.epochs;
    uint64_t total_blocks = 0;
    for (const auto& r : manifest->ranks) {
      total_blocks += r.blocks;
      if (pad) {
        p.evenfix_padded_blocks += p.global_max_blocks - r.blocks;
      } else {
        p.evenfix_dropped_blocks += r.blocks - p.global_min_blocks;
      }
    }
    p.evenfix_dropped_tokens = p.evenfix_dropped_blocks * static_cast<uint64_t>(run.seq_len);
    p.evenfix_dropped_fraction = total_blocks ? static_cast<double>(p.evenfix_dropped_blocks) / total_blocks : 0;
    // Saves: every save_every steps, and at each epoch end.
    for (int e = 0; e < run.epochs; ++e) {
      uint64_t base = p.steps_per_epoch * e, end = base + p.steps_per_epoch;
      if (run.save_every > 0) {
        uint64_t every = static_cast<uint64_t>(run.save_every);
        for (uint64_t s = (base / every + 1) * every; s < end; s += every) {
          ++p.save_count;
          if (p.save_steps.size() < 64) p.save_steps.push_back(s);
        }
      }
      if (p.steps_per_epoch > 0) {
        ++p.save_count;
        if (p.save_steps.size() < 64) p.save_steps.push_back(end);
      }
    }
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

std::string PlanToText(const RunFile& run, const Plan& p) {
  std::string o;
  o += fmt::format("run {}: {} node(s) x {} GPU(s) = world {}\n", run.name, run.nodes, run.gpus_per_node, p.world);
  o += fmt::format("model: {:.2f}B parameters{}\n", p.params / 1e9, run.model_name.empty() ? "" : " (" + run.model_name + ")");
  o += fmt::format("model states (16 B/param): {} total, {} per GPU (FULL_SHARD over {})\n",
                   FormatBytes(p.state_bytes), FormatBytes(p.state_bytes_per_gpu), p.world);
  if (p.has_activations) {
    o += fmt::format("activations per micro-batch (estimate): {} without gradient checkpointing, {} with{}\n",
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
                   Thousands(p.tokens_per_step), p.world, run.micro_batch, run.grad_accum, run.seq_len);
  if (p.has_pack) {
    o += fmt::format("blocks per rank: min {}, max {}, spread {}\n", Thousands(p.global_min_blocks),
                     Thousands(p.global_max_blocks), Thousands(p.global_max_blocks - p.global_min_blocks));
    o += fmt::format("steps per epoch: {} (from {} blocks, evenfix {}), {} epoch(s): {} steps\n",
                     Thousands(p.steps_per_epoch), Thousands(p.evenfix_target_blocks), EvenfixModeName(run.evenfix),
                     run.epochs, Thousands(p.total_steps));
    if (run.evenfix == EvenfixMode::kPad) {
      o += fmt::format("evenfix pad: {} blocks repeated so no data is dropped\n", Thousands(p.evenfix_padded_blocks));
    } else {
      o += fmt::format("evenfix drops {} blocks = {} tokens ({:.3f}% of the data)\n", Thousands(p.evenfix_dropped_blocks),
                       Thousands(p.evenfix_dropped_tokens), 100 * p.evenfix_dropped_fraction);
    }
  } else {
    o += "steps: no pack manifest (data.pack_dir) yet\n";
  }
  o += fmt::format("checkpoint (bf16 consolidated, 2 B/param): {}, about {:.0f} s at {} GB/s\n",
                   FormatBytes(p.checkpoint_bytes), p.checkpoint_write_s, run.write_gbps);
  if (p.has_pack) {
    o += fmt::format("checkpoints: {} (every {} steps and at epoch end), {} kept\n", Thousands(p.save_count),
                     run.save_every, run.keep);
  }
  return o;
}

std::string PlanToJson(const RunFile& run, const Plan& p) {
  std::string o = "{";
  o += fmt::format("\"run\":{},\"world\":{},\"params\":{:.0f},\"tokens_per_step\":{},", JsonString(run.name), p.world,
                   p.params, p.tokens_per_step);
  o += fmt::format("\"state_bytes\":{:.0f},\"state_bytes_per_gpu\":{:.0f},", p.state_bytes, p.state_bytes_per_gpu);
  if (p.has_activations) {
    o += fmt::format("\"activation_bytes\":{:.0f},\"activation_bytes_ckpt\":{:.0f},\"transient_bytes\":{:.0f},",
                     p.activation_bytes, p.activation_bytes_ckpt, p.transient_bytes);
  }
  o += fmt::format("\"gradient_checkpointing\":{},\"per_gpu_bytes\":{:.0f},\"gpu_memory_bytes\":{:.0f},",
                   run.gradient_checkpointing ? "true" : "false", p.per_gpu_bytes, p.gpu_memory_bytes);
  o += fmt::format("\"checkpoint_bytes\":{:.0f},\"checkpoint_write_s\":{:.1f},", p.checkpoint_bytes, p.checkpoint_write_s);
  if (p.has_pack) {
    o += fmt::format("\"global_min_blocks\":{},\"global_max_blocks\":{},\"spread\":{},\"evenfix\":{},"
                     "\"evenfix_target_blocks\":{},\"steps_per_epoch\":{},\"total_steps\":{},"
                     "\"evenfix_dropped_blocks\":{},\"evenfix_dropped_tokens\":{},\"evenfix_padded_blocks\":{},"
                     "\"save_count\":{},",
                     p.global_min_blocks, p.global_max_blocks, p.global_max_blocks - p.global_min_blocks,
                     JsonString(EvenfixModeName(run.evenfix)), p.evenfix_target_blocks, p.steps_per_epoch,
                     p.total_steps, p.evenfix_dropped_blocks, p.evenfix_dropped_tokens, p.evenfix_padded_blocks,
                     p.save_count);
  }
  o += "\"has_pack\":";
  o += p.has_pack ? "true" : "false";
  o += "}";
  return o;
}

}  // namespace ek::run
