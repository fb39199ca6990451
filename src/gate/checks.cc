// The seven checks of the gate, one function each, in the order RunGate runs them,
// and Conclude, the verdict tail they share.
#include "gate/checks.h"

#include <fmt/core.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "gate/isolation.h"
#include "packfile/inspect.h"
#include "packfile/layout.h"
#include "run/model_dir.h"
#include "run/pack_sources.h"
#include "run/programs.h"

namespace ek::gate {

using run::FormatBytes;
using run::MakePlan;
using run::Thousands;

Check Conclude(Findings f) {
  Check c;
  c.name = std::move(f.name);
  c.numbers = std::move(f.numbers);
  c.verdict = !f.fails.empty()   ? Verdict::kFail
              : !f.warns.empty() ? Verdict::kWarn
                                 : Verdict::kPass;
  c.problems = std::move(f.fails);
  c.problems.insert(c.problems.end(), f.warns.begin(), f.warns.end());
  if (c.problems.empty()) {
    c.reason = std::move(f.pass_reason);
    return c;
  }
  c.reason = c.problems.front();
  if (c.problems.size() > 1)
    c.reason += fmt::format(" (and {} more problem(s))", c.problems.size() - 1);
  return c;
}

namespace {

bool OnNetworkFs(const std::string& path, std::string* kind) {
  struct statfs s;
  if (::statfs(path.c_str(), &s) != 0) return false;
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x6969:
      *kind = "NFS";
      return true;
    case 0xFF534D42:
      *kind = "CIFS";
      return true;
    case 0x517B:
      *kind = "SMB";
      return true;
    case 0xFE534D42:
      *kind = "SMB2";
      return true;
    case 0x65735546:
      *kind = "FUSE";
      return true;
    case 0x0BD00BD0:
      *kind = "Lustre";
      return true;
    case 0x47504653:
      *kind = "GPFS";
      return true;
    case 0x00C36400:
      *kind = "Ceph";
      return true;
    default:
      return false;
  }
}

std::optional<long long> EnvInt(const GateEnv& env, const std::string& key) {
  auto v = env.env->GetVar(key);
  if (!v) return std::nullopt;
  return ParseInt64(*v);
}

}  // namespace

// 1. data: this node's rank files (every rank's with node_rank -1) are whole and
// match the manifest; the pack's seq_len is the run's; the tokenizer is the model's.
// The ranks whose files were checked are appended to *ranks_checked.
Findings DataCheck(const GateInputs& in, std::vector<int>* ranks_checked) {
  const RunFile& run = in.run;
  const int node_rank = in.node_rank;
  const GateEnv& env = in.env;
  const std::string& pack_dir = in.pack_dir;
  const pack::Manifest* mp = in.manifest_or_null;
  Findings c;
  c.name = "data";
  if (!mp) {
    c.fails.push_back(in.manifest.status().message());
    return c;
  }
  std::vector<int> want;
  if (node_rank < 0) {
    for (int r = 0; r < run.world(); ++r) want.push_back(r);
  } else {
    want = run.topology().RanksOf(node_rank);
  }
  pack::Manifest sub = *mp;
  sub.ranks.clear();
  std::vector<int64_t> missing;
  for (int r : want) {
    auto it =
        std::find_if(mp->ranks.begin(), mp->ranks.end(), [r](auto& x) { return x.rank == r; });
    if (it == mp->ranks.end()) {
      missing.push_back(r);
    } else {
      sub.ranks.push_back(*it);
    }
  }
  pack::InspectReport ir = pack::InspectWith(sub, pack_dir, env.threads, true);
  std::vector<std::string> problems;
  uint64_t blocks = 0, bytes = 0, documents = 0;
  for (size_t i = 0; i < ir.ranks.size(); ++i) {
    ranks_checked->push_back(sub.ranks[i].rank);
    blocks += sub.ranks[i].blocks;
    documents += ir.ranks[i].documents;
    bytes += ir.ranks[i].size;
    for (const auto& p : ir.ranks[i].problems) problems.push_back(p);
  }
  if (!missing.empty())
    problems.insert(problems.begin(),
                    fmt::format("ranks {} are not in the manifest", CompactRanges(missing)));
  if (mp->seq_len != run.seq_len) {
    problems.insert(problems.begin(),
                    fmt::format("the pack has seq_len {}, the run {}", mp->seq_len, run.seq_len));
  }
  if (!run.model_path.empty()) {
    // The pack's ids must mean the model's tokens: the trainer refuses otherwise, so the gate does
    // first.
    auto md = run::ReadModelDir(run.Resolve(run.model_path));
    Status st = md.ok() ? run::CheckTokenizerMatch(*mp, pack_dir, *md) : md.status();
    if (st.ok() && md->weights.empty()) {
      st = NotFoundError(fmt::format("model directory {} has no safetensors weights", md->path));
    }
    if (!st.ok()) problems.insert(problems.begin(), "model: " + st.message());
  }
  // A pack made from this run file's [[data.source]]: the same sources and mixture.
  for (const std::string& p : run::PackSourceProblems(run, *mp))
    problems.push_back("sources: " + p);
  c.numbers = {{"ranks", static_cast<double>(ir.ranks.size())},
               {"blocks", static_cast<double>(blocks)},
               {"bytes", static_cast<double>(bytes)},
               {"problems", static_cast<double>(problems.size())}};
  const bool docs = pack::HasDocs(*mp);
  if (docs) c.numbers["documents"] = static_cast<double>(documents);
  c.fails = std::move(problems);
  c.pass_reason = fmt::format(
      "{} rank file(s), {} blocks, {}: sizes, checksums and token ids (< {}{}){} match the "
      "manifest{}",
      ir.ranks.size(), Thousands(blocks), FormatBytes(static_cast<double>(bytes)), mp->vocab_size,
      mp->max_id >= 0 ? fmt::format(", <= max_id {}", mp->max_id) : std::string(),
      docs ? fmt::format(" and document boundaries ({} documents)", Thousands(documents))
           : std::string(" (no document boundaries: a pack made before them)"),
      run.model_path.empty() ? "" : "; tokenizer is the model's");
  return c;
}

