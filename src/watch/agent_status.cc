#include "watch/agent_status.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>

#include "core/json_out.h"

namespace ek::watch {

namespace {

void Num(std::string* out, std::string_view key, double v) {
  out->append(fmt::format(",\"{}\":{}", key, std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"));
}
void Opt(std::string* out, std::string_view key, const std::optional<double>& v) {
  if (v) Num(out, key, *v);
}

void CheckpointJson(std::string* out, const CheckpointInfo& c, double age) {
  out->append("{\"name\":");
  AppendJsonString(out, c.name);
  out->append(fmt::format(",\"step\":{},\"complete\":{},\"files\":{},\"bytes\":{}", c.step,
                          c.complete ? "true" : "false", c.files, c.bytes));
  Num(out, "age_s", age);
  if (!c.why.empty()) {
    out->append(",\"why\":");
    AppendJsonString(out, c.why);
  }
  out->push_back('}');
}

// Prometheus label value escaping: \\, \" and \n.
std::string Label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string PromNum(double v) {
  if (std::isnan(v)) return "NaN";
  return fmt::format("{:.10g}", v);
}

using simdjson::dom::element;

double D(element e, std::string_view key, double def = 0) {
  double v;
  if (e[key].get_double().get(v)) {
    int64_t i;
    if (!e[key].get_int64().get(i)) return static_cast<double>(i);
    return def;
  }
  return v;
}
std::optional<double> OptD(element e, std::string_view key) {
  element x;
  if (e[key].get(x) || x.is_null()) return std::nullopt;
  return D(e, key);
}
int64_t I(element e, std::string_view key, int64_t def = 0) {
  int64_t v;
  if (e[key].get_int64().get(v)) return def;
  return v;
}
std::string S(element e, std::string_view key) {
  std::string_view v;
  if (e[key].get_string().get(v)) return "";
  return std::string(v);
}
bool B(element e, std::string_view key) {
  bool v;
  if (e[key].get_bool().get(v)) return false;
  return v;
}

CheckpointInfo ParseCheckpoint(element e, double* age) {
  CheckpointInfo c;
  c.name = S(e, "name");
  c.step = I(e, "step", -1);
  c.complete = B(e, "complete");
  c.files = static_cast<int>(I(e, "files"));
  c.bytes = static_cast<uint64_t>(I(e, "bytes"));
  c.why = S(e, "why");
  *age = D(e, "age_s", -1);
  return c;
}

}  // namespace

std::string AgentStatusToJson(const AgentStatus& s) {
  std::string out = "{\"v\":1,\"run\":";
  AppendJsonString(&out, s.run);
  out += ",\"host\":";
  AppendJsonString(&out, s.host);
  Num(&out, "time", s.time);
  out += fmt::format(",\"rank_base\":{}", s.rank_base);
  out += ",\"telemetry\":";
  AppendJsonString(&out, s.telemetry);
  out += ",\"gpus\":[";
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuReading& g = s.gpus[i];
    if (i) out += ',';
    out += fmt::format("{{\"gpu\":{}", g.gpu);
    Opt(&out, "util_pct", g.util_pct);
    Opt(&out, "power_w", g.power_w);
    Opt(&out, "mem_used_mib", g.mem_used_mib);
    Num(&out, "age_s", g.age_s);
    out += '}';
  }
  out += "],\"ranks\":[";
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const RankReading& r = s.ranks[i];
    if (i) out += ',';
    out += fmt::format("{{\"rank\":{},\"local_rank\":{},\"pid\":{},\"alive\":{},\"step\":{},\"tokens\":{}",
                       r.hb.rank, r.hb.local_rank, r.hb.pid, r.alive ? "true" : "false", r.hb.step,
                       r.hb.tokens);
    Num(&out, "tok_s", r.hb.tok_s);
    Num(&out, "step_s", r.hb.step_s);
    Num(&out, "beat_age_s", r.beat_age_s);
    Num(&out, "step_age_s", r.step_age_s);
    Num(&out, "phase_age_s", r.phase_age_s);
    out += ",\"phase\":";
    AppendJsonString(&out, r.hb.phase);
    out += fmt::format(",\"phase_step\":{},\"total_steps\":{}}}", r.hb.phase_step, r.hb.total_steps);
  }
  out += "],\"checkpoint\":{";
  out += fmt::format("\"complete_count\":{}", s.checkpoint.complete_count);
  if (s.checkpoint.newest_complete) {
    out += ",\"complete\":";
    CheckpointJson(&out, *s.checkpoint.newest_complete, s.checkpoint_complete_age_s);
  }
  if (s.checkpoint.in_progress) {
    out += ",\"in_progress\":";
    CheckpointJson(&out, *s.checkpoint.in_progress, s.checkpoint_progress_age_s);
  }
  out += "},\"problems\":[";
  for (size_t i = 0; i < s.problems.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(&out, s.problems[i]);
  }
  out += "]}\n";
  return out;
}

Result<AgentStatus> ParseAgentStatus(std::string_view json, std::string_view where) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(json.data(), json.size()).get(root) || !root.is_object()) {
    return CorruptError(fmt::format("{}: /status is not a JSON object", where));
  }
  if (I(root, "v") != 1) return CorruptError(fmt::format("{}: unknown /status version", where));
  AgentStatus s;
  s.run = S(root, "run");
  s.host = S(root, "host");
  s.time = D(root, "time");
  s.rank_base = static_cast<int>(I(root, "rank_base", -1));
  s.telemetry = S(root, "telemetry");
  simdjson::dom::array arr;
  if (!root["gpus"].get_array().get(arr)) {
    for (element g : arr) {
      GpuReading r;
      r.gpu = static_cast<int>(I(g, "gpu", -1));
      r.util_pct = OptD(g, "util_pct");
      r.power_w = OptD(g, "power_w");
      r.mem_used_mib = OptD(g, "mem_used_mib");
      r.age_s = D(g, "age_s");
      s.gpus.push_back(r);
    }
  }
  if (!root["ranks"].get_array().get(arr)) {
    for (element e : arr) {
      RankReading r;
      r.hb.rank = static_cast<int>(I(e, "rank", -1));
      r.hb.local_rank = static_cast<int>(I(e, "local_rank", -1));
      r.hb.pid = I(e, "pid");
      r.alive = B(e, "alive");
      r.hb.step = I(e, "step", -1);
      r.hb.tokens = I(e, "tokens");
      r.hb.tok_s = D(e, "tok_s");
      r.hb.step_s = D(e, "step_s");
      r.beat_age_s = D(e, "beat_age_s");
      r.step_age_s = D(e, "step_age_s");
      r.hb.phase = S(e, "phase");
      r.hb.phase_step = I(e, "phase_step", -1);
      r.phase_age_s = D(e, "phase_age_s", -1);
      r.hb.total_steps = I(e, "total_steps");
      if (r.hb.rank < 0) return CorruptError(fmt::format("{}: a rank without a number", where));
      s.ranks.push_back(std::move(r));
    }
  }
  element ck;
  if (!root["checkpoint"].get(ck)) {
    s.checkpoint.complete_count = static_cast<int>(I(ck, "complete_count"));
    element c;
    if (!ck["complete"].get(c)) s.checkpoint.newest_complete = ParseCheckpoint(c, &s.checkpoint_complete_age_s);
    if (!ck["in_progress"].get(c)) s.checkpoint.in_progress = ParseCheckpoint(c, &s.checkpoint_progress_age_s);
  }
  if (!root["problems"].get_array().get(arr)) {
    for (element p : arr) {
      std::string_view v;
      if (!p.get_string().get(v)) s.problems.emplace_back(v);
    }
  }
  return s;
}

