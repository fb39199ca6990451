#include "heartbeat/heartbeat.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/file.h"
#include "core/json_fields.h"
#include "core/json_out.h"

namespace ek::heartbeat {

// Strict (docs/watch.md): v, rank, step and time are required; every other
// field may be absent (older trainers) but, present, must have its type. A
// mistyped field is an error naming the file and the field, never a default.
Result<Heartbeat> ParseHeartbeat(std::string_view text, std::string_view where) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text.data(), text.size()).get(root)) {
    return CorruptError(fmt::format("{}: not JSON (a truncated or foreign file)", where));
  }
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, std::string(where)));
  Heartbeat hb;
  int64_t v = 0;
  EK_RETURN_IF_ERROR(f.Int("v", &v));
  if (v != 1) return f.Err("v", fmt::format("unknown heartbeat version {}", v));
  EK_RETURN_IF_ERROR(f.IntIn("rank", 0, 1 << 24, &hb.rank));
  hb.local_rank = hb.rank;
  if (f.Has("local_rank")) EK_RETURN_IF_ERROR(f.IntIn("local_rank", 0, 1 << 24, &hb.local_rank));
  EK_RETURN_IF_ERROR(f.OptInt("pid", &hb.pid));
  EK_RETURN_IF_ERROR(f.OptStr("host", &hb.host));
  // Steps are bounded well inside int64 so that step + 1 and differences of
  // steps cannot overflow (fuzz_heartbeat: "step":9223372036854775807).
  constexpr int64_t kMaxStep = int64_t{1} << 62;
  EK_RETURN_IF_ERROR(f.IntIn("step", -1, kMaxStep, &hb.step));
  EK_RETURN_IF_ERROR(f.OptInt("tokens", &hb.tokens));
  EK_RETURN_IF_ERROR(f.Num("time", &hb.time));
  EK_RETURN_IF_ERROR(f.OptNum("step_time", &hb.step_time));
  EK_RETURN_IF_ERROR(f.OptNum("step_s", &hb.step_s));
  EK_RETURN_IF_ERROR(f.OptNum("tok_s", &hb.tok_s));
  EK_RETURN_IF_ERROR(f.OptStr("phase", &hb.phase));
  if (f.Has("phase_step")) EK_RETURN_IF_ERROR(f.IntIn("phase_step", -1, kMaxStep, &hb.phase_step));
  EK_RETURN_IF_ERROR(f.OptNum("phase_time", &hb.phase_time));
  if (f.Has("total_steps"))
    EK_RETURN_IF_ERROR(f.IntIn("total_steps", 0, kMaxStep, &hb.total_steps));
  // The goodput fields: optional, each a time or an amount that cannot be negative.
  for (auto [key, out] : {std::pair{"started", &hb.started},
                          {"train_start", &hb.train_start},
                          {"save_blocked_s", &hb.save_blocked_s}}) {
    EK_RETURN_IF_ERROR(f.OptNum(key, out));
    if (!(*out >= 0) || !std::isfinite(*out)) return f.Err(key, "not a finite number >= 0");
  }
  if (f.Has("saves")) EK_RETURN_IF_ERROR(f.IntIn("saves", 0, kMaxStep, &hb.saves));
  if (hb.step_time <= 0) hb.step_time = hb.time;
  return hb;
}

PhaseKind KindOfPhase(std::string_view phase) {
  if (phase == "train" || phase == "forward" || phase == "backward" || phase == "optimizer")
    return PhaseKind::kTraining;
  if (phase == "save_barrier") return PhaseKind::kBarrier;
  if (phase == "save" || phase == "checkpoint") return PhaseKind::kCheckpoint;
  if (phase == "done") return PhaseKind::kDone;
  return PhaseKind::kOther;
}

int64_t PositionOf(const Heartbeat& hb) {
  if (hb.phase_step >= 0) return hb.phase_step;
  return KindOfPhase(hb.phase) == PhaseKind::kTraining ? hb.step + 1 : hb.step;
}

std::string HeartbeatToJson(const Heartbeat& hb) {
  JsonWriter w;
  w.BeginObject().Key("v").Int(1).Key("rank").Int(hb.rank).Key("local_rank").Int(hb.local_rank);
  w.Key("pid").Int(hb.pid).Key("host").Str(hb.host).Key("step").Int(hb.step);
  w.Key("tokens").Int(hb.tokens).Key("time").Fixed(hb.time, 3);
  w.Key("step_time").Fixed(hb.step_time, 3).Key("step_s").Double(hb.step_s);
  w.Key("tok_s").Double(hb.tok_s).Key("phase").Str(hb.phase).Key("phase_step").Int(hb.phase_step);
  w.Key("phase_time").Fixed(hb.phase_time, 3).Key("total_steps").Int(hb.total_steps);
  w.Key("started").Fixed(hb.started, 3).Key("save_blocked_s").Double(hb.save_blocked_s);
  w.Key("saves").Int(hb.saves);
  if (hb.train_start > 0) w.Key("train_start").Fixed(hb.train_start, 3);
  return w.EndObject().str();
}

std::vector<Heartbeat> ReadHeartbeatDir(const std::string& dir, std::vector<std::string>* problems,
                                        Env* env) {
  std::vector<Heartbeat> out;
  auto listed = env->ListDir(dir);  // sorted
  if (!listed.ok()) return out;
  for (const std::string& n : *listed) {
    if (!n.starts_with("rank-") || !n.ends_with(".json")) continue;
    std::string path = dir + "/" + n;
    auto text = env->ReadFile(path);
    if (!text.ok()) {
      if (problems) problems->push_back(text.status().message());
      continue;
    }
    auto hb = ParseHeartbeat(*text, path);
    if (!hb.ok()) {
      if (problems) problems->push_back(hb.status().message());
      continue;
    }
    out.push_back(std::move(*hb));
  }
  std::sort(out.begin(), out.end(),
            [](const Heartbeat& a, const Heartbeat& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace ek::heartbeat
