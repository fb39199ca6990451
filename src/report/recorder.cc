#include "report/recorder.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/clock.h"
#include "core/json_out.h"
#include "core/version.h"

namespace ek::report {

namespace {

constexpr uint8_t kMissing = 255;

// Severity for the band: the most severe verdict in a column wins.
int Severity(uint8_t v) {
  switch (static_cast<triage::Verdict>(v)) {
    case triage::Verdict::kDeadlockSuspect:
      return 7;
    case triage::Verdict::kStarvation:
      return 6;
    case triage::Verdict::kCommunication:
      return 5;
    case triage::Verdict::kUnknown:
      return 4;
    case triage::Verdict::kCheckpoint:
      return 3;
    case triage::Verdict::kIdle:
      return 2;
    case triage::Verdict::kHealthy:
      return 1;
  }
  return 0;
}

std::string Base64(const std::vector<uint8_t>& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (in[i] << 16) | (in[i + 1] << 8) | in[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = in[i] << 16;
    if (i + 1 < in.size()) v |= in[i + 1] << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{}", v);
}

std::string Time(double t) { return fmt::format("{:.3f}", t); }

std::string IntArray(const std::vector<int>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += fmt::format("{}{}", i ? "," : "", v[i]);
  return o + "]";
}

std::string StrArray(const std::vector<std::string>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o += ",";
    AppendJsonString(&o, v[i]);
  }
  return o + "]";
}

std::string IncidentJson(const Incident& inc) {
  return fmt::format(
      "{{\"source\":{},\"kind\":{},\"summary\":{},\"ranks\":{},\"hosts\":{},\"since\":{},\"until\":"
      "{},"
      "\"evidence\":{},\"gpu_hours\":{}}}",
      JsonString(inc.source), JsonString(inc.kind), JsonString(inc.summary), IntArray(inc.ranks),
      StrArray(inc.hosts), Time(inc.since), inc.until ? Time(*inc.until) : "null",
      JsonString(inc.evidence), Num(inc.gpu_hours));
}

}  // namespace

const std::vector<std::string>& VerdictNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (auto v :
         {triage::Verdict::kHealthy, triage::Verdict::kCheckpoint,
          triage::Verdict::kDeadlockSuspect, triage::Verdict::kStarvation,
          triage::Verdict::kCommunication, triage::Verdict::kIdle, triage::Verdict::kUnknown}) {
      n.emplace_back(triage::VerdictName(v));
    }
    return n;
  }();
  return kNames;
}

std::string VerdictColor(const std::string& name) {
  // Okabe-Ito: distinguishable under the common color-vision deficiencies.
  if (name == "HEALTHY") return "#009E73";
  if (name == "CHECKPOINT") return "#56B4E9";
  if (name == "DEADLOCK_SUSPECT") return "#D55E00";
  if (name == "STARVATION") return "#E69F00";
  if (name == "COMMUNICATION") return "#CC79A7";
  if (name == "IDLE") return "#999999";
  return "#000000";
}

Recorder::Recorder(std::vector<RankInfo> ranks, double power_max_w)
    : ranks_(std::move(ranks)), power_max_w_(power_max_w), by_rank_(ranks_.size()) {}

void Recorder::AddReading(int rank, double time, std::optional<double> util_pct,
                          std::optional<double> power_w) {
  if (rank < 0 || rank >= static_cast<int>(by_rank_.size()) || !std::isfinite(time)) return;
  if (!has_base_) {
    base_ = time;
    first_ = last_ = time;
    has_base_ = true;
  }
  first_ = std::min(first_, time);
  last_ = std::max(last_, time);
  Reading r;
  r.dt = static_cast<float>(time - base_);
  r.util = util_pct && std::isfinite(*util_pct)
               ? static_cast<uint8_t>(std::clamp(std::lround(*util_pct), 0L, 100L))
               : kMissing;
  r.power =
      power_w && std::isfinite(*power_w)
          ? static_cast<uint8_t>(std::clamp(std::lround(*power_w / power_max_w_ * 254), 0L, 254L))
          : kMissing;
  by_rank_[rank].push_back(r);
  readings_++;
}