// 2. balance
// Balance over whatever per-rank block counts are known. What evenfix drops
// or repeats is the plan's (run::MakePlan), over these ranks.
Findings BalanceCheck(const RunFile& run, const std::map<int, uint64_t>& blocks, bool complete) {
  Findings c;
  c.name = "balance";
  if (blocks.empty()) {
    c.fails.push_back("no block counts (no manifest)");
    return c;
  }
  pack::Manifest seen;
  seen.world = run.world();
  seen.seq_len = run.seq_len;
  for (auto [r, b] : blocks) {
    pack::RankInfo ri;
    ri.rank = r;
    ri.blocks = b;
    seen.ranks.push_back(ri);
  }
  auto planned = MakePlan(run, run::ModelShape{}, &seen);
  if (!planned.ok()) {
    c.fails.push_back(planned.status().message());
    return c;
  }
  const run::Schedule& sch = planned->schedule;
  const uint64_t lo = sch.global_min_blocks, hi = sch.global_max_blocks, spread = hi - lo;
  c.numbers = {{"global_min_blocks", static_cast<double>(lo)},
               {"global_max_blocks", static_cast<double>(hi)},
               {"spread", static_cast<double>(spread)},
               {"ranks", static_cast<double>(blocks.size())}};
  std::string scope = complete ? "" : fmt::format(" over the {} ranks checked here", blocks.size());
  if (spread == 0) {
    c.pass_reason = fmt::format("every rank has {} blocks{}: spread 0", Thousands(lo), scope);
    return c;
  }
  c.numbers["evenfix_dropped_tokens"] = static_cast<double>(sch.dropped_tokens);
  c.numbers["evenfix_dropped_pct"] = 100 * sch.dropped_fraction;
  c.numbers["evenfix_max_drop_pct"] = run.evenfix_max_drop_pct;
  auto& fails = c.fails;
  auto& warns = c.warns;
  if (run.evenfix == EvenfixMode::kOff) {
    fails.push_back(
        fmt::format("block spread {} (min {}, max {}){} and evenfix is off: the shortest rank "
                    "would leave the loop "
                    "{} blocks early and enter the save barrier while the others still reduce "
                    "gradients (deadlock)",
                    Thousands(spread), Thousands(lo), Thousands(hi), scope, Thousands(spread)));
  } else if (run.evenfix == EvenfixMode::kPad) {
    warns.push_back(
        fmt::format("block spread {} (min {}, max {}){}: evenfix pad repeats {} blocks so every "
                    "rank runs {} blocks",
                    Thousands(spread), Thousands(lo), Thousands(hi), scope,
                    Thousands(sch.padded_blocks), Thousands(hi)));
  } else {
    const double pct = 100 * sch.dropped_fraction;
    std::string what = fmt::format(
        "block spread {} (min {}, max {}){}: evenfix pins every rank to {} blocks, dropping {} "
        "tokens ({:.3f}% of the data)",
        Thousands(spread), Thousands(lo), Thousands(hi), scope, Thousands(lo),
        Thousands(sch.dropped_tokens), pct);
    if (pct > run.evenfix_max_drop_pct) {
      fails.push_back(fmt::format(
          "{}, more than evenfix.max_drop_pct {}%: re-pack with --shard balanced (spread 0), "
          "or set evenfix.mode = \"pad\" to repeat blocks instead of dropping them",
          what, run.evenfix_max_drop_pct));
    } else {
      warns.push_back(what);
    }
  }
  return c;
}

