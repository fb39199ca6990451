#include "launch/records.h"

#include <fmt/core.h>
#include <simdjson.h>

#include <limits>

#include "ckpt/checkpoint.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/parse.h"

namespace ek::launch {

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

}  // namespace

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kDone:
      return "done";
    case Action::kRestart:
      return "restart";
    case Action::kStop:
      return "stop";
  }
  return "?";
}

std::string RankCauseToJson(const RankCause& c) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("rank").Int(c.rank).Key("cause").Str(c.cause).EndObject();
  return w.str();
}

std::string RankProgressToJson(const RankProgress& p) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("rank").Int(p.rank).Key("step").Int(p.step).Key("phase").Str(p.phase);
  w.Key("phase_step")
      .Int(p.phase_step)
      .Key("time")
      .Fixed(p.time, 3)
      .Key("pid")
      .Int(p.pid)
      .EndObject();
  return w.str();
}

std::string NodeRecordToJson(const NodeRecord& n) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("node").Int(n.node).Key("host").Str(n.host).Key("start").Fixed(n.start, 3);
  w.Key("end").Fixed(n.end, 3);
  w.Key("torchrun")
      .BeginObject()
      .Key("exit_code")
      .Int(n.torchrun_code)
      .Key("signal")
      .Int(n.torchrun_signal)
      .EndObject();
  w.Key("cancelled")
      .Bool(n.cancelled)
      .Key("step_reached")
      .Int(n.step_reached)
      .Key("error")
      .Str(n.error);
  w.Key("ranks").BeginArray();
  for (const auto& r : n.ranks) w.Raw(RankRecordToJson(r));
  w.EndArray().Key("causes").BeginArray();
  for (const auto& c : n.causes) w.Raw(RankCauseToJson(c));
  w.EndArray().Key("progress").BeginArray();
  for (const auto& p : n.progress) w.Raw(RankProgressToJson(p));
  w.EndArray().EndObject();
  return w.Line();
}

Result<NodeRecord> NodeRecordFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  NodeRecord n;
  EK_RETURN_IF_ERROR(f.IntIn("node", 0, kIntMax, &n.node));
  EK_RETURN_IF_ERROR(f.Str("host", &n.host));
  EK_RETURN_IF_ERROR(f.Num("start", &n.start));
  EK_RETURN_IF_ERROR(f.Num("end", &n.end));
  JsonFields t = f;
  EK_RETURN_IF_ERROR(f.Object("torchrun", &t));
  EK_RETURN_IF_ERROR(t.Int("exit_code", &n.torchrun_code));  // -1: torchrun never ran
  EK_RETURN_IF_ERROR(t.IntIn("signal", 0, kIntMax, &n.torchrun_signal));
  EK_RETURN_IF_ERROR(f.Bool("cancelled", &n.cancelled));
  EK_RETURN_IF_ERROR(f.Int("step_reached", -1, kI64Max, &n.step_reached));
  EK_RETURN_IF_ERROR(f.Str("error", &n.error));
  EK_RETURN_IF_ERROR(f.Objects("ranks", [&](const JsonFields& r) -> Status {
    EK_ASSIGN_OR_RETURN(RankRecord rec, RankRecordFromFields(r));
    n.ranks.push_back(std::move(rec));
    return Status::Ok();
  }));
  EK_RETURN_IF_ERROR(run::ReadRankCauses(f, &n.causes));
  // Written since hangs are named (docs/launch.md "Records"); absent in older records.
  if (f.Has("progress")) {
    EK_RETURN_IF_ERROR(f.Objects("progress", [&](const JsonFields& p) -> Status {
      RankProgress rp;
      EK_RETURN_IF_ERROR(p.IntIn("rank", 0, kIntMax, &rp.rank));
      EK_RETURN_IF_ERROR(p.Int("step", -1, kI64Max, &rp.step));
      EK_RETURN_IF_ERROR(p.Str("phase", &rp.phase));
      EK_RETURN_IF_ERROR(p.Int("phase_step", -1, kI64Max, &rp.phase_step));
      EK_RETURN_IF_ERROR(p.Num("time", &rp.time));
      EK_RETURN_IF_ERROR(p.Int("pid", 0, kI64Max, &rp.pid));
      n.progress.push_back(std::move(rp));
      return Status::Ok();
    }));
  }
  return n;
}

