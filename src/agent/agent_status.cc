#include "agent/agent_status.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "core/json_fields.h"
#include "core/json_out.h"

namespace ek::watch {

namespace {

// The agent's numbers in six significant digits; NaN (an unknown reading) as null.
void Num(JsonWriter& w, std::string_view key, double v) {
  w.Key(key);
  if (std::isfinite(v))
    w.Raw(fmt::format("{:.6g}", v));
  else
    w.Null();
}
void Opt(JsonWriter& w, std::string_view key, const std::optional<double>& v) {
  if (v) Num(w, key, *v);
}

void CheckpointJson(JsonWriter& w, const CheckpointInfo& c, double age) {
  w.BeginObject().Key("name").Str(c.name).Key("step").Int(c.step);
  w.Key("complete").Bool(c.complete).Key("files").Int(c.files).Key("bytes").Uint(c.bytes);
  Num(w, "age_s", age);
  if (!c.why.empty()) w.Key("why").Str(c.why);
  w.EndObject();
}

// Prometheus label value escaping: \\, \" and \n.
std::string Label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string PromNum(double v) {
  if (std::isnan(v)) return "NaN";
  return fmt::format("{:.10g}", v);
}

// A number the writer may have written as null (NaN): null reads as `if_null`.
Status NumOr(const JsonFields& f, std::string_view key, double if_null, double* out) {
  std::optional<double> v;
  EK_RETURN_IF_ERROR(f.NumOrNull(key, &v));
  *out = v.value_or(if_null);
  return Status::Ok();
}

Status ParseCheckpoint(const JsonFields& c, CheckpointInfo* out, double* age) {
  EK_RETURN_IF_ERROR(c.Str("name", &out->name));
  EK_RETURN_IF_ERROR(c.Int("step", &out->step));
  EK_RETURN_IF_ERROR(c.Bool("complete", &out->complete));
  EK_RETURN_IF_ERROR(c.IntIn("files", 0, std::numeric_limits<int>::max(), &out->files));
  EK_RETURN_IF_ERROR(c.U64("bytes", &out->bytes));
  EK_RETURN_IF_ERROR(c.OptStr("why", &out->why));
  return NumOr(c, "age_s", -1, age);
}

Status ParseGpu(const JsonFields& g, GpuReading* r) {
  EK_RETURN_IF_ERROR(g.IntIn("gpu", -1, 1 << 20, &r->gpu));
  EK_RETURN_IF_ERROR(g.OptNumOrNull("util_pct", &r->util_pct));
  EK_RETURN_IF_ERROR(g.OptNumOrNull("power_w", &r->power_w));
  EK_RETURN_IF_ERROR(g.OptNumOrNull("mem_used_mib", &r->mem_used_mib));
  return NumOr(g, "age_s", 0, &r->age_s);
}

Status ParseRank(const JsonFields& e, RankReading* r) {
  EK_RETURN_IF_ERROR(e.IntIn("rank", 0, 1 << 24, &r->hb.rank));
  EK_RETURN_IF_ERROR(e.IntIn("local_rank", -1, 1 << 24, &r->hb.local_rank));  // -1: unknown
  EK_RETURN_IF_ERROR(e.Int("pid", &r->hb.pid));
  EK_RETURN_IF_ERROR(e.Bool("alive", &r->alive));
  EK_RETURN_IF_ERROR(e.Int("step", &r->hb.step));
  EK_RETURN_IF_ERROR(e.Int("tokens", &r->hb.tokens));
  EK_RETURN_IF_ERROR(NumOr(e, "tok_s", 0, &r->hb.tok_s));
  EK_RETURN_IF_ERROR(NumOr(e, "step_s", 0, &r->hb.step_s));
  EK_RETURN_IF_ERROR(NumOr(e, "beat_age_s", 0, &r->beat_age_s));
  EK_RETURN_IF_ERROR(NumOr(e, "step_age_s", 0, &r->step_age_s));
  EK_RETURN_IF_ERROR(NumOr(e, "phase_age_s", -1, &r->phase_age_s));
  EK_RETURN_IF_ERROR(e.Str("phase", &r->hb.phase));
  EK_RETURN_IF_ERROR(e.Int("phase_step", &r->hb.phase_step));
  return e.Int("total_steps", &r->hb.total_steps);
}

}  // namespace

std::string AgentStatusToJson(const AgentStatus& s) {
  JsonWriter w;
  w.BeginObject().Key("v").Int(1).Key("run").Str(s.run).Key("host").Str(s.host);
  Num(w, "time", s.time);
  w.Key("rank_base").Int(s.rank_base).Key("telemetry").Str(s.telemetry);
  w.Key("gpus").BeginArray();
  for (const GpuReading& g : s.gpus) {
    w.BeginObject().Key("gpu").Int(g.gpu);
    Opt(w, "util_pct", g.util_pct);
    Opt(w, "power_w", g.power_w);
    Opt(w, "mem_used_mib", g.mem_used_mib);
    Num(w, "age_s", g.age_s);
    w.EndObject();
  }
  w.EndArray().Key("ranks").BeginArray();
  for (const RankReading& r : s.ranks) {
    w.BeginObject().Key("rank").Int(r.hb.rank).Key("local_rank").Int(r.hb.local_rank);
    w.Key("pid").Int(r.hb.pid).Key("alive").Bool(r.alive).Key("step").Int(r.hb.step);
    w.Key("tokens").Int(r.hb.tokens);
    Num(w, "tok_s", r.hb.tok_s);
    Num(w, "step_s", r.hb.step_s);
    Num(w, "beat_age_s", r.beat_age_s);
    Num(w, "step_age_s", r.step_age_s);
    Num(w, "phase_age_s", r.phase_age_s);
    w.Key("phase").Str(r.hb.phase).Key("phase_step").Int(r.hb.phase_step);
    w.Key("total_steps").Int(r.hb.total_steps).EndObject();
  }
  w.EndArray().Key("checkpoint").BeginObject();
  w.Key("complete_count").Int(s.checkpoint.complete_count);
  if (s.checkpoint.newest_complete) {
    w.Key("complete");
    CheckpointJson(w, *s.checkpoint.newest_complete, s.checkpoint_complete_age_s);
  }
  if (s.checkpoint.in_progress) {
    w.Key("in_progress");
    CheckpointJson(w, *s.checkpoint.in_progress, s.checkpoint_progress_age_s);
  }
  w.EndObject().Key("problems").StrArray(s.problems).EndObject();
  return w.Line();
}

// Strict (docs/watch.md): every field AgentStatusToJson writes is required
// and typed, so an agent of another version or a proxy's error page is an error
// naming the URL and the field ("http://n1:9464/status: ranks[3].step: not an
// integer"), never a rank at step 0.
Result<AgentStatus> ParseAgentStatus(std::string_view json, std::string_view where) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root) || !root.is_object()) {
    return CorruptError(fmt::format("{}: /status is not a JSON object", where));
  }
  JsonFields f(root, std::string(where));
  int64_t v = 0;
  EK_RETURN_IF_ERROR(f.Int("v", &v));
  if (v != 1) return f.Err("v", fmt::format("unknown /status version {}", v));
  AgentStatus s;
  EK_RETURN_IF_ERROR(f.Str("run", &s.run));
  EK_RETURN_IF_ERROR(f.Str("host", &s.host));
  EK_RETURN_IF_ERROR(NumOr(f, "time", 0, &s.time));
  EK_RETURN_IF_ERROR(f.IntIn("rank_base", -1, 1 << 24, &s.rank_base));
  EK_RETURN_IF_ERROR(f.Str("telemetry", &s.telemetry));
  EK_RETURN_IF_ERROR(f.Objects("gpus", [&](const JsonFields& g) {
    GpuReading r;
    EK_RETURN_IF_ERROR(ParseGpu(g, &r));
    s.gpus.push_back(r);
    return Status::Ok();
  }));
  EK_RETURN_IF_ERROR(f.Objects("ranks", [&](const JsonFields& rf) {
    RankReading r;
    EK_RETURN_IF_ERROR(ParseRank(rf, &r));
    s.ranks.push_back(std::move(r));
    return Status::Ok();
  }));
  JsonFields ck = f;
  EK_RETURN_IF_ERROR(f.Object("checkpoint", &ck));
  EK_RETURN_IF_ERROR(
      ck.IntIn("complete_count", 0, std::numeric_limits<int>::max(), &s.checkpoint.complete_count));
  for (auto [key, slot, age] :
       {std::tuple{"complete", &s.checkpoint.newest_complete, &s.checkpoint_complete_age_s},
        std::tuple{"in_progress", &s.checkpoint.in_progress, &s.checkpoint_progress_age_s}}) {
    if (!ck.Has(key)) continue;
    JsonFields c = ck;
    EK_RETURN_IF_ERROR(ck.Object(key, &c));
    CheckpointInfo info;
    EK_RETURN_IF_ERROR(ParseCheckpoint(c, &info, age));
    *slot = std::move(info);
  }
  EK_RETURN_IF_ERROR(f.StrList("problems", &s.problems));
  return s;
}