void Recorder::AddAssessment(const triage::Assessment& a) {
  Window w;
  w.time = a.time;
  w.verdict = static_cast<uint8_t>(a.verdict);
  // A verdict about every rank (HEALTHY, IDLE, ...) keeps no list: said as "all" (empty).
  if (a.ranks.size() < ranks_.size()) w.ranks = a.ranks;
  // One reason per run of a verdict, kept on the run's first window, is what the page shows
  // and what the run's incident cites as evidence; repeating it 21,600 times is not.
  if (windows_.empty() || windows_.back().verdict != w.verdict) {
    run_start_ = windows_.size();
    w.reason = a.reason;
  } else if (windows_[run_start_].reason.empty()) {
    windows_[run_start_].reason = a.reason;
  }
  windows_.push_back(std::move(w));
}

void Recorder::AddPoint(Series series, double time, double value) {
  if (std::isfinite(time) && std::isfinite(value))
    series_[static_cast<int>(series)].emplace_back(time, value);
}

std::vector<int> Recorder::RanksOf(size_t first, size_t last) const {
  // Windows whose verdict is about every rank keep no list: then the run is about all.
  std::vector<bool> in(ranks_.size(), false);
  size_t count = 0;
  for (size_t k = first; k <= last; ++k) {
    if (windows_[k].ranks.empty()) return {};
    for (int r : windows_[k].ranks) {
      if (r >= 0 && r < static_cast<int>(in.size()) && !in[r]) in[r] = true, ++count;
    }
  }
  std::vector<int> out;
  if (count == ranks_.size()) return out;
  for (size_t r = 0; r < in.size(); ++r) {
    if (in[r]) out.push_back(static_cast<int>(r));
  }
  return out;
}

std::vector<Incident> Recorder::TriageIncidents() const {
  std::vector<Incident> out;
  const int world = static_cast<int>(ranks_.size());
  size_t i = 0;
  while (i < windows_.size()) {
    size_t j = i;
    while (j + 1 < windows_.size() && windows_[j + 1].verdict == windows_[i].verdict) ++j;
    auto v = static_cast<triage::Verdict>(windows_[i].verdict);
    bool incident = v == triage::Verdict::kDeadlockSuspect || v == triage::Verdict::kStarvation ||
                    v == triage::Verdict::kUnknown;
    if (incident && j > i) {
      Incident inc;
      inc.source = "triage";
      std::string name(triage::VerdictName(v));
      inc.kind = v == triage::Verdict::kDeadlockSuspect ? "deadlock"
                 : v == triage::Verdict::kStarvation    ? "starvation"
                                                        : "unknown";
      inc.ranks = RanksOf(i, j);
      std::set<std::string> hosts;
      for (int r : inc.ranks) {
        if (r >= 0 && r < world) hosts.insert(ranks_[r].host);
      }
      inc.hosts.assign(hosts.begin(), hosts.end());
      inc.since = windows_[i].time;
      if (j + 1 < windows_.size()) inc.until = windows_[j + 1].time;
      double end = inc.until.value_or(windows_[j].time);
      inc.summary = fmt::format(
          "{} for {:.0f} s{}", name, end - inc.since,
          inc.ranks.empty()
              ? ""
              : fmt::format(" (rank(s) {})", CompactRanges({inc.ranks.begin(), inc.ranks.end()})));
      inc.evidence = windows_[i].reason;
      inc.gpu_hours = world * (end - inc.since) / 3600;
      out.push_back(std::move(inc));
    }
    i = j + 1;
  }
  return out;
}

