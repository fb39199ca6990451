#include "launch/records.h"

#include <limits>

#include <fmt/core.h>
#include <simdjson.h>

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
    case Action::kDone: return "done";
    case Action::kRestart: return "restart";
    case Action::kStop: return "stop";
  }
  return "?";
}

std::string RankCauseToJson(const RankCause& c) {
  return fmt::format("{{\"rank\": {}, \"cause\": {}}}", c.rank, JsonString(c.cause));
}

std::string RankProgressToJson(const RankProgress& p) {
  return fmt::format("{{\"rank\": {}, \"step\": {}, \"phase\": {}, \"phase_step\": {}, \"time\": {:.3f}, \"pid\": {}}}",
                     p.rank, p.step, JsonString(p.phase), p.phase_step, p.time, p.pid);
}

std::string NodeRecordToJson(const NodeRecord& n) {
  std::string o = fmt::format("{{\"node\": {}, \"host\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"torchrun\": "
                              "{{\"exit_code\": {}, \"signal\": {}}}, \"cancelled\": {}, \"step_reached\": {}, \"error\": {}, "
                              "\"ranks\": [",
                              n.node, JsonString(n.host), n.start, n.end, n.torchrun_code, n.torchrun_signal,
                              n.cancelled ? "true" : "false", n.step_reached, JsonString(n.error));
  for (size_t i = 0; i < n.ranks.size(); ++i) {
    std::string r = RankRecordToJson(n.ranks[i]);
    while (!r.empty() && r.back() == '\n') r.pop_back();
    o += (i ? ", " : "") + r;
  }
  o += "], \"causes\": [";
  for (size_t i = 0; i < n.causes.size(); ++i) o += (i ? ", " : "") + RankCauseToJson(n.causes[i]);
  o += "], \"progress\": [";
  for (size_t i = 0; i < n.progress.size(); ++i) o += (i ? ", " : "") + RankProgressToJson(n.progress[i]);
  o += "]}\n";
  return o;
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
  return fmt::format("{{\"attempt\": {}, \"action\": {}, \"exit_code\": {}, \"reason\": {}, \"next_attempt\": {}, "
                     "\"backoff_s\": {:.1f}}}\n",
                     attempt, JsonString(ActionName(d.action)), d.exit_code, JsonString(d.reason), d.next_attempt, d.backoff_s);
}

Result<Decision> DecisionFromJson(std::string_view json, const std::string& name, int attempt) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  Decision d;
  int64_t about = 0;
  EK_RETURN_IF_ERROR(f.Int("attempt", 1, kIntMax, &about));
  if (about != attempt) return f.Err("attempt", fmt::format("{}, but the file is attempt {}'s", about, attempt));
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
  return fmt::format("{{\"attempt\": {}, \"resume_from\": {}, \"step\": {}, \"manifest_xxh3\": {}, \"where\": {}}}\n",
                     attempt, JsonString(c.resume_from), c.step, JsonString(c.manifest_xxh3), JsonString(c.where));
}

Result<ResumeChoice> ResumeChoiceFromJson(std::string_view json, const std::string& name, int attempt) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  ResumeChoice c;
  int64_t about = 0;
  EK_RETURN_IF_ERROR(f.Int("attempt", 1, kIntMax, &about));
  if (about != attempt) return f.Err("attempt", fmt::format("{}, but the file is attempt {}'s", about, attempt));
  EK_RETURN_IF_ERROR(f.Str("resume_from", &c.resume_from));
  EK_RETURN_IF_ERROR(f.Int("step", -1, kI64Max, &c.step));
  EK_RETURN_IF_ERROR(f.Str("manifest_xxh3", &c.manifest_xxh3));
  EK_RETURN_IF_ERROR(f.Str("where", &c.where));
  const bool none = c.resume_from == "none";
  if (c.resume_from.empty()) return f.Err("resume_from", "empty (a checkpoint directory or \"none\")");
  if (none != (c.step < 0)) {
    return f.Err("step", none ? fmt::format("{} with resume_from \"none\"", c.step)
                              : fmt::format("{} for the checkpoint {}", c.step, c.resume_from));
  }
  const bool hex16 = c.manifest_xxh3.size() == 16 &&
                     c.manifest_xxh3.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (none ? !c.manifest_xxh3.empty() : !hex16) {
    return f.Err("manifest_xxh3", none ? "set with resume_from \"none\""
                                       : fmt::format("{} is not 16 hex digits", JsonString(c.manifest_xxh3)));
  }
  return c;
}

std::string GateVerdictToJson(const GateVerdict& v) {
  std::string parts;
  for (const auto& [n, nonce] : v.parts) parts += fmt::format("{}\"{}\": {}", parts.empty() ? "" : ", ", n, JsonString(nonce));
  return fmt::format(
      "{{\"overall\": {}, \"accepted\": {}, \"first_attempt\": {}, \"reasons\": {}, \"text\": {}, \"parts\": {{{}}}}}\n",
      JsonString(gate::VerdictName(v.overall)), v.accepted ? "true" : "false", v.first_attempt, JsonString(v.reasons), JsonString(v.text),
      parts);
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
  return s;
}

}  // namespace ek::launch
