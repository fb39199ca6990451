#include "gate/gate.h"

#include <dirent.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <fmt/core.h>
#include <simdjson.h>

#include "ckpt/checkpoint.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "core/version.h"
#include "pack/inspect.h"
#include "pack/manifest.h"
#include "run/model_dir.h"

namespace ek::gate {

using run::FormatBytes;
using run::MakePlan;
using run::ModelForRun;
using run::Thousands;

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
  }
  return "FAIL";
}

Verdict GateReport::overall() const {
  Verdict v = Verdict::kPass;
  for (const auto& c : checks) v = std::max(v, c.verdict);
  return v;
}

GateEnv RealGateEnv() {
  GateEnv env;
  env.getenv = [](const std::string& k) -> std::optional<std::string> {
    const char* v = std::getenv(k.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  env.host = host;
  return env;
}

double SaveSpaceNeeded(double checkpoint_bytes, int keep, const std::vector<double>& existing) {
  const int olds = std::min<int>(std::max(keep, 0), static_cast<int>(existing.size()));
  double need = 0;
  for (int j = 0; j <= std::max(keep, 0); ++j) {
    double pruned = 0;  // after j saves the newest keep - j existing ones remain
    for (int i = std::max(keep - j, 0); i < olds; ++i) pruned += existing[i];
    need = std::max(need, (j + 1) * checkpoint_bytes - pruned);
  }
  return std::max(need, 0.0);
}

namespace {

// The verdict and the one-line reason from the problems found: FAIL when any
// failure, else WARN when any warning, else PASS with `pass_reason`. Every
// problem is kept, failures first.
void Conclude(Check* c, std::vector<std::string> fails, const std::vector<std::string>& warns, std::string pass_reason) {
  c->verdict = !fails.empty() ? Verdict::kFail : !warns.empty() ? Verdict::kWarn : Verdict::kPass;
  c->problems = std::move(fails);
  c->problems.insert(c->problems.end(), warns.begin(), warns.end());
  if (c->problems.empty()) {
    c->reason = std::move(pass_reason);
    return;
  }
  c->reason = c->problems.front();
  if (c->problems.size() > 1) c->reason += fmt::format(" (and {} more problem(s))", c->problems.size() - 1);
}

Check Make(std::string name, Verdict v, std::string reason) {
  Check c;
  c.name = std::move(name);
  if (v == Verdict::kFail) {
    Conclude(&c, {std::move(reason)}, {}, "");
  } else if (v == Verdict::kWarn) {
    Conclude(&c, {}, {std::move(reason)}, "");
  } else {
    c.reason = std::move(reason);
  }
  return c;
}

// Balance over whatever per-rank block counts are known. What evenfix drops
// or repeats is the plan's (run::MakePlan), over these ranks.
Check BalanceCheck(const RunFile& run, const std::map<int, uint64_t>& blocks, bool complete) {
  if (blocks.empty()) return Make("balance", Verdict::kFail, "no block counts (no manifest)");
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
  if (!planned.ok()) return Make("balance", Verdict::kFail, planned.status().message());
  const Plan& p = *planned;
  const uint64_t lo = p.global_min_blocks, hi = p.global_max_blocks, spread = hi - lo;
  Check c;
  c.name = "balance";
  c.numbers = {{"global_min_blocks", static_cast<double>(lo)}, {"global_max_blocks", static_cast<double>(hi)},
               {"spread", static_cast<double>(spread)}, {"ranks", static_cast<double>(blocks.size())}};
  std::string scope = complete ? "" : fmt::format(" over the {} ranks checked here", blocks.size());
  if (spread == 0) {
    c.verdict = Verdict::kPass;
    c.reason = fmt::format("every rank has {} blocks{}: spread 0", Thousands(lo), scope);
    return c;
  }
  c.numbers["evenfix_dropped_tokens"] = static_cast<double>(p.evenfix_dropped_tokens);
  c.numbers["evenfix_dropped_pct"] = 100 * p.evenfix_dropped_fraction;
  c.numbers["evenfix_max_drop_pct"] = run.evenfix_max_drop_pct;
  std::vector<std::string> fails, warns;
  if (run.evenfix == EvenfixMode::kOff) {
    fails.push_back(fmt::format(
        "block spread {} (min {}, max {}){} and evenfix is off: the shortest rank would leave the loop "
        "{} blocks early and enter the save barrier while the others still reduce gradients (deadlock)",
        Thousands(spread), Thousands(lo), Thousands(hi), scope, Thousands(spread)));
  } else if (run.evenfix == EvenfixMode::kPad) {
    warns.push_back(fmt::format("block spread {} (min {}, max {}){}: evenfix pad repeats {} blocks so every rank runs {} blocks",
                                Thousands(spread), Thousands(lo), Thousands(hi), scope,
                                Thousands(p.evenfix_padded_blocks), Thousands(hi)));
  } else {
    const double pct = 100 * p.evenfix_dropped_fraction;
    std::string what = fmt::format(
        "block spread {} (min {}, max {}){}: evenfix pins every rank to {} blocks, dropping {} tokens ({:.3f}% of the data)",
        Thousands(spread), Thousands(lo), Thousands(hi), scope, Thousands(lo), Thousands(p.evenfix_dropped_tokens), pct);
    if (pct > run.evenfix_max_drop_pct) {
      fails.push_back(fmt::format("{}, more than evenfix.max_drop_pct {}%: re-pack with --shard balanced (spread 0), "
                                  "or set evenfix.mode = \"pad\" to repeat blocks instead of dropping them",
                                  what, run.evenfix_max_drop_pct));
    } else {
      warns.push_back(what);
    }
  }
  Conclude(&c, std::move(fails), warns, "");
  return c;
}

bool OnNetworkFs(const std::string& path, std::string* kind) {
  struct statfs s;
  if (::statfs(path.c_str(), &s) != 0) return false;
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x6969: *kind = "NFS"; return true;
    case 0xFF534D42: *kind = "CIFS"; return true;
    case 0x517B: *kind = "SMB"; return true;
    case 0xFE534D42: *kind = "SMB2"; return true;
    case 0x65735546: *kind = "FUSE"; return true;
    case 0x0BD00BD0: *kind = "Lustre"; return true;
    case 0x47504653: *kind = "GPFS"; return true;
    case 0x00C36400: *kind = "Ceph"; return true;
    default: return false;
  }
}

std::optional<long long> EnvInt(const GateEnv& env, const std::string& key) {
  auto v = env.getenv(key);
  if (!v) return std::nullopt;
  return ParseInt64(*v);
}

}  // namespace

Result<GateReport> RunGate(const RunFile& run, int node_rank, const GateEnv& env) {
  auto t0 = std::chrono::steady_clock::now();
  GateReport rep;
  rep.run_name = run.name;
  rep.run_file = run.path;
  rep.run_xxh3 = run.xxh3;
  rep.host = env.host;
  rep.node_rank = node_rank;
  rep.nodes = run.nodes;
  rep.gpus_per_node = run.gpus_per_node;
  rep.hosts = run.hosts;
  rep.evenkeel_version = kVersion;
  rep.time = UtcNowIso8601();
  if (node_rank >= run.nodes) {
    return InvalidArgumentError(fmt::format("--node-rank {} but the run has {} node(s)", node_rank, run.nodes));
  }

  auto model = ModelForRun(run);
  std::string pack_dir = run.Resolve(run.pack_dir);
  auto manifest = pack_dir.empty() ? Result<pack::Manifest>(InvalidArgumentError("data.pack_dir is not set"))
                                   : pack::ReadManifest(pack_dir);
  const pack::Manifest* mp = manifest.ok() ? &*manifest : nullptr;
  Plan plan;
  if (model.ok()) {
    EK_ASSIGN_OR_RETURN(plan, MakePlan(run, *model, mp, env.gpus.available ? env.gpus.memory_bytes : 0));
  }

  // 1. data
  {
    Check c;
    c.name = "data";
    if (!mp) {
      Conclude(&c, {manifest.status().message()}, {}, "");
    } else {
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
        auto it = std::find_if(mp->ranks.begin(), mp->ranks.end(), [r](auto& x) { return x.rank == r; });
        if (it == mp->ranks.end()) {
          missing.push_back(r);
        } else {
          sub.ranks.push_back(*it);
        }
      }
      pack::InspectReport ir = pack::InspectWith(sub, pack_dir, env.threads, true);
      std::vector<std::string> problems;
      uint64_t blocks = 0, bytes = 0;
      for (size_t i = 0; i < ir.ranks.size(); ++i) {
        rep.ranks_checked.push_back(sub.ranks[i].rank);
        blocks += sub.ranks[i].blocks;
        bytes += ir.ranks[i].size;
        for (const auto& p : ir.ranks[i].problems) problems.push_back(p);
      }
      if (!missing.empty()) problems.insert(problems.begin(), fmt::format("ranks {} are not in the manifest", CompactRanges(missing)));
      if (mp->seq_len != run.seq_len) {
        problems.insert(problems.begin(), fmt::format("the pack has seq_len {}, the run {}", mp->seq_len, run.seq_len));
      }
      if (!run.model_path.empty()) {
        // The pack's ids must mean the model's tokens: the trainer refuses otherwise, so the gate does first.
        auto md = run::ReadModelDir(run.Resolve(run.model_path));
        Status st = md.ok() ? run::CheckTokenizerMatch(*mp, pack_dir, *md) : md.status();
        if (st.ok() && md->weights.empty()) {
          st = NotFoundError(fmt::format("model directory {} has no safetensors weights", md->path));
        }
        if (!st.ok()) problems.insert(problems.begin(), "model: " + st.message());
      }
      c.numbers = {{"ranks", static_cast<double>(ir.ranks.size())}, {"blocks", static_cast<double>(blocks)},
                   {"bytes", static_cast<double>(bytes)}, {"problems", static_cast<double>(problems.size())}};
      Conclude(&c, std::move(problems), {},
               fmt::format("{} rank file(s), {} blocks, {}: sizes, checksums and token ids (< {}) match the manifest{}",
                           ir.ranks.size(), Thousands(blocks), FormatBytes(static_cast<double>(bytes)), mp->vocab_size,
                           run.model_path.empty() ? "" : "; tokenizer is the model's"));
    }
    rep.checks.push_back(c);
  }

  // 2. balance (over the manifest's ranks; merged parts recompute it)
  if (mp) {
    for (const auto& r : mp->ranks) rep.rank_blocks[r.rank] = r.blocks;
  }
  rep.checks.push_back(BalanceCheck(run, rep.rank_blocks, mp && mp->complete()));
  if (!rep.rank_blocks.empty()) {
    uint64_t lo = UINT64_MAX;
    for (auto [r, b] : rep.rank_blocks) lo = std::min(lo, b);
    rep.global_min_blocks = lo;
  }

  // 3. schedule
  {
    Check c;
    c.name = "schedule";
    std::vector<std::string> fails, warns;
    if (mp && mp->world != run.world()) {
      fails.push_back(fmt::format("world {} = {} nodes x {} GPUs, but the pack was made for world {}", run.world(),
                                  run.nodes, run.gpus_per_node, mp->world));
    }
    if (!mp) fails.push_back("no pack manifest: steps unknown");
    if (!model.ok()) fails.push_back(model.status().message());
    if (mp && model.ok()) {
      if (plan.steps_per_epoch < 1) {
        fails.push_back(fmt::format("0 steps per epoch: {} blocks per rank < micro-batch {} x accumulation {}",
                                    plan.evenfix_target_blocks, run.micro_batch, run.grad_accum));
      }
      if (static_cast<uint64_t>(run.warmup_steps) >= plan.total_steps && plan.total_steps > 0) {
        fails.push_back(fmt::format("warmup {} steps >= the whole run ({} steps)", run.warmup_steps, plan.total_steps));
      }
      if (run.save_every == 0) {
        warns.push_back("save_every is 0: a checkpoint only at epoch end");
      } else if (static_cast<uint64_t>(run.save_every) > plan.steps_per_epoch && plan.steps_per_epoch > 0) {
        warns.push_back(fmt::format("save_every {} > {} steps per epoch: no periodic checkpoint inside an epoch",
                                    run.save_every, plan.steps_per_epoch));
      }
      c.numbers = {{"steps_per_epoch", static_cast<double>(plan.steps_per_epoch)},
                   {"total_steps", static_cast<double>(plan.total_steps)},
                   {"tokens_per_step", static_cast<double>(plan.tokens_per_step)},
                   {"checkpoints", static_cast<double>(plan.save_count)}};
    }
    Conclude(&c, std::move(fails), warns,
             fmt::format("world {} matches the pack; {} steps per epoch x {} epoch(s), warmup {}, {} checkpoints "
                         "(every {} steps and at each epoch end, reached by every rank)",
                         run.world(), Thousands(plan.steps_per_epoch), run.epochs, run.warmup_steps, plan.save_count,
                         run.save_every));
    rep.checks.push_back(c);
  }

  // 4. memory
  {
    Check c;
    c.name = "memory";
    if (!model.ok()) {
      Conclude(&c, {model.status().message()}, {}, "");
    } else {
      double need = plan.per_gpu_bytes;
      double mem = plan.gpu_memory_bytes;
      double usable = mem * (1 - run.headroom);
      c.numbers = {{"per_gpu_bytes", need}, {"gpu_memory_bytes", mem}, {"headroom", run.headroom}};
      if (mem <= 0) {
        Conclude(&c, {},
                 {fmt::format("planned {} per GPU, but GPU memory is unknown (no NVML here{}; set gpu.memory_gb)",
                              FormatBytes(need), env.gpus.why_unavailable.empty() ? "" : ": " + env.gpus.why_unavailable)},
                 "");
      } else if (need > usable) {
        Conclude(&c,
                 {fmt::format("planned {} per GPU exceeds {} usable ({} {} minus {:.0f}% headroom){}", FormatBytes(need),
                              FormatBytes(usable), FormatBytes(mem), plan.gpu_memory_source, 100 * run.headroom,
                              run.gradient_checkpointing ? "" : "; gradient checkpointing would need less")},
                 {}, "");
      } else {
        c.verdict = Verdict::kPass;
        c.reason = fmt::format("planned {} per GPU fits {} usable ({} {}, {:.0f}% headroom)", FormatBytes(need),
                               FormatBytes(usable), FormatBytes(mem), plan.gpu_memory_source, 100 * run.headroom);
      }
    }
    rep.checks.push_back(c);
  }

  // 5. storage: room for the run's saves at their peak (SaveSpaceNeeded), planned
  // from the checkpoint as written (run::MakePlan: weights, the copied files, index
  // and manifest).
  {
    Check c;
    c.name = "storage";
    std::vector<std::string> fails, warns;
    std::string ckpt = run.Resolve(run.checkpoint_dir);
    std::string room;  // what the saves need and what is free, for the reason
    if (ckpt.empty()) {
      fails.push_back("checkpoint.dir is not set");
    } else if (Status st = MakeDirs(ckpt, env.files); !st.ok()) {
      fails.push_back("checkpoint dir: " + st.message());
    } else {
      std::string probe = ckpt + "/.evenkeel-gate-probe";
      if (Status st = WriteFileAtomic(probe, "probe", env.files); !st.ok()) {
        fails.push_back("checkpoint dir not writable: " + st.message());
      } else {
        (void)env.files->RemoveFile(probe);
        if (!model.ok()) {
          // The memory and schedule checks fail on the model already; this says what is not known.
          warns.push_back("free space not planned: the checkpoint's size needs the model (" + model.status().message() +
                          ")");
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
          std::string why_unknown = "no answer";
          if (env.free_bytes) {
            free_bytes = env.free_bytes(ckpt);
          } else if (struct statvfs vfs; ::statvfs(ckpt.c_str(), &vfs) == 0) {
            free_bytes = static_cast<double>(vfs.f_bavail) * vfs.f_frsize;
          } else {
            why_unknown = std::string("statvfs: ") + std::strerror(errno);
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
          room = fmt::format("needs {} x {} (keep {} + 1 during a save)", run.keep + 1, FormatBytes(size), run.keep);
          if (!existing.empty()) {
            std::string names;  // oldest first
            for (auto it = existing_names.rbegin(); it != existing_names.rend(); ++it) {
              names += (names.empty() ? "" : ", ") + *it;
            }
            room += fmt::format(" less the {} verified checkpoint(s) already there ({}, {}) as saves prune them",
                                existing.size(), names, FormatBytes(existing_bytes));
          }
          room += " = " + FormatBytes(need);
          if (!free_bytes) {
            warns.push_back(fmt::format("checkpoint dir {}: free space unknown ({}); {}", ckpt, why_unknown, room));
          } else {
            c.numbers["checkpoint_free_bytes"] = *free_bytes;
            room += fmt::format(", {} free", FormatBytes(*free_bytes));
            if (*free_bytes < need) {
              fails.push_back(fmt::format("checkpoint dir {}: {}; a checkpoint as written is {}", ckpt, room,
                                          run::CheckpointSizeText(plan)));
            }
          }
        }
      }
    }
    if (!pack_dir.empty()) {
      DIR* d = ::opendir(pack_dir.c_str());
      if (!d) {
        fails.push_back(fmt::format("pack dir {} is not readable", pack_dir));
      } else {
        ::closedir(d);
        std::string kind;
        if (OnNetworkFs(pack_dir, &kind)) {
          warns.push_back(fmt::format("pack dir {} is on {}, not a node-local disk (contention risk, §4.2)", pack_dir, kind));
        }
      }
    }
    Conclude(&c, std::move(fails), warns,
             fmt::format("checkpoint dir writable: {}; pack dir local and readable", room));
    rep.checks.push_back(c);
  }

  // 6. distributed safety
  {
    Check c;
    c.name = "distributed";
    std::vector<std::string> fails, notes;
    double timeout_s = run.watchdog_timeout_min * 60;
    c.numbers = {{"watchdog_timeout_s", timeout_s}, {"checkpoint_write_s", plan.checkpoint_write_s}};
    if (run.watchdog_timeout_min < run.watchdog_floor_min) {
      fails.push_back(fmt::format("watchdog timeout {:.0f} min is below the floor of {:.0f} min",
                                  run.watchdog_timeout_min, run.watchdog_floor_min));
    }
    if (timeout_s <= plan.checkpoint_write_s) {
      fails.push_back(fmt::format("watchdog timeout {:.0f} s <= planned checkpoint write {:.0f} s: a healthy save "
                                  "would be killed as a hang", timeout_s, plan.checkpoint_write_s));
    }
    auto buf = std::max(EnvInt(env, "TORCH_FR_BUFFER_SIZE").value_or(0), EnvInt(env, "TORCH_NCCL_TRACE_BUFFER_SIZE").value_or(0));
    c.numbers["flight_recorder_entries"] = static_cast<double>(buf);
    if (buf <= 0 && run.require_flight_recorder) {
      fails.push_back("flight recorder off: set TORCH_FR_BUFFER_SIZE (or TORCH_NCCL_TRACE_BUFFER_SIZE) to e.g. 2000 "
                      "so a hang can be diagnosed");
    }
    for (const char* key : {"TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"}) {
      auto v = env.getenv(key);
      if (v && (*v == "0" || *v == "false" || *v == "False")) {
        fails.push_back(fmt::format("{}={}: no flight-recorder dump when a collective times out", key, *v));
      }
    }
    if (!env.gpus.available) {
      notes.push_back("NVML unavailable here: foreign GPU processes not checked");
    } else if (env.gpus.foreign_processes > 0) {
      fails.push_back(fmt::format("{} foreign process(es) already on this node's GPUs", env.gpus.foreign_processes));
    }
    c.numbers["foreign_processes"] = env.gpus.foreign_processes;
    std::string pass = fmt::format("watchdog {:.0f} min (floor {:.0f}, checkpoint write ~{:.0f} s); flight recorder {} "
                                   "entries, dump on timeout",
                                   run.watchdog_timeout_min, run.watchdog_floor_min, plan.checkpoint_write_s, buf);
    for (const auto& n : notes) pass += "; " + n;
    Conclude(&c, std::move(fails), {}, std::move(pass));
    rep.checks.push_back(c);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

namespace {

// A part's name in merged problems and errors: its host, else its node.
std::string PartName(const GateReport& p) {
  if (!p.host.empty()) return p.host;
  return p.node_rank < 0 ? std::string("the whole-run log") : fmt::format("node {}", p.node_rank);
}

// The reason of a check that has problems: the first and how many more.
void ReasonFromProblems(Check* c) {
  if (c->problems.empty()) return;
  c->reason = c->problems.front();
  if (c->problems.size() > 1) c->reason += fmt::format(" (and {} more problem(s))", c->problems.size() - 1);
}

}  // namespace

Result<GateReport> MergeGateReports(const std::vector<GateReport>& parts, const RunFile* run) {
  if (parts.empty()) return InvalidArgumentError("gate merge: no parts");
  // The run's layout: the run file's, else the one the parts recorded (they must agree).
  int nodes = run ? run->nodes : 0, gpn = run ? run->gpus_per_node : 0;
  std::string layout_from = run ? (run->path.empty() ? std::string("the run file") : run->path) : "";
  for (const auto& p : parts) {
    if (p.run_name != parts[0].run_name) {
      return InvalidArgumentError(
          fmt::format("gate merge: parts from different runs ({} and {})", parts[0].run_name, p.run_name));
    }
    if (p.nodes == 0) continue;  // a part that does not record the layout
    if (nodes == 0) {
      nodes = p.nodes;
      gpn = p.gpus_per_node;
      layout_from = "the part of " + PartName(p);
    } else if (p.nodes != nodes || p.gpus_per_node != gpn) {
      return InvalidArgumentError(fmt::format("gate merge: the part of {} was checked for {} node(s) x {} GPU(s), {} has {} x {}",
                                              PartName(p), p.nodes, p.gpus_per_node, layout_from, nodes, gpn));
    }
  }
  if (nodes < 1 || gpn < 1) {
    return InvalidArgumentError(
        "gate merge: no part records how many nodes the run has (parts of an older evenkeel): pass --run RUN.toml");
  }
  // Every node is claimed by exactly one part (a whole-run log claims them all):
  // each part claims the nodes [first, end), and sorted claims must not overlap.
  struct Claim {
    int first, end;
    const GateReport* part;
  };
  std::vector<Claim> claims;
  for (const auto& p : parts) {
    if (p.node_rank >= nodes) {
      return InvalidArgumentError(fmt::format("gate merge: the part of {} is for node {}, but the run has {} node(s) (0-{})",
                                              PartName(p), p.node_rank, nodes, nodes - 1));
    }
    claims.push_back(p.node_rank < 0 ? Claim{0, nodes, &p} : Claim{p.node_rank, p.node_rank + 1, &p});
  }
  std::stable_sort(claims.begin(), claims.end(), [](const Claim& x, const Claim& y) { return x.first < y.first; });
  for (size_t i = 1; i < claims.size(); ++i) {
    if (claims[i].first < claims[i - 1].end) {
      return InvalidArgumentError(fmt::format("gate merge: two parts claim node {}: the part of {} and the part of {}",
                                              claims[i].first, PartName(*claims[i - 1].part), PartName(*claims[i].part)));
    }
  }

  GateReport out = parts[0];
  out.node_rank = -1;
  out.nodes = nodes;
  out.gpus_per_node = gpn;
  out.ranks_checked.clear();
  out.rank_blocks.clear();
  out.seconds = 0;
  std::vector<std::string> hosts;
  for (const auto& p : parts) {
    hosts.push_back(p.host);
    out.ranks_checked.insert(out.ranks_checked.end(), p.ranks_checked.begin(), p.ranks_checked.end());
    for (auto [r, b] : p.rank_blocks) out.rank_blocks[r] = b;
    out.seconds = std::max(out.seconds, p.seconds);
  }
  std::sort(out.ranks_checked.begin(), out.ranks_checked.end());
  out.ranks_checked.erase(std::unique(out.ranks_checked.begin(), out.ranks_checked.end()), out.ranks_checked.end());
  out.hosts = hosts;
  out.host = "";
  for (size_t i = 0; i < out.checks.size(); ++i) {
    Check& c = out.checks[i];
    c.reason.clear();
    c.problems.clear();
    Verdict worst = Verdict::kPass;
    for (const auto& p : parts) {
      if (i < p.checks.size()) worst = std::max(worst, p.checks[i].verdict);
    }
    c.verdict = worst;
    // Every part's problems, those of the parts with the worst verdict first. A
    // part that lists none but did not pass (an older part) counts its reason.
    for (bool of_worst : {true, false}) {
      for (const auto& p : parts) {
        if (i >= p.checks.size() || (p.checks[i].verdict == worst) != of_worst) continue;
        const Check& pc = p.checks[i];
        if (pc.problems.empty() && pc.verdict != Verdict::kPass) c.problems.push_back(PartName(p) + ": " + pc.reason);
        for (const auto& problem : pc.problems) c.problems.push_back(PartName(p) + ": " + problem);
      }
    }
    if (worst != Verdict::kPass) {
      ReasonFromProblems(&c);
      continue;
    }
    for (const auto& p : parts) {
      if (i >= p.checks.size()) continue;
      if (!c.reason.empty()) c.reason += " | ";
      c.reason += PartName(p) + ": " + p.checks[i].reason;
    }
  }
  // Nodes without a part: their ranks' data, disks and GPUs were never checked.
  // One problem per run of consecutive such nodes (so a crafted layout cannot
  // make millions of lines).
  const std::vector<std::string>& run_hosts = run ? run->hosts : parts[0].hosts;
  const bool named = static_cast<int>(run_hosts.size()) == nodes;
  const int64_t world = static_cast<int64_t>(nodes) * gpn;
  std::vector<std::string> missing;
  auto gap = [&](int a, int b) {  // nodes [a, b) sent nothing
    if (a >= b) return;
    int64_t lo = static_cast<int64_t>(a) * gpn, hi = static_cast<int64_t>(b) * gpn - 1;
    std::string ranks = lo == hi ? fmt::format("rank {}", lo) : fmt::format("ranks {}-{}", lo, hi);
    std::string who = b - a == 1 ? fmt::format("node {} ({}{})", a, ranks, named ? ", host " + run_hosts[a] : "")
                                 : fmt::format("nodes {}-{} ({})", a, b - 1, ranks);
    missing.push_back(fmt::format("{} sent no gate part: {} of {} ranks checked", who, out.ranks_checked.size(), world));
  };
  int next = 0;
  for (const Claim& c : claims) {
    gap(next, c.first);
    next = c.end;
  }
  gap(next, nodes);
  if (!missing.empty()) {
    auto data = std::find_if(out.checks.begin(), out.checks.end(), [](const Check& c) { return c.name == "data"; });
    if (data == out.checks.end()) data = out.checks.insert(out.checks.begin(), Check{"data", Verdict::kFail, "", {}, {}});
    data->verdict = Verdict::kFail;
    data->problems.insert(data->problems.begin(), missing.begin(), missing.end());
    ReasonFromProblems(&*data);
  }
  if (run) {
    for (auto& c : out.checks) {
      if (c.name == "balance") {
        c = BalanceCheck(*run, out.rank_blocks, static_cast<int>(out.rank_blocks.size()) == run->world());
      }
    }
  }
  if (!out.rank_blocks.empty()) {
    uint64_t lo = UINT64_MAX;
    for (auto [r, b] : out.rank_blocks) lo = std::min(lo, b);
    out.global_min_blocks = lo;
  }
  return out;
}

std::string GateReportToJson(const GateReport& r) {
  std::string o = "{\n";
  o += fmt::format("  \"run\": {},\n  \"run_file\": {{\"path\": {}, \"xxh3\": \"{:016x}\"}},\n  \"overall\": \"{}\",\n"
                   "  \"host\": {},\n  \"node_rank\": {},\n",
                   JsonString(r.run_name), JsonString(r.run_file), r.run_xxh3, VerdictName(r.overall()), JsonString(r.host),
                   r.node_rank);
  // The run's layout, which a merge needs to know every node sent a part (absent when not known).
  if (r.nodes > 0) o += fmt::format("  \"nodes\": {},\n  \"gpus_per_node\": {},\n", r.nodes, r.gpus_per_node);
  o += "  \"hosts\": [";
  for (size_t i = 0; i < r.hosts.size(); ++i) o += (i ? ", " : "") + JsonString(r.hosts[i]);
  o += "],\n  \"ranks_checked\": [";
  for (size_t i = 0; i < r.ranks_checked.size(); ++i) o += fmt::format("{}{}", i ? ", " : "", r.ranks_checked[i]);
  o += "],\n  \"rank_blocks\": {";
  bool first = true;
  for (auto [k, v] : r.rank_blocks) {
    o += fmt::format("{}\"{}\": {}", first ? "" : ", ", k, v);
    first = false;
  }
  o += "},\n  \"checks\": [\n";
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const Check& c = r.checks[i];
    o += fmt::format("    {{\"name\": {}, \"verdict\": \"{}\", \"reason\": {}, \"numbers\": {{", JsonString(c.name),
                     VerdictName(c.verdict), JsonString(c.reason));
    bool f = true;
    for (const auto& [k, v] : c.numbers) {
      o += fmt::format("{}{}: {}", f ? "" : ", ", JsonString(k), v);
      f = false;
    }
    o += "}, \"problems\": [";
    for (size_t k = 0; k < c.problems.size(); ++k) o += (k ? ", " : "") + JsonString(c.problems[k]);
    o += i + 1 < r.checks.size() ? "]},\n" : "]}\n";
  }
  o += fmt::format("  ],\n  \"global_min_blocks\": {},\n  \"versions\": {{\"evenkeel\": {}}},\n  \"time\": {},\n  \"seconds\": {:.3f}\n}}\n",
                   r.global_min_blocks, JsonString(r.evenkeel_version), JsonString(r.time), r.seconds);
  return o;
}

namespace {

Status ReadVerdict(const JsonFields& f, Verdict* out) {
  std::string v;
  EK_RETURN_IF_ERROR(f.Str("verdict", &v));
  if (v == "PASS") *out = Verdict::kPass;
  else if (v == "WARN") *out = Verdict::kWarn;
  else if (v == "FAIL") *out = Verdict::kFail;
  else return f.Err("verdict", fmt::format("'{}' is not PASS, WARN or FAIL", v));
  return Status::Ok();
}

Status ReadCheck(const JsonFields& c, Check* out) {
  EK_RETURN_IF_ERROR(c.Str("name", &out->name));
  EK_RETURN_IF_ERROR(ReadVerdict(c, &out->verdict));
  EK_RETURN_IF_ERROR(c.OptStr("reason", &out->reason));
  if (c.Has("problems")) EK_RETURN_IF_ERROR(c.StrList("problems", &out->problems));
  if (c.Has("numbers")) {
    JsonFields nums = c;
    EK_RETURN_IF_ERROR(c.Object("numbers", &nums));
    for (std::string_view k : nums.Keys()) {
      double d = 0;
      EK_RETURN_IF_ERROR(nums.Num(k, &d));
      out->numbers[std::string(k)] = d;
    }
  }
  return Status::Ok();
}

}  // namespace

// Strict (docs/gate_format.md): required fields must be there, and every field
// that is there must have its type; the error names the file and the field.
Result<GateReport> GateReportFromJson(std::string_view json, const std::string& name) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root)) {
    return CorruptError(fmt::format("{}: malformed JSON: {}", name, LocateJsonError(json)));
  }
  auto read = [&](GateReport* r) -> Status {
    EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, name));
    EK_RETURN_IF_ERROR(f.Str("run", &r->run_name));
    if (f.Has("run_file")) {
      JsonFields rf = f;
      EK_RETURN_IF_ERROR(f.Object("run_file", &rf));
      EK_RETURN_IF_ERROR(rf.OptStr("path", &r->run_file));
      if (rf.Has("xxh3")) EK_RETURN_IF_ERROR(rf.Hex64("xxh3", &r->run_xxh3));
    }
    EK_RETURN_IF_ERROR(f.Str("host", &r->host));
    EK_RETURN_IF_ERROR(f.IntIn("node_rank", -1, 1 << 24, &r->node_rank));
    if (f.Has("nodes") || f.Has("gpus_per_node")) {  // the layout: both or neither
      EK_RETURN_IF_ERROR(f.IntIn("nodes", 1, 1 << 24, &r->nodes));
      EK_RETURN_IF_ERROR(f.IntIn("gpus_per_node", 1, 1 << 24, &r->gpus_per_node));
      if (static_cast<int64_t>(r->nodes) * r->gpus_per_node > (1 << 24)) {
        return f.Err("gpus_per_node", fmt::format("{} nodes x {} GPUs is more than {} ranks", r->nodes, r->gpus_per_node,
                                                  1 << 24));
      }
    }
    EK_RETURN_IF_ERROR(f.OptStr("time", &r->time));
    if (f.Has("versions")) {
      JsonFields v = f;
      EK_RETURN_IF_ERROR(f.Object("versions", &v));
      EK_RETURN_IF_ERROR(v.OptStr("evenkeel", &r->evenkeel_version));
    }
    EK_RETURN_IF_ERROR(f.OptNum("seconds", &r->seconds));
    if (f.Has("hosts")) EK_RETURN_IF_ERROR(f.StrList("hosts", &r->hosts));
    if (f.Has("ranks_checked")) {
      std::vector<int64_t> ranks;
      EK_RETURN_IF_ERROR(f.IntList("ranks_checked", 0, 1 << 24, &ranks));
      for (int64_t x : ranks) r->ranks_checked.push_back(static_cast<int>(x));
    }
    if (f.Has("rank_blocks")) {
      JsonFields blocks = f;
      EK_RETURN_IF_ERROR(f.Object("rank_blocks", &blocks));
      for (std::string_view k : blocks.Keys()) {
        auto rank = ParseIntIn(k, 0, 1 << 24);
        if (!rank) return blocks.Err(k, "the key is not a rank number");
        uint64_t b = 0;
        EK_RETURN_IF_ERROR(blocks.U64(k, &b));
        r->rank_blocks[static_cast<int>(*rank)] = b;
      }
    }
    EK_RETURN_IF_ERROR(f.Objects("checks", [&](const JsonFields& c) {
      Check ch;
      EK_RETURN_IF_ERROR(ReadCheck(c, &ch));
      r->checks.push_back(std::move(ch));
      return Status::Ok();
    }));
    if (f.Has("global_min_blocks")) EK_RETURN_IF_ERROR(f.U64("global_min_blocks", &r->global_min_blocks));
    return Status::Ok();
  };
  GateReport r;
  EK_RETURN_IF_ERROR(read(&r));
  return r;
}