std::string AgentStatusToMetrics(const AgentStatus& s) {
  std::string out;
  std::string base = fmt::format("run=\"{}\",host=\"{}\"", Label(s.run), Label(s.host));
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("evenkeel_agent_up", "gauge",
         "1 while the agent answers; telemetry=\"ok\" when GPU readings flow.");
  out += fmt::format("evenkeel_agent_up{{{},telemetry=\"{}\"}} 1\n", base,
                     s.telemetry == "ok" ? "ok" : "error");

  auto gpu_metric = [&](std::string_view name, std::string_view help, auto get) {
    family(name, "gauge", help);
    for (const GpuReading& g : s.gpus) {
      std::optional<double> v = get(g);
      if (!v) continue;
      std::string rank = s.rank_base >= 0 ? fmt::format(",rank=\"{}\"", s.rank_base + g.gpu) : "";
      out += fmt::format("{}{{{},gpu=\"{}\"{}}} {}\n", name, base, g.gpu, rank, PromNum(*v));
    }
  };
  gpu_metric("evenkeel_gpu_power_watts", "Board power draw.",
             [](const GpuReading& g) { return g.power_w; });
  gpu_metric("evenkeel_gpu_utilization_percent", "GPU utilization (a kernel was scheduled), 0-100.",
             [](const GpuReading& g) { return g.util_pct; });
  gpu_metric("evenkeel_gpu_memory_used_bytes", "GPU memory in use.", [](const GpuReading& g) {
    return g.mem_used_mib ? std::optional<double>(*g.mem_used_mib * 1048576.0) : std::nullopt;
  });
  gpu_metric("evenkeel_gpu_sample_age_seconds", "Age of the GPU reading.",
             [](const GpuReading& g) { return std::optional<double>(g.age_s); });

  auto rank_metric = [&](std::string_view name, std::string_view type, std::string_view help,
                         auto get) {
    family(name, type, help);
    for (const RankReading& r : s.ranks) {
      out += fmt::format("{}{{{},rank=\"{}\",local_rank=\"{}\"}} {}\n", name, base, r.hb.rank,
                         r.hb.local_rank, PromNum(get(r)));
    }
  };
  rank_metric("evenkeel_rank_step", "gauge", "Last finished step.",
              [](const RankReading& r) { return static_cast<double>(r.hb.step); });
  rank_metric("evenkeel_rank_tokens_total", "counter", "Tokens this rank processed.",
              [](const RankReading& r) { return static_cast<double>(r.hb.tokens); });
  rank_metric("evenkeel_rank_tokens_per_second", "gauge", "Moving average of tokens/s.",
              [](const RankReading& r) { return r.hb.tok_s; });
  rank_metric("evenkeel_rank_step_seconds", "gauge", "Moving average of seconds per step.",
              [](const RankReading& r) { return r.hb.step_s; });
  rank_metric("evenkeel_rank_seconds_since_beat", "gauge",
              "Seconds since the rank's last heartbeat.",
              [](const RankReading& r) { return r.beat_age_s; });
  rank_metric("evenkeel_rank_seconds_since_step", "gauge",
              "Seconds since the rank's step last advanced.",
              [](const RankReading& r) { return r.step_age_s; });
  rank_metric("evenkeel_rank_process_alive", "gauge", "1 while the rank's process is alive.",
              [](const RankReading& r) { return r.alive ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_in_checkpoint", "gauge",
              "1 while the rank says it is saving a checkpoint.",
              [](const RankReading& r) { return r.hb.phase == "checkpoint" ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_done", "gauge", "1 once the rank has finished cleanly.",
              [](const RankReading& r) { return r.hb.phase == "done" ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_total_steps", "gauge",
              "The run's final step as the trainer knows it (0: unknown).",
              [](const RankReading& r) { return static_cast<double>(r.hb.total_steps); });

  family("evenkeel_checkpoint_last_step", "gauge",
         "Step of the newest complete checkpoint (-1: none).");
  const auto& c = s.checkpoint.newest_complete;
  out += fmt::format("evenkeel_checkpoint_last_step{{{}}} {}\n", base, c ? c->step : -1);
  family("evenkeel_checkpoint_last_bytes", "gauge", "Size of the newest complete checkpoint.");
  out += fmt::format("evenkeel_checkpoint_last_bytes{{{}}} {}\n", base, c ? c->bytes : 0);
  family("evenkeel_checkpoint_last_age_seconds", "gauge",
         "Seconds since the newest complete checkpoint was written.");
  out += fmt::format("evenkeel_checkpoint_last_age_seconds{{{}}} {}\n", base,
                     c ? PromNum(s.checkpoint_complete_age_s) : "NaN");
  family("evenkeel_checkpoint_in_progress", "gauge",
         "1 while a newer checkpoint is being written.");
  out += fmt::format("evenkeel_checkpoint_in_progress{{{}}} {}\n", base,
                     s.checkpoint.in_progress ? 1 : 0);
  if (s.goodput) {
    // The launch's goodput account (docs/launch.md "Goodput"), as node 0's launcher last wrote it.
    const heartbeat::GoodputAccount& g = s.goodput->goodput;
    family("evenkeel_goodput_ratio", "gauge",
           "Productive training time over the launch's wall time (0-1).");
    out += fmt::format("evenkeel_goodput_ratio{{{}}} {}\n", base, PromNum(g.Ratio()));
    family("evenkeel_goodput_seconds", "gauge",
           "The launch's wall time by part; the parts sum to the wall time.");
    for (auto [part, v] : {std::pair{"training", g.training_s},
                           {"redone", g.redone_s},
                           {"detection", g.detection_s},
                           {"stopping", g.stopping_s},
                           {"rendezvous", g.rendezvous_s},
                           {"startup", g.startup_s},
                           {"save_blocked", g.save_blocked_s},
                           {"other", g.other_s}}) {
      out += fmt::format("evenkeel_goodput_seconds{{{},part=\"{}\"}} {}\n", base, part, PromNum(v));
    }
  }
  family("evenkeel_agent_problems", "gauge",
         "Unreadable heartbeat files and bad telemetry input now.");
  out += fmt::format("evenkeel_agent_problems{{{}}} {}\n", base, s.problems.size());
  return out;
}

}  // namespace ek::watch