// 3. schedule: the world matches the pack, and the plan has steps, a warmup
// shorter than the run, and saves inside an epoch.
Findings ScheduleCheck(const GateInputs& in) {
  const RunFile& run = in.run;
  const pack::Manifest* mp = in.manifest_or_null;
  const Result<run::ModelShape>& model = in.model;
  const run::Schedule& sch = in.plan.schedule;  // empty without a pack: every count 0
  Findings c;
  c.name = "schedule";
  auto& fails = c.fails;
  auto& warns = c.warns;
  if (mp && mp->world != run.world()) {
    fails.push_back(fmt::format("world {} = {} nodes x {} GPUs, but the pack was made for world {}",
                                run.world(), run.nodes, run.gpus_per_node, mp->world));
  }
  if (!mp) fails.push_back("no pack manifest: steps unknown");
  if (!model.ok()) fails.push_back(model.status().message());
  if (mp && model.ok()) {
    if (sch.steps_per_epoch < 1) {
      fails.push_back(
          fmt::format("0 steps per epoch: {} blocks per rank < micro-batch {} x accumulation {}",
                      sch.target_blocks, run.micro_batch, run.grad_accum));
    }
    if (static_cast<uint64_t>(run.warmup_steps) >= sch.total_steps && sch.total_steps > 0) {
      fails.push_back(fmt::format("warmup {} steps >= the whole run ({} steps)", run.warmup_steps,
                                  sch.total_steps));
    }
    if (run.save_every == 0) {
      warns.push_back("save_every is 0: a checkpoint only at epoch end");
    } else if (static_cast<uint64_t>(run.save_every) > sch.steps_per_epoch &&
               sch.steps_per_epoch > 0) {
      warns.push_back(
          fmt::format("save_every {} > {} steps per epoch: no periodic checkpoint inside an epoch",
                      run.save_every, sch.steps_per_epoch));
    }
    c.numbers = {{"steps_per_epoch", static_cast<double>(sch.steps_per_epoch)},
                 {"total_steps", static_cast<double>(sch.total_steps)},
                 {"tokens_per_step", static_cast<double>(in.plan.tokens_per_step)},
                 {"checkpoints", static_cast<double>(sch.save_steps.size())}};
  }
  c.pass_reason = fmt::format(
      "world {} matches the pack; {} steps per epoch x {} epoch(s), warmup {}, {} checkpoints "
      "(every {} steps and at each epoch end, reached by every rank)",
      run.world(), Thousands(sch.steps_per_epoch), run.epochs, run.warmup_steps,
      sch.save_steps.size(), run.save_every);
  return c;
}