std::string GateReportToText(const GateReport& r, size_t max_problems) {
  std::string o;
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const Check& c = r.checks[i];
    o += fmt::format("{}. {:<12} {}  {}\n", i + 1, c.name, VerdictName(c.verdict), c.reason);
    if (c.problems.size() < 2) continue;  // the reason line says it all
    size_t shown = std::min(c.problems.size(), max_problems);
    for (size_t k = 0; k < shown; ++k) o += fmt::format("     - {}\n", c.problems[k]);
    if (shown < c.problems.size()) o += fmt::format("     ... and {} more (all in the JSON log)\n", c.problems.size() - shown);
  }
  o += fmt::format("gate: {} ({} checks in {:.2f} s{}); global_min_blocks {}\n", VerdictName(r.overall()), r.checks.size(),
                   r.seconds, r.node_rank >= 0 ? fmt::format(", node {}", r.node_rank) : "", Thousands(r.global_min_blocks));
  if (!r.run_file.empty()) o += fmt::format("run file: {} (xxh3 {:016x})\n", r.run_file, r.run_xxh3);
  return o;
}

Status WriteGateLog(const std::string& path, const GateReport& r, Env* env) {
  Status st = WriteFileAtomic(path, GateReportToJson(r), env);
  return st.WithContext(r.node_rank >= 0 ? "gate: node part" : "gate: pass log");
}

}  // namespace ek::gate
