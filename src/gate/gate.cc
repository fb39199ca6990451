#include "gate/gate.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "core/version.h"
#include "gate/checks.h"
#include "packfile/manifest.h"

namespace ek::gate {

using run::MakePlan;
using run::ModelForRun;
using run::Thousands;

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kWarn:
      return "WARN";
    case Verdict::kFail:
      return "FAIL";
  }
  return "FAIL";
}

Verdict GateReport::overall() const {
  Verdict v = Verdict::kPass;
  for (const auto& c : checks) v = std::max(v, c.verdict);
  return v;
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

Result<GateReport> RunGate(const RunFile& run, int node_rank, const GateEnv& env) {
  Clock* clock = env.env->clock();
  const double t0 = clock->Monotonic();
  GateReport rep;
  rep.run_name = run.name;
  rep.run_file = run.path;
  rep.run_xxh3 = run.xxh3;
  rep.host = env.env->HostName();
  rep.node_rank = node_rank;
  rep.nodes = run.nodes;
  rep.gpus_per_node = run.gpus_per_node;
  rep.hosts = run.hosts;
  rep.evenkeel_version = kVersion;
  rep.time = UtcNowIso8601();
  if (node_rank >= run.nodes) {
    return InvalidArgumentError(
        fmt::format("--node-rank {} but the run has {} node(s)", node_rank, run.nodes));
  }

  auto model = ModelForRun(run);
  std::string pack_dir = run.Resolve(run.pack_dir);
  auto manifest = pack_dir.empty()
                      ? Result<pack::Manifest>(InvalidArgumentError("data.pack_dir is not set"))
                      : pack::ReadManifest(pack_dir);
  const pack::Manifest* mp = manifest.ok() ? &*manifest : nullptr;
  Plan plan;
  if (model.ok()) {
    EK_ASSIGN_OR_RETURN(plan,
                        MakePlan(run, *model, mp, env.gpus.available ? env.gpus.memory_bytes : 0));
  }

  // The seven checks in order (checks.h), each through the verdict tail, Conclude.
  GateInputs in{run, node_rank, env, pack_dir, manifest, mp, model, plan};
  rep.checks.push_back(Conclude(DataCheck(in, &rep.ranks_checked)));
  // 2. balance (over the manifest's ranks; merged parts recompute it)
  if (mp) {
    for (const auto& r : mp->ranks) rep.rank_blocks[r.rank] = r.blocks;
  }
  rep.checks.push_back(Conclude(BalanceCheck(run, rep.rank_blocks, mp && mp->complete())));
  if (!rep.rank_blocks.empty()) {
    uint64_t lo = UINT64_MAX;
    for (auto [r, b] : rep.rank_blocks) lo = std::min(lo, b);
    rep.global_min_blocks = lo;
  }
  rep.checks.push_back(Conclude(ScheduleCheck(in)));
  rep.checks.push_back(Conclude(MemoryCheck(in)));
  rep.checks.push_back(Conclude(StorageCheck(in)));
  rep.checks.push_back(Conclude(DistributedCheck(in)));
  rep.checks.push_back(Conclude(IsolationCheck(in)));
  rep.seconds = clock->Monotonic() - t0;
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
  if (c->problems.size() > 1)
    c->reason += fmt::format(" (and {} more problem(s))", c->problems.size() - 1);
}

}  // namespace