Result<AttemptAccount> AttemptAccountFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  AttemptAccount a;
  EK_RETURN_IF_ERROR(f.IntIn("attempt", 1, kIntMax, &a.attempt));
  EK_RETURN_IF_ERROR(f.Num("start", &a.start));
  EK_RETURN_IF_ERROR(f.Num("end", &a.end));
  EK_RETURN_IF_ERROR(f.Str("outcome", &a.outcome));
  EK_RETURN_IF_ERROR(f.Num("gpu_hours", &a.gpu_hours));
  EK_RETURN_IF_ERROR(f.Num("gpu_hours_lost", &a.gpu_hours_lost));
  if (a.gpu_hours < 0 || a.gpu_hours_lost < 0) return f.Err("gpu_hours", "negative");
  EK_RETURN_IF_ERROR(run::ReadRankCauses(f, &a.causes));
  a.json = std::string(json);
  while (!a.json.empty() && (a.json.back() == '\n' || a.json.back() == ' ')) a.json.pop_back();
  return a;
}

std::string DecisionToJson(int attempt, const Decision& d) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject()
      .Key("attempt")
      .Int(attempt)
      .Key("action")
      .Str(ActionName(d.action))
      .Key("exit_code")
      .Int(d.exit_code);
  w.Key("reason")
      .Str(d.reason)
      .Key("next_attempt")
      .Int(d.next_attempt)
      .Key("backoff_s")
      .Fixed(d.backoff_s, 1);
  w.EndObject();
  return w.Line();
}

Result<Decision> DecisionFromJson(std::string_view json, const std::string& name, int attempt) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  Decision d;
  int64_t about = 0;
  EK_RETURN_IF_ERROR(f.Int("attempt", 1, kIntMax, &about));
  if (about != attempt)
    return f.Err("attempt", fmt::format("{}, but the file is attempt {}'s", about, attempt));
  std::string action;
  EK_RETURN_IF_ERROR(f.Str("action", &action));
  if (action == "done") {
    d.action = Action::kDone;
  } else if (action == "restart") {
    d.action = Action::kRestart;
  } else if (action == "stop") {
    d.action = Action::kStop;
  } else {
    return f.Err("action", fmt::format("{} is not done, restart or stop", JsonString(action)));
  }
  EK_RETURN_IF_ERROR(f.IntIn("exit_code", 0, 255, &d.exit_code));
  EK_RETURN_IF_ERROR(f.Str("reason", &d.reason));
  EK_RETURN_IF_ERROR(f.IntIn("next_attempt", 0, kIntMax, &d.next_attempt));
  EK_RETURN_IF_ERROR(f.Num("backoff_s", &d.backoff_s));
  if (d.backoff_s < 0) return f.Err("backoff_s", fmt::format("{} is negative", d.backoff_s));
  return d;
}

std::string ResumeChoiceToJson(int attempt, const ResumeChoice& c) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject()
      .Key("attempt")
      .Int(attempt)
      .Key("resume_from")
      .Str(c.resume_from)
      .Key("step")
      .Int(c.step);
  w.Key("manifest_xxh3").Str(c.manifest_xxh3).Key("where").Str(c.where);
  w.Key("resume_level");
  if (c.resume_level.empty()) {
    w.Null();
  } else {
    w.Str(c.resume_level);
  }
  w.EndObject();
  return w.Line();
}

Result<ResumeChoice> ResumeChoiceFromJson(std::string_view json, const std::string& name,
                                          int attempt) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  ResumeChoice c;
  int64_t about = 0;
  EK_RETURN_IF_ERROR(f.Int("attempt", 1, kIntMax, &about));
  if (about != attempt)
    return f.Err("attempt", fmt::format("{}, but the file is attempt {}'s", about, attempt));
  EK_RETURN_IF_ERROR(f.Str("resume_from", &c.resume_from));
  EK_RETURN_IF_ERROR(f.Int("step", -1, kI64Max, &c.step));
  EK_RETURN_IF_ERROR(f.Str("manifest_xxh3", &c.manifest_xxh3));
  EK_RETURN_IF_ERROR(f.Str("where", &c.where));
  const bool none = c.resume_from == "none";
  if (c.resume_from.empty())
    return f.Err("resume_from", "empty (a checkpoint directory or \"none\")");
  if (none != (c.step < 0)) {
    return f.Err("step", none ? fmt::format("{} with resume_from \"none\"", c.step)
                              : fmt::format("{} for the checkpoint {}", c.step, c.resume_from));
  }
  const bool hex16 = c.manifest_xxh3.size() == 16 &&
                     c.manifest_xxh3.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (none ? !c.manifest_xxh3.empty() : !hex16) {
    return f.Err("manifest_xxh3",
                 none ? "set with resume_from \"none\""
                      : fmt::format("{} is not 16 hex digits", JsonString(c.manifest_xxh3)));
  }
  if (f.AbsentOrNull("resume_level")) {
    if (!f.Has("resume_level")) return f.Err("resume_level", "missing");
    if (!none)
      return f.Err("resume_level", fmt::format("null for the checkpoint {}", c.resume_from));
  } else {
    EK_RETURN_IF_ERROR(f.Str("resume_level", &c.resume_level));
    if (none) return f.Err("resume_level", "set with resume_from \"none\"");
    if (!ckpt::ParseResumeLevel(c.resume_level)) {
      return f.Err("resume_level", fmt::format("{} (full, weights)", JsonString(c.resume_level)));
    }
  }
  return c;
}