// 4. memory: the planned bytes per GPU fit the GPU less the headroom.
Findings MemoryCheck(const GateInputs& in) {
  const RunFile& run = in.run;
  const GateEnv& env = in.env;
  const Result<run::ModelShape>& model = in.model;
  const Plan& plan = in.plan;
  Findings c;
  c.name = "memory";
  if (!model.ok()) {
    c.fails.push_back(model.status().message());
  } else {
    double need = plan.per_gpu_bytes;
    double mem = plan.gpu_memory_bytes;
    double usable = mem * (1 - run.headroom);
    c.numbers = {{"per_gpu_bytes", need}, {"gpu_memory_bytes", mem}, {"headroom", run.headroom}};
    if (mem <= 0) {
      c.warns.push_back(fmt::format(
          "planned {} per GPU, but GPU memory is unknown (no NVML here{}; set gpu.memory_gb)",
          FormatBytes(need),
          env.gpus.why_unavailable.empty() ? "" : ": " + env.gpus.why_unavailable));
    } else if (need > usable) {
      c.fails.push_back(fmt::format(
          "planned {} per GPU exceeds {} usable ({} {} minus {:.0f}% headroom){}",
          FormatBytes(need), FormatBytes(usable), FormatBytes(mem), plan.gpu_memory_source,
          100 * run.headroom,
          run.gradient_checkpointing ? "" : "; gradient checkpointing would need less"));
    } else {
      c.pass_reason = fmt::format("planned {} per GPU fits {} usable ({} {}, {:.0f}% headroom)",
                                  FormatBytes(need), FormatBytes(usable), FormatBytes(mem),
                                  plan.gpu_memory_source, 100 * run.headroom);
    }
  }
  return c;
}

// 5. storage: room for the run's saves at their peak (SaveSpaceNeeded), planned
// from the checkpoint as written (run::MakePlan: weights, the copied files, index
// and manifest); the pack dir readable and node-local.
Findings StorageCheck(const GateInputs& in) {
  const RunFile& run = in.run;
  const GateEnv& env = in.env;
  const std::string& pack_dir = in.pack_dir;
  const Result<run::ModelShape>& model = in.model;
  const Plan& plan = in.plan;
  Findings c;
  c.name = "storage";
  auto& fails = c.fails;
  auto& warns = c.warns;
  std::string ckpt = run.Resolve(run.checkpoint_dir);
  std::string room;  // what the saves need and what is free, for the reason
  if (ckpt.empty()) {
    fails.push_back("checkpoint.dir is not set");
  } else if (Status st = MakeDirs(ckpt, env.env); !st.ok()) {
    fails.push_back("checkpoint dir: " + st.message());
  } else {
    std::string probe = ckpt + "/.evenkeel-gate-probe";
    if (Status st = WriteFileAtomic(probe, "probe", env.env); !st.ok()) {
      fails.push_back("checkpoint dir not writable: " + st.message());
    } else {
      (void)env.env->RemoveFile(probe);
      if (!model.ok()) {
        // The memory and schedule checks fail on the model already; this says what is not known.
        warns.push_back("free space not planned: the checkpoint's size needs the model (" +
                        model.status().message() + ")");
      } else {
        // The verified checkpoints already there (a resumed run's), newest first, at
        // most keep: the ones the saves will prune. Structure level: headers only.
        std::vector<double> existing;
        std::vector<std::string> existing_names;
        auto listed = ckpt::ListCheckpoints(ckpt, ckpt::VerifyLevel::kStructure);
        if (!listed.ok()) {
          warns.push_back("existing checkpoints not counted: " + listed.status().message());
        } else {
          for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
            if (static_cast<int>(existing.size()) >= run.keep) break;
            if (it->temp || !it->ok) continue;
            existing.push_back(static_cast<double>(it->bytes));
            existing_names.push_back(it->name);
          }
        }
        const double size = plan.checkpoint_bytes;
        const double need = SaveSpaceNeeded(size, run.keep, existing);
        double existing_bytes = 0;
        for (double b : existing) existing_bytes += b;
        std::optional<double> free_bytes;
        std::string why_unknown;
        if (Result<double> got = env.env->FreeBytes(ckpt); got.ok()) {
          free_bytes = *got;
        } else {
          // "CKPT: statvfs: REASON"; the line names the directory already.
          why_unknown = got.status().message();
          if (why_unknown.starts_with(ckpt + ": ")) why_unknown.erase(0, ckpt.size() + 2);
        }
        c.numbers["checkpoint_bytes"] = size;
        c.numbers["checkpoint_weight_bytes"] = plan.checkpoint_weight_bytes;
        c.numbers["checkpoint_extra_bytes"] = plan.checkpoint_extra_bytes;
        c.numbers["checkpoint_state_bytes"] = plan.checkpoint_state_bytes;
        c.numbers["keep"] = run.keep;
        c.numbers["checkpoints_existing"] = static_cast<double>(existing.size());
        c.numbers["checkpoint_existing_bytes"] = existing_bytes;
        c.numbers["checkpoint_need_bytes"] = need;
        // "needs 3 x 17.4 MB (keep 2 + 1 during a save) = 52.2 MB"
        room = fmt::format("needs {} x {} (keep {} + 1 during a save)", run.keep + 1,
                           FormatBytes(size), run.keep);
        if (!existing.empty()) {
          std::string names;  // oldest first
          for (auto it = existing_names.rbegin(); it != existing_names.rend(); ++it) {
            names += (names.empty() ? "" : ", ") + *it;
          }
          room += fmt::format(
              " less the {} verified checkpoint(s) already there ({}, {}) as saves prune them",
              existing.size(), names, FormatBytes(existing_bytes));
        }
        room += " = " + FormatBytes(need);
        if (!free_bytes) {
          warns.push_back(fmt::format("checkpoint dir {}: free space unknown ({}); {}", ckpt,
                                      why_unknown, room));
        } else {
          c.numbers["checkpoint_free_bytes"] = *free_bytes;
          room += fmt::format(", {} free", FormatBytes(*free_bytes));
          if (*free_bytes < need) {
            fails.push_back(fmt::format("checkpoint dir {}: {}; a checkpoint as written is {}",
                                        ckpt, room, run::CheckpointSizeText(plan)));
          }
        }
      }
    }
  }
  if (!pack_dir.empty()) {
    if (!env.env->ListDir(pack_dir).ok()) {
      fails.push_back(fmt::format("pack dir {} is not readable", pack_dir));
    } else {
      std::string kind;
      if (OnNetworkFs(pack_dir, &kind)) {
        warns.push_back(
            fmt::format("pack dir {} is on {}, not a node-local disk (every rank reading a shared "
                        "disk contends with the others and with other tenants)",
                        pack_dir, kind));
      }
    }
  }
  c.pass_reason = fmt::format("checkpoint dir writable: {}; pack dir local and readable", room);
  return c;
}

