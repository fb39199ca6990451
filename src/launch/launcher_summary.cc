// summary.json: every attempt of the session, its decision and the totals
// (docs/launch.md).
#include "launch/launcher_internal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "core/clock.h"
#include "core/json_out.h"
#include "core/version.h"

namespace ek::launch::detail {

std::string HangToJson(const Hang& h) {
  if (h.ranks.empty()) return "null";
  return fmt::format("{{\"ranks\": [{}], \"step\": {}, \"summary\": {}}}", fmt::join(h.ranks, ", "), h.step,
                     JsonString(h.line));
}

std::string CausesToJson(const std::vector<RankCause>& causes) {
  std::string o = "[";
  for (size_t i = 0; i < causes.size(); ++i) o += (i ? ", " : "") + RankCauseToJson(causes[i]);
  return o + "]";
}

std::string AttemptToJson(const AttemptSummary& a) {
  std::string o = fmt::format(
      "{{\"attempt\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"seconds\": {:.1f}, \"outcome\": {}, "
      "\"step_reached\": {}, \"checkpoint_before\": {}, \"checkpoint_after\": {}, \"flight_recorder\": "
      "{{\"verdict\": {}, \"conclusive\": {}}}, \"gpu_hours\": {:.4f}, \"gpu_hours_lost\": {:.4f}, \"decision\": ",
      a.attempt, a.start, a.end, a.end - a.start, JsonString(OutcomeName(a.outcome)), a.step_reached, a.checkpoint_before,
      a.checkpoint_after, JsonString(a.fr_verdict), a.fr_conclusive ? "true" : "false", a.gpu_hours, a.gpu_hours_lost);
  std::string d = DecisionToJson(a.attempt, a.decision);
  while (!d.empty() && d.back() == '\n') d.pop_back();
  o += d + ", \"causes\": " + CausesToJson(a.causes) + ", \"hang\": " + HangToJson(a.hang) + ", \"nodes\": [";
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    std::string n = NodeRecordToJson(a.nodes[i]);
    while (!n.empty() && n.back() == '\n') n.pop_back();
    o += (i ? ", " : "") + n;
  }
  o += "]}";
  return o;
}

// `json` (an object) with "earlier_launch" and "inferred" first: how summary.json lists an attempt.
std::string Flagged(const std::string& json, bool earlier, bool inferred) {
  std::string o = json;
  if (!o.empty() && o.front() == '{') {
    o.insert(1, fmt::format("\"earlier_launch\": {}, \"inferred\": {}, ", earlier ? "true" : "false",
                            inferred ? "true" : "false"));
  }
  return o;
}

std::string Launcher::Summary(int exit_code, const std::string& outcome) const {
  std::vector<std::string> warnings;
  Checkpoint final = NewestCheckpoint(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure, &warnings);
  double used = 0, lost = 0, train_s = 0;
  size_t inferred = 0;
  for (const auto& e : earlier_) {  // earlier launchers' attempts count in the totals, not in tokens/s
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
  double tokens_per_step = static_cast<double>(run_.world()) * run_.micro_batch * run_.grad_accum * run_.seq_len;
  double trained_tokens = final.step > first_ckpt ? (final.step - std::max<int64_t>(first_ckpt, 0)) * tokens_per_step : 0;
  std::string o = fmt::format(
      "{{\"run\": {}, \"run_file\": {{\"path\": {}, \"xxh3\": \"{:016x}\"}}, \"run_id\": {}, \"nodes\": {}, \"world\": {}, "
      "\"outcome\": {}, \"exit_code\": {}, \"steps\": {}, \"planned_steps\": {}, \"tokens\": {}, \"tokens_per_s\": {:.1f}, "
      "\"final_checkpoint\": {}, \"attempts\": {}, \"attempts_this_launch\": {}, \"attempts_inferred\": {}, "
      "\"gpu_hours_used\": {:.4f}, \"gpu_hours_lost\": {:.4f}, "
      "\"evenfix_dropped_blocks\": {}, \"launch_dir\": {}, \"evenkeel_version\": {}, \"attempt_records\": [",
      JsonString(run_.name), JsonString(run_.path), run_.xxh3, JsonString(cluster_.run_id), run_.nodes, run_.world(),
      JsonString(outcome), exit_code, final.step, has_plan_ ? static_cast<int64_t>(plan_.total_steps) : -1, final.tokens,
      train_s > 0 ? trained_tokens / train_s : 0.0, JsonString(final.final ? final.path : ""),
      earlier_.size() + attempts_.size(), attempts_.size(), inferred, used, lost,
      has_plan_ ? static_cast<int64_t>(plan_.dropped_blocks) : -1, JsonString(paths_.session), JsonString(kVersion));
  bool listed = false;
  for (const auto& e : earlier_) {
    o += (listed ? ", " : "") + e.json;
    listed = true;
  }
  for (const auto& a : attempts_) {
    o += (listed ? ", " : "") + Flagged(AttemptToJson(a), false, false);
    listed = true;
  }
  // Every failed rank of every attempt, for the 3 a.m. reader: what broke, where.
  o += "], \"causes\": [";
  bool first = true;
  for (const auto& e : earlier_) {
    for (const auto& c : e.causes) {
      o += fmt::format("{}{{\"attempt\": {}, \"rank\": {}, \"cause\": {}}}", first ? "" : ", ", e.attempt, c.rank,
                       JsonString(c.cause));
      first = false;
    }
  }
  for (const auto& a : attempts_) {
    for (const auto& c : a.causes) {
      o += fmt::format("{}{{\"attempt\": {}, \"rank\": {}, \"cause\": {}}}", first ? "" : ", ", a.attempt, c.rank,
                       JsonString(c.cause));
      first = false;
    }
  }
  // The ranks that stopped progressing, attempt by attempt (judge.h FindHang).
  o += "], \"hangs\": [";
  first = true;
  for (const auto& a : attempts_) {
    if (a.hang.ranks.empty()) continue;
    o += fmt::format("{}{{\"attempt\": {}, \"ranks\": [{}], \"step\": {}, \"summary\": {}}}", first ? "" : ", ",
                     a.attempt, fmt::join(a.hang.ranks, ", "), a.hang.step, JsonString(a.hang.line));
    first = false;
  }
  o += "]}\n";
  return o;
}

}  // namespace ek::launch::detail