Result<GateReport> MergeGateReports(const std::vector<GateReport>& parts, const RunFile* run) {
  if (parts.empty()) return InvalidArgumentError("gate merge: no parts");
  // The run's layout: the run file's, else the one the parts recorded (they must agree).
  int nodes = run ? run->nodes : 0, gpn = run ? run->gpus_per_node : 0;
  std::string layout_from =
      run ? (run->path.empty() ? std::string("the run file") : run->path) : "";
  for (const auto& p : parts) {
    if (p.run_name != parts[0].run_name) {
      return InvalidArgumentError(fmt::format("gate merge: parts from different runs ({} and {})",
                                              parts[0].run_name, p.run_name));
    }
    if (p.nodes == 0) continue;  // a part that does not record the layout
    if (nodes == 0) {
      nodes = p.nodes;
      gpn = p.gpus_per_node;
      layout_from = "the part of " + PartName(p);
    } else if (p.nodes != nodes || p.gpus_per_node != gpn) {
      return InvalidArgumentError(fmt::format(
          "gate merge: the part of {} was checked for {} node(s) x {} GPU(s), {} has {} x {}",
          PartName(p), p.nodes, p.gpus_per_node, layout_from, nodes, gpn));
    }
  }
  if (nodes < 1 || gpn < 1) {
    return InvalidArgumentError(
        "gate merge: no part records how many nodes the run has (parts of an older evenkeel): pass "
        "--run RUN.toml");
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
      return InvalidArgumentError(fmt::format(
          "gate merge: the part of {} is for node {}, but the run has {} node(s) (0-{})",
          PartName(p), p.node_rank, nodes, nodes - 1));
    }
    claims.push_back(p.node_rank < 0 ? Claim{0, nodes, &p}
                                     : Claim{p.node_rank, p.node_rank + 1, &p});
  }
  std::stable_sort(claims.begin(), claims.end(),
                   [](const Claim& x, const Claim& y) { return x.first < y.first; });
  for (size_t i = 1; i < claims.size(); ++i) {
    if (claims[i].first < claims[i - 1].end) {
      return InvalidArgumentError(
          fmt::format("gate merge: two parts claim node {}: the part of {} and the part of {}",
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
    out.ranks_checked.insert(out.ranks_checked.end(), p.ranks_checked.begin(),
                             p.ranks_checked.end());
    for (auto [r, b] : p.rank_blocks) out.rank_blocks[r] = b;
    out.seconds = std::max(out.seconds, p.seconds);
  }
  std::sort(out.ranks_checked.begin(), out.ranks_checked.end());
  out.ranks_checked.erase(std::unique(out.ranks_checked.begin(), out.ranks_checked.end()),
                          out.ranks_checked.end());
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
        if (pc.problems.empty() && pc.verdict != Verdict::kPass)
          c.problems.push_back(PartName(p) + ": " + pc.reason);
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
    std::string who =
        b - a == 1 ? fmt::format("node {} ({}{})", a, ranks, named ? ", host " + run_hosts[a] : "")
                   : fmt::format("nodes {}-{} ({})", a, b - 1, ranks);
    missing.push_back(fmt::format("{} sent no gate part: {} of {} ranks checked", who,
                                  out.ranks_checked.size(), world));
  };
  int next = 0;
  for (const Claim& c : claims) {
    gap(next, c.first);
    next = c.end;
  }
  gap(next, nodes);
  if (!missing.empty()) {
    auto data = std::find_if(out.checks.begin(), out.checks.end(),
                             [](const Check& c) { return c.name == "data"; });
    if (data == out.checks.end())
      data = out.checks.insert(out.checks.begin(), Check{"data", Verdict::kFail, "", {}, {}});
    data->verdict = Verdict::kFail;
    data->problems.insert(data->problems.begin(), missing.begin(), missing.end());
    ReasonFromProblems(&*data);
  }
  if (run) {
    for (auto& c : out.checks) {
      if (c.name == "balance") {
        c = Conclude(BalanceCheck(*run, out.rank_blocks,
                                  static_cast<int>(out.rank_blocks.size()) == run->world()));
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

void WriteGateReportMembers(JsonWriter& w, const GateReport& r) {
  w.Key("run").Str(r.run_name);
  w.Key("run_file").BeginObject().Key("path").Str(r.run_file);
  w.Key("xxh3").Str(fmt::format("{:016x}", r.run_xxh3)).EndObject();
  w.Key("overall").Str(VerdictName(r.overall()));
  w.Key("host").Str(r.host);
  w.Key("node_rank").Int(r.node_rank);
  // The run's layout, which a merge needs to know every node sent a part (absent when not known).
  if (r.nodes > 0) {
    w.Key("nodes").Int(r.nodes);
    w.Key("gpus_per_node").Int(r.gpus_per_node);
  }
  w.Key("hosts").StrArray(r.hosts);
  w.Key("ranks_checked").IntArray(r.ranks_checked);
  w.Key("rank_blocks").BeginObject();
  for (auto [rank, blocks] : r.rank_blocks) w.Key(std::to_string(rank)).Uint(blocks);
  w.EndObject();
  w.Key("checks").BeginArray(JsonWriter::kLines);
  for (const Check& c : r.checks) {
    w.BeginObject().Key("name").Str(c.name).Key("verdict").Str(VerdictName(c.verdict));
    w.Key("reason").Str(c.reason).Key("numbers").BeginObject();
    for (const auto& [k, v] : c.numbers) w.Key(k).Double(v);
    w.EndObject().Key("problems").StrArray(c.problems).EndObject();
  }
  w.EndArray();
  w.Key("global_min_blocks").Uint(r.global_min_blocks);
  w.Key("versions").BeginObject().Key("evenkeel").Str(r.evenkeel_version).EndObject();
  w.Key("time").Str(r.time);
  w.Key("seconds").Fixed(r.seconds, 3);
}

std::string GateReportToJson(const GateReport& r) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject(JsonWriter::kLines);
  WriteGateReportMembers(w, r);
  w.EndObject();
  return w.Line();
}

namespace {

Status ReadVerdict(const JsonFields& f, Verdict* out) {
  std::string v;
  EK_RETURN_IF_ERROR(f.Str("verdict", &v));
  if (v == "PASS")
    *out = Verdict::kPass;
  else if (v == "WARN")
    *out = Verdict::kWarn;
  else if (v == "FAIL")
    *out = Verdict::kFail;
  else
    return f.Err("verdict", fmt::format("'{}' is not PASS, WARN or FAIL", v));
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
        return f.Err("gpus_per_node", fmt::format("{} nodes x {} GPUs is more than {} ranks",
                                                  r->nodes, r->gpus_per_node, 1 << 24));
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
    if (f.Has("global_min_blocks"))
      EK_RETURN_IF_ERROR(f.U64("global_min_blocks", &r->global_min_blocks));
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
    if (shown < c.problems.size())
      o += fmt::format("     ... and {} more (all in the JSON log)\n", c.problems.size() - shown);
  }
  o += fmt::format("gate: {} ({} checks in {:.2f} s{}); global_min_blocks {}\n",
                   VerdictName(r.overall()), r.checks.size(), r.seconds,
                   r.node_rank >= 0 ? fmt::format(", node {}", r.node_rank) : "",
                   Thousands(r.global_min_blocks));
  if (!r.run_file.empty())
    o += fmt::format("run file: {} (xxh3 {:016x})\n", r.run_file, r.run_xxh3);
  return o;
}

Status WriteGateLog(const std::string& path, const GateReport& r, Env* env) {
  Status st = WriteFileAtomic(path, GateReportToJson(r), env);
  return st.WithContext(r.node_rank >= 0 ? "gate: node part" : "gate: pass log");
}

}  // namespace ek::gate