std::string Recorder::ToJson(const ModelOptions& o) const {
  const int world = static_cast<int>(ranks_.size());
  std::string j = "{\"format_version\":1,\"generated\":";
  AppendJsonString(&j, UtcNowIso8601());
  j += ",\"evenkeel_version\":";
  AppendJsonString(&j, kVersion);
  j += fmt::format(",\"live\":{},\"poll_s\":{}", o.live ? "true" : "false", Num(o.poll_s));
  j += fmt::format(
      ",\"run\":{{\"name\":{},\"run_file\":{},\"xxh3\":{},\"world\":{},\"nodes\":{},\"gpus_per_"
      "node\":{},"
      "\"hosts\":{}}}",
      JsonString(run.name), JsonString(run.run_file), JsonString(run.xxh3), run.world, run.nodes,
      run.gpus_per_node, StrArray(run.hosts));
  j += ",\"notes\":" + StrArray(notes);
  // Summary: only what is known.
  j += ",\"summary\":{";
  bool first = true;
  auto field = [&](const char* k, const std::string& v) {
    j += fmt::format("{}\"{}\":{}", first ? "" : ",", k, v);
    first = false;
  };
  if (summary.outcome) field("outcome", JsonString(*summary.outcome));
  if (summary.steps) field("steps", Num(*summary.steps));
  if (summary.planned_steps) field("planned_steps", Num(*summary.planned_steps));
  if (summary.tokens) field("tokens", Num(*summary.tokens));
  if (summary.tokens_per_s) field("tokens_per_s", Num(*summary.tokens_per_s));
  if (summary.attempts) field("attempts", Num(*summary.attempts));
  if (summary.gpu_hours_used) field("gpu_hours_used", Num(*summary.gpu_hours_used));
  if (summary.gpu_hours_lost) field("gpu_hours_lost", Num(*summary.gpu_hours_lost));
  if (summary.evenfix_dropped_blocks)
    field("evenfix_dropped_blocks", Num(*summary.evenfix_dropped_blocks));
  if (summary.final_checkpoint) field("final_checkpoint", JsonString(*summary.final_checkpoint));
  j += "}";

  // The time span: readings, series, markers.
  double t_start = has_base_ ? first_ : 0, t_end = has_base_ ? last_ : 0;
  bool any = has_base_;
  auto widen = [&](double t) {
    if (!std::isfinite(t) || t <= 0) return;
    if (!any) t_start = t_end = t, any = true;
    t_start = std::min(t_start, t);
    t_end = std::max(t_end, t);
  };
  for (const auto& s : series_)
    for (const auto& [t, v] : s) widen(t);
  for (const auto& c : checkpoints) widen(c.time);
  for (const auto& a : attempts) widen(a.start), widen(a.end);
  j += any ? fmt::format(",\"time\":{{\"start\":{},\"end\":{}}}", Time(t_start),
                         Time(t_end + o.interval_s))
           : ",\"time\":null";

  j += ",\"ranks\":[";
  for (int r = 0; r < world; ++r) {
    j += fmt::format("{}{{\"rank\":{},\"host\":{},\"gpu\":{}}}", r ? "," : "", ranks_[r].rank,
                     JsonString(ranks_[r].host), ranks_[r].gpu);
  }
  j += "]";

  // Heatmap levels within the byte budget.
  std::string levels, bands;
  if (has_base_ && world > 0) {
    // The finest grid is the sampling interval itself from the first reading (two hosts'
    // samplers a fraction of a second apart share a column); coarser ones divide the same span.
    const int64_t ticks =
        static_cast<int64_t>(std::floor((last_ - first_) / o.interval_s + 1e-9)) + 1;
    const double span = ticks * o.interval_s;
    std::vector<int64_t> cols_list;
    int64_t cols = std::min<int64_t>(o.max_cols, ticks);
    size_t used = 0;
    while (true) {
      size_t bytes = static_cast<size_t>(world) * cols * 4 + cols;
      if (!cols_list.empty() && used + bytes > o.byte_budget) break;
      cols_list.push_back(cols);
      used += bytes;
      if (cols >= ticks) break;
      cols = std::min<int64_t>(cols * 4, ticks);
    }
    const double off = first_ - base_;
    for (int64_t c : cols_list) {
      const double dt = span / c;
      const size_t n = static_cast<size_t>(world) * c;
      std::vector<uint8_t> umin(n, kMissing), umax(n, kMissing), pmin(n, kMissing),
          pmax(n, kMissing);
      for (int r = 0; r < world; ++r) {
        const size_t row = static_cast<size_t>(r) * c;
        for (const Reading& x : by_rank_[r]) {
          int64_t col = static_cast<int64_t>((x.dt - off) / dt);
          col = std::clamp<int64_t>(col, 0, c - 1);
          size_t k = row + col;
          if (x.util != kMissing) {
            umin[k] = umin[k] == kMissing ? x.util : std::min(umin[k], x.util);
            umax[k] = umax[k] == kMissing ? x.util : std::max(umax[k], x.util);
          }
          if (x.power != kMissing) {
            pmin[k] = pmin[k] == kMissing ? x.power : std::min(pmin[k], x.power);
            pmax[k] = pmax[k] == kMissing ? x.power : std::max(pmax[k], x.power);
          }
        }
      }
      std::vector<uint8_t> band(c, kMissing);
      for (const Window& w : windows_) {
        // A window's verdict is about the readings up to its tick: the column holding the tick.
        int64_t col = static_cast<int64_t>(std::floor((w.time - first_) / dt));
        col = std::clamp<int64_t>(col, 0, c - 1);
        if (band[col] == kMissing || Severity(w.verdict) > Severity(band[col]))
          band[col] = w.verdict;
      }
      levels += fmt::format(
          "{}{{\"cols\":{},\"t0\":{},\"dt\":{},\"util_min\":\"{}\",\"util_max\":\"{}\",\"power_"
          "min\":\"{}\","
          "\"power_max\":\"{}\"}}",
          levels.empty() ? "" : ",", c, Time(first_), Num(dt), Base64(umin), Base64(umax),
          Base64(pmin), Base64(pmax));
      bands += fmt::format("{}{{\"cols\":{},\"t0\":{},\"dt\":{},\"values\":\"{}\"}}",
                           bands.empty() ? "" : ",", c, Time(first_), Num(dt), Base64(band));
    }
    j += fmt::format(
        ",\"heatmap\":{{\"scale\":{{\"util_max\":100,\"power_max_w\":{}}},\"missing\":255,"
        "\"levels\":[{}]}}",
        Num(power_max_w_), levels);
  } else {
    j += ",\"heatmap\":null";
  }

  // Verdicts: segments and the band.
  j += ",\"verdicts\":{\"names\":" + StrArray(VerdictNames()) + ",\"colors\":{";
  for (size_t i = 0; i < VerdictNames().size(); ++i) {
    j += fmt::format("{}{}:{}", i ? "," : "", JsonString(VerdictNames()[i]),
                     JsonString(VerdictColor(VerdictNames()[i])));
  }
  j += "},\"segments\":[";
  for (size_t i = 0, n = 0; i < windows_.size(); ++n) {
    size_t k = i;
    while (k + 1 < windows_.size() && windows_[k + 1].verdict == windows_[i].verdict) ++k;
    std::vector<int> rv = RanksOf(i, k);
    j += fmt::format("{}{{\"t0\":{},\"t1\":{},\"verdict\":{},\"ranks\":{},\"reason\":{}}}",
                     n ? "," : "", Time(windows_[i].time), Time(windows_[k].time + o.interval_s),
                     JsonString(VerdictNames()[windows_[i].verdict]), IntArray(rv),
                     JsonString(windows_[i].reason));
    i = k + 1;
  }
  j += "],\"band\":[" + bands + "]}";

  // Series.
  static const char* kSeries[] = {"tokens_per_s", "step", "loss"};
  j += ",\"series\":{";
  for (int s = 0; s < 3; ++s) {
    j += fmt::format("{}\"{}\":[", s ? "," : "", kSeries[s]);
    for (size_t i = 0; i < series_[s].size(); ++i) {
      j += fmt::format("{}[{},{}]", i ? "," : "", Time(series_[s][i].first),
                       Num(series_[s][i].second));
    }
    j += "]";
  }
  j += "}";

  j += ",\"checkpoints\":[";
  for (size_t i = 0; i < checkpoints.size(); ++i) {
    const auto& c = checkpoints[i];
    j += fmt::format("{}{{\"step\":{},\"time\":{},\"path\":{},\"ok\":{},\"verdict\":{}}}",
                     i ? "," : "", c.step, Time(c.time), JsonString(c.path),
                     c.ok ? "true" : "false", JsonString(c.verdict));
  }
  j += "],\"attempts\":[";
  for (size_t i = 0; i < attempts.size(); ++i) {
    const auto& a = attempts[i];
    j += fmt::format(
        "{}{{\"attempt\":{},\"start\":{},\"end\":{},\"outcome\":{},\"decision\":{},\"exit_code\":{}"
        ","
        "\"reason\":{},\"flight_recorder\":{}",
        i ? "," : "", a.attempt, Time(a.start), Time(a.end), JsonString(a.outcome),
        JsonString(a.decision), a.exit_code >= 0 ? std::to_string(a.exit_code) : "null",
        JsonString(a.reason), JsonString(a.flight_recorder));
    // Absent when the launcher recorded none (an older one); [] when no rank failed.
    if (a.causes_recorded) {
      j += ",\"causes\":[";
      for (size_t k = 0; k < a.causes.size(); ++k) {
        j += fmt::format("{}{{\"rank\":{},\"cause\":{}}}", k ? "," : "", a.causes[k].rank,
                         JsonString(a.causes[k].cause));
      }
      j += "]";
    }
    j += "}";
  }
  j += "],\"incidents\":[";
  std::vector<Incident> all = incidents;
  for (auto& inc : TriageIncidents()) all.push_back(std::move(inc));
  std::stable_sort(all.begin(), all.end(),
                   [](const Incident& a, const Incident& b) { return a.since < b.since; });
  for (size_t i = 0; i < all.size(); ++i) j += (i ? "," : "") + IncidentJson(all[i]);
  j += "]}";
  return j;
}

}  // namespace ek::report