std::string GateVerdictToJson(const GateVerdict& v) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("overall").Str(gate::VerdictName(v.overall)).Key("accepted").Bool(v.accepted);
  w.Key("first_attempt").Int(v.first_attempt).Key("reasons").Str(v.reasons).Key("text").Str(v.text);
  w.Key("parts").BeginObject();
  for (const auto& [n, nonce] : v.parts) w.Key(std::to_string(n)).Str(nonce);
  w.EndObject().EndObject();
  return w.Line();
}

Result<GateVerdict> GateVerdictFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  GateVerdict v;
  std::string overall;
  EK_RETURN_IF_ERROR(f.Str("overall", &overall));
  if (overall == "PASS") {
    v.overall = gate::Verdict::kPass;
  } else if (overall == "WARN") {
    v.overall = gate::Verdict::kWarn;
  } else if (overall == "FAIL") {
    v.overall = gate::Verdict::kFail;
  } else {
    return f.Err("overall", fmt::format("{} is not PASS, WARN or FAIL", JsonString(overall)));
  }
  EK_RETURN_IF_ERROR(f.Bool("accepted", &v.accepted));
  EK_RETURN_IF_ERROR(f.IntIn("first_attempt", 1, kIntMax, &v.first_attempt));
  EK_RETURN_IF_ERROR(f.OptStr("reasons", &v.reasons));
  EK_RETURN_IF_ERROR(f.OptStr("text", &v.text));
  JsonFields parts = f;
  EK_RETURN_IF_ERROR(f.Object("parts", &parts));
  for (std::string_view key : parts.Keys()) {
    auto node = ParseIntIn(key, 0, kIntMax);
    if (!node) return parts.Err(key, "the key is not a node number");
    std::string nonce;
    EK_RETURN_IF_ERROR(parts.Str(key, &nonce));
    v.parts[static_cast<int>(*node)] = std::move(nonce);
  }
  return v;
}

Result<std::string> GatePartNonce(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  std::string nonce;
  EK_RETURN_IF_ERROR(f.Str("launch_nonce", &nonce));
  return nonce;
}

Result<LaunchSummary> LaunchSummaryFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  LaunchSummary s;
  EK_RETURN_IF_ERROR(f.Str("outcome", &s.outcome));
  EK_RETURN_IF_ERROR(f.Int("steps", -1, kI64Max, &s.steps));
  EK_RETURN_IF_ERROR(f.Int("planned_steps", -1, kI64Max, &s.planned_steps));
  EK_RETURN_IF_ERROR(f.U64("tokens", &s.tokens));
  EK_RETURN_IF_ERROR(f.Num("tokens_per_s", &s.tokens_per_s));
  EK_RETURN_IF_ERROR(f.Int("attempts", 0, kI64Max, &s.attempts));
  EK_RETURN_IF_ERROR(f.Num("gpu_hours_used", &s.gpu_hours_used));
  EK_RETURN_IF_ERROR(f.Num("gpu_hours_lost", &s.gpu_hours_lost));
  EK_RETURN_IF_ERROR(f.Int("evenfix_dropped_blocks", -1, kI64Max, &s.evenfix_dropped_blocks));
  EK_RETURN_IF_ERROR(f.Str("final_checkpoint", &s.final_checkpoint));
  if (f.Has("goodput")) {
    heartbeat::GoodputAccount g;
    EK_RETURN_IF_ERROR(heartbeat::GoodputFromFields(f, "goodput", &g));
    s.goodput = g;
  }
  return s;
}

}  // namespace ek::launch