// 6. distributed safety: the watchdog outlasts a save, the flight recorder is on
// and dumps on a timeout, no foreign process holds this node's GPUs.
Findings DistributedCheck(const GateInputs& in) {
  const RunFile& run = in.run;
  const GateEnv& env = in.env;
  const Plan& plan = in.plan;
  Findings c;
  c.name = "distributed";
  auto& fails = c.fails;
  std::vector<std::string> notes;
  double timeout_s = run.watchdog_timeout_min * 60;
  c.numbers = {{"watchdog_timeout_s", timeout_s}, {"checkpoint_write_s", plan.checkpoint_write_s}};
  if (run.watchdog_timeout_min < run.watchdog_floor_min) {
    fails.push_back(fmt::format("watchdog timeout {:.0f} min is below the floor of {:.0f} min",
                                run.watchdog_timeout_min, run.watchdog_floor_min));
  }
  if (timeout_s <= plan.checkpoint_write_s) {
    fails.push_back(fmt::format(
        "watchdog timeout {:.0f} s <= planned checkpoint write {:.0f} s: a healthy save "
        "would be killed as a hang",
        timeout_s, plan.checkpoint_write_s));
  }
  auto buf = std::max(EnvInt(env, "TORCH_FR_BUFFER_SIZE").value_or(0),
                      EnvInt(env, "TORCH_NCCL_TRACE_BUFFER_SIZE").value_or(0));
  c.numbers["flight_recorder_entries"] = static_cast<double>(buf);
  if (buf <= 0 && run.require_flight_recorder) {
    fails.push_back(
        "flight recorder off: set TORCH_FR_BUFFER_SIZE (or TORCH_NCCL_TRACE_BUFFER_SIZE) to e.g. "
        "2000 "
        "so a hang can be diagnosed");
  }
  for (const char* key : {"TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"}) {
    auto v = env.env->GetVar(key);
    if (v && (*v == "0" || *v == "false" || *v == "False")) {
      fails.push_back(
          fmt::format("{}={}: no flight-recorder dump when a collective times out", key, *v));
    }
  }
  if (!env.gpus.available) {
    notes.push_back("NVML unavailable here: foreign GPU processes not checked");
  } else if (env.gpus.foreign_processes > 0) {
    fails.push_back(fmt::format("{} foreign process(es) already on this node's GPUs",
                                env.gpus.foreign_processes));
  }
  c.numbers["foreign_processes"] = env.gpus.foreign_processes;
  std::string pass = fmt::format(
      "watchdog {:.0f} min (floor {:.0f}, checkpoint write ~{:.0f} s); flight recorder {} "
      "entries, dump on timeout",
      run.watchdog_timeout_min, run.watchdog_floor_min, plan.checkpoint_write_s, buf);
  for (const auto& n : notes) pass += "; " + n;
  c.pass_reason = std::move(pass);
  return c;
}

