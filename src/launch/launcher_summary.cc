// summary.json: every attempt of the session, its decision and the totals
// (docs/launch.md).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/json_out.h"
#include "core/version.h"
#include "heartbeat/goodput_account.h"
#include "launch/launcher_internal.h"

namespace ek::launch::detail {

namespace {

// {"ranks": [...], "step": S, "summary": "..."}, after any members the caller wrote.
void PutHang(const Hang& h, JsonWriter* w) {
  w->Key("ranks").BeginArray();
  for (int r : h.ranks) w->Int(r);
  w->EndArray().Key("step").Int(h.step).Key("summary").Str(h.line);
}

}  // namespace

std::string HangToJson(const Hang& h) {
  if (h.ranks.empty()) return "null";
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject();
  PutHang(h, &w);
  w.EndObject();
  return w.str();
}

std::string CausesToJson(const std::vector<RankCause>& causes) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginArray();
  for (const auto& c : causes) w.Raw(RankCauseToJson(c));
  w.EndArray();
  return w.str();
}

std::string AttemptToJson(const AttemptSummary& a) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject()
      .Key("attempt")
      .Int(a.attempt)
      .Key("start")
      .Fixed(a.start, 3)
      .Key("end")
      .Fixed(a.end, 3);
  w.Key("seconds").Fixed(a.end - a.start, 1).Key("outcome").Str(OutcomeName(a.outcome));
  w.Key("step_reached").Int(a.step_reached).Key("checkpoint_before").Int(a.checkpoint_before);
  w.Key("checkpoint_after").Int(a.checkpoint_after);
  w.Key("resume_level");
  if (a.resume_level.empty()) {
    w.Null();
  } else {
    w.Str(a.resume_level);
  }
  w.Key("flight_recorder")
      .BeginObject()
      .Key("verdict")
      .Str(a.fr_verdict)
      .Key("conclusive")
      .Bool(a.fr_conclusive);
  w.EndObject()
      .Key("gpu_hours")
      .Fixed(a.gpu_hours, 4)
      .Key("gpu_hours_lost")
      .Fixed(a.gpu_hours_lost, 4);
  w.Key("decision")
      .Raw(DecisionToJson(a.attempt, a.decision))
      .Key("causes")
      .Raw(CausesToJson(a.causes));
  if (a.goodput) {
    w.Key("goodput");
    heartbeat::PutGoodput(*a.goodput, &w);
  }
  w.Key("hang").Raw(HangToJson(a.hang)).Key("nodes").BeginArray();
  for (const auto& n : a.nodes) w.Raw(NodeRecordToJson(n));
  w.EndArray().EndObject();
  return w.str();
}

// `json` (an object) with "earlier_launch" and "inferred" first: how summary.json lists an attempt.
std::string Flagged(const std::string& json, bool earlier, bool inferred) {
  std::string o = json;
  if (!o.empty() && o.front() == '{') {
    o.insert(1, fmt::format("\"earlier_launch\": {}, \"inferred\": {}, ",
                            earlier ? "true" : "false", inferred ? "true" : "false"));
  }
  return o;
}

std::string Launcher::Summary(int exit_code, const std::string& outcome) const {
  std::vector<std::string> warnings;
  Checkpoint final = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
  double used = 0, lost = 0, train_s = 0;
  size_t inferred = 0;
  for (const auto& e :
       earlier_) {  // earlier launchers' attempts count in the totals, not in tokens/s
    used += e.gpu_hours;
    lost += e.gpu_hours_lost;
    inferred += e.inferred;
  }
  for (const auto& a : attempts_) {
    used += a.gpu_hours;
    lost += a.gpu_hours_lost;
    train_s += std::max(0.0, a.end - a.start);
  }
  int64_t first_ckpt = attempts_.empty() ? -1 : attempts_.front().checkpoint_before;
  double tokens_per_step =
      static_cast<double>(run_.world()) * run_.micro_batch * run_.grad_accum * run_.seq_len;
  double trained_tokens = final.step > first_ckpt
                              ? (final.step - std::max<int64_t>(first_ckpt, 0)) * tokens_per_step
                              : 0;
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("run").Str(run_.name);
  w.Key("run_file")
      .BeginObject()
      .Key("path")
      .Str(run_.path)
      .Key("xxh3")
      .Str(fmt::format("{:016x}", run_.xxh3));
  w.EndObject()
      .Key("run_id")
      .Str(cluster_.run_id)
      .Key("nodes")
      .Int(run_.nodes)
      .Key("world")
      .Int(run_.world());
  w.Key("outcome").Str(outcome).Key("exit_code").Int(exit_code).Key("steps").Int(final.step);
  w.Key("planned_steps")
      .Int(has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1)
      .Key("tokens")
      .Uint(final.tokens);
  w.Key("tokens_per_s").Fixed(train_s > 0 ? trained_tokens / train_s : 0.0, 1);
  w.Key("final_checkpoint").Str(final.final ? final.path : "");
  w.Key("attempts")
      .Uint(earlier_.size() + attempts_.size())
      .Key("attempts_this_launch")
      .Uint(attempts_.size());
  w.Key("attempts_inferred")
      .Uint(inferred)
      .Key("gpu_hours_used")
      .Fixed(used, 4)
      .Key("gpu_hours_lost")
      .Fixed(lost, 4);
  // The split of this launch's wall time (launcher_goodput.cc), from its start to now.
  w.Key("goodput");
  heartbeat::PutGoodput(LaunchGoodput(Now(), nullptr), &w);
  w.Key("evenfix_dropped_blocks").Int(has_plan_ ? static_cast<int64_t>(plan_.dropped_blocks) : -1);
  w.Key("launch_dir").Str(paths_.session).Key("evenkeel_version").Str(kVersion);
  w.Key("attempt_records").BeginArray();
  for (const auto& e : earlier_) w.Raw(e.json);  // kept as the earlier launcher wrote it
  for (const auto& a : attempts_) w.Raw(Flagged(AttemptToJson(a), false, false));
  // Every failed rank of every attempt, for the 3 a.m. reader: what broke, where.
  w.EndArray().Key("causes").BeginArray();
  auto cause = [&](int attempt, const RankCause& c) {
    w.BeginObject()
        .Key("attempt")
        .Int(attempt)
        .Key("rank")
        .Int(c.rank)
        .Key("cause")
        .Str(c.cause)
        .EndObject();
  };
  for (const auto& e : earlier_) {
    for (const auto& c : e.causes) cause(e.attempt, c);
  }
  for (const auto& a : attempts_) {
    for (const auto& c : a.causes) cause(a.attempt, c);
  }
  // The ranks that stopped progressing, attempt by attempt (judge.h FindHang).
  w.EndArray().Key("hangs").BeginArray();
  for (const auto& a : attempts_) {
    if (a.hang.ranks.empty()) continue;
    w.BeginObject().Key("attempt").Int(a.attempt);
    PutHang(a.hang, &w);
    w.EndObject();
  }
  w.EndArray().EndObject();
  return w.Line();
}

}  // namespace ek::launch::detail