std::string AgentStatusToMetrics(const AgentStatus& s) {
  std::string out;
  std::string base = fmt::format("run=\"{}\",host=\"{}\"", Label(s.run), Label(s.host));
  auto family = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("evenkeel_agent_up", "gauge", "1 while the agent answers; telemetry=\"ok\" when GPU readings flow.");
  out += fmt::format("evenkeel_agent_up{{{},telemetry=\"{}\"}} 1\n", base, s.telemetry == "ok" ? "ok" : "error");

  auto gpu_metric = [&](std::string_view name, std::string_view help, auto get) {
    family(name, "gauge", help);
    for (const GpuReading& g : s.gpus) {
      std::optional<double> v = get(g);
      if (!v) continue;
      std::string rank = s.rank_base >= 0 ? fmt::format(",rank=\"{}\"", s.rank_base + g.gpu) : "";
      out += fmt::format("{}{{{},gpu=\"{}\"{}}} {}\n", name, base, g.gpu, rank, PromNum(*v));
    }
  };
  gpu_metric("evenkeel_gpu_power_watts", "Board power draw.", [](const GpuReading& g) { return g.power_w; });
  gpu_metric("evenkeel_gpu_utilization_percent", "GPU utilization (a kernel was scheduled), 0-100.",
             [](const GpuReading& g) { return g.util_pct; });
  gpu_metric("evenkeel_gpu_memory_used_bytes", "GPU memory in use.", [](const GpuReading& g) {
    return g.mem_used_mib ? std::optional<double>(*g.mem_used_mib * 1048576.0) : std::nullopt;
  });
  gpu_metric("evenkeel_gpu_sample_age_seconds", "Age of the GPU reading.",
             [](const GpuReading& g) { return std::optional<double>(g.age_s); });

  auto rank_metric = [&](std::string_view name, std::string_view type, std::string_view help, auto get) {
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
  rank_metric("evenkeel_rank_seconds_since_beat", "gauge", "Seconds since the rank's last heartbeat.",
              [](const RankReading& r) { return r.beat_age_s; });
  rank_metric("evenkeel_rank_seconds_since_step", "gauge", "Seconds since the rank's step last advanced.",
              [](const RankReading& r) { return r.step_age_s; });
  rank_metric("evenkeel_rank_process_alive", "gauge", "1 while the rank's process is alive.",
              [](const RankReading& r) { return r.alive ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_in_checkpoint", "gauge", "1 while the rank says it is saving a checkpoint.",
              [](const RankReading& r) { return r.hb.phase == "checkpoint" ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_done", "gauge", "1 once the rank has finished cleanly.",
              [](const RankReading& r) { return r.hb.phase == "done" ? 1.0 : 0.0; });
  rank_metric("evenkeel_rank_total_steps", "gauge", "The run's final step as the trainer knows it (0: unknown).",
              [](const RankReading& r) { return static_cast<double>(r.hb.total_steps); });

  family("evenkeel_checkpoint_last_step", "gauge", "Step of the newest complete checkpoint (-1: none).");
  const auto& c = s.checkpoint.newest_complete;
  out += fmt::format("evenkeel_checkpoint_last_step{{{}}} {}\n", base, c ? c->step : -1);
  family("evenkeel_checkpoint_last_bytes", "gauge", "Size of the newest complete checkpoint.");
  out += fmt::format("evenkeel_checkpoint_last_bytes{{{}}} {}\n", base, c ? c->bytes : 0);
  family("evenkeel_checkpoint_last_age_seconds", "gauge", "Seconds since the newest complete checkpoint was written.");
  out += fmt::format("evenkeel_checkpoint_last_age_seconds{{{}}} {}\n", base,
                     c ? PromNum(s.checkpoint_complete_age_s) : "NaN");
  family("evenkeel_checkpoint_in_progress", "gauge", "1 while a newer checkpoint is being written.");
  out += fmt::format("evenkeel_checkpoint_in_progress{{{}}} {}\n", base, s.checkpoint.in_progress ? 1 : 0);
  family("evenkeel_agent_problems", "gauge", "Unreadable heartbeat files and bad telemetry input now.");
  out += fmt::format("evenkeel_agent_problems{{{}}} {}\n", base, s.problems.size());
  return out;
}

}  // namespace ek::watch