Findings IsolationCheck(const GateInputs& in) {
  const RunFile& run = in.run;
  Findings c;
  c.name = "isolation";
  if (run.attention == "cross") {
    c.pass_reason =
        "data.attention = \"cross\": documents attend across boundaries by choice (no probe run)";
    return c;
  }
  if (in.manifest_or_null && !pack::HasDocs(*in.manifest_or_null)) {
    // The trainer would refuse it too; said here, before anything starts.
    c.fails.push_back(fmt::format(
        "{}: the pack has no document boundaries (rank-NNNNN.docs: made before evenkeel recorded "
        "them) and data.attention = \"isolated\": repack it (evenkeel pack RUN.toml), or set "
        "data.attention = \"cross\"",
        in.pack_dir));
    return c;
  }
  if (in.node_rank > 0) {
    c.pass_reason = "checked on node 0 (a property of the model and data.attention, not of a node)";
    return c;
  }
  const std::string what_to_do =
      "set data.attention = \"cross\" to train with documents attending across boundaries, or "
      "fine-tune another model";
  if (run.ConfigPath().empty()) {
    // A plan of a parameter count: nothing to build. Not a pass; the trainer, which
    // needs model.path, refuses a model whose attention would cross boundaries itself.
    c.warns.push_back(
        "isolation not proved: the run names no model config (model.path or model.config) for "
        "the probe to build; the trainer checks the model's layers when it loads it");
    return c;
  }
  std::string python = in.env.python;
  if (python.empty()) {
    auto found = run::FindTrainerPython(run, run::FindRunProgram(run, run.launch_torchrun));
    if (!found.ok()) {
      c.fails.push_back(
          fmt::format("the isolation probe cannot run: {}", found.status().message()));
      return c;
    }
    python = found->path;
  }
  const std::vector<std::string> argv = IsolationProbeArgv(python, run);
  auto out = in.env.isolation_probe
                 ? in.env.isolation_probe(argv, kIsolationProbeTimeoutS)
                 : SpawnIsolationProbe(argv, kIsolationProbeTimeoutS, in.env.env->clock());
  const std::string cannot =
      "the gate cannot prove that packed documents stay apart (the probe needs torch and "
      "transformers in the trainer's python: launch.python)";
  if (!out.ok()) {
    c.fails.push_back(
        fmt::format("the isolation probe could not run: {}; {}", out.status().message(), cannot));
    return c;
  }
  auto v = ParseIsolationVerdict(*out, python + " -m evenkeel.isolation");
  if (!v.ok()) {
    c.fails.push_back(fmt::format("the isolation probe's answer is unreadable: {}; {}",
                                  v.status().message(), cannot));
    return c;
  }
  c.numbers = {{"probe_seconds", v->seconds},
               {"cached", v->cached ? 1.0 : 0.0},
               {"max_loss_diff", v->max_loss_diff},
               {"max_layer_diff", v->max_layer_diff}};
  const std::string from = v->cached ? " (verdict from the cache)" : "";
  if (v->verdict == "pass") {
    c.pass_reason = fmt::format(
        "{} through {}: packed documents equal their runs alone (loss {:.1e}, layers {:.1e}, "
        "tolerance {:g}){}",
        v->model_type, v->implementation, v->max_loss_diff, v->max_layer_diff, v->tolerance, from);
  } else if (v->verdict == "leak") {
    c.fails.push_back(fmt::format(
        "{}: packing would leak attention across documents: {}{}; {}", v->model_type, v->message,
        v->layer_index >= 0 ? fmt::format(" (first at layer {}, {})", v->layer_index, v->layer)
                            : "",
        what_to_do + from));
  } else if (v->verdict == "refused") {
    c.fails.push_back(v->message + from);
  } else {
    c.fails.push_back(
        fmt::format("the isolation probe could not decide: {}; {}", v->message, cannot));
  }
  return c;
}

}  // namespace ek::gate
