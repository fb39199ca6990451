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

// The model's numbers in their shortest form; NaN and infinities as null.
JsonWriter& Num(JsonWriter& w, double v) { return std::isfinite(v) ? w.Double(v) : w.Null(); }

JsonWriter& Time(JsonWriter& w, double t) { return w.Fixed(t, 3); }

void IncidentJson(JsonWriter& w, const Incident& inc) {
  w.BeginObject().Key("source").Str(inc.source).Key("kind").Str(inc.kind);
  w.Key("summary").Str(inc.summary).Key("ranks");
  w.IntArray(inc.ranks).Key("hosts").StrArray(inc.hosts).Key("since");
  Time(w, inc.since).Key("until");
  if (inc.until)
    Time(w, *inc.until);
  else
    w.Null();
  w.Key("evidence").Str(inc.evidence).Key("gpu_hours");
  Num(w, inc.gpu_hours).EndObject();
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
  JsonWriter w;
  w.BeginObject().Key("format_version").Int(1).Key("generated").Str(UtcNowIso8601());
  w.Key("evenkeel_version").Str(kVersion).Key("live").Bool(o.live).Key("poll_s");
  Num(w, o.poll_s).Key("run").BeginObject().Key("name").Str(run.name);
  w.Key("run_file").Str(run.run_file).Key("xxh3").Str(run.xxh3).Key("world").Int(run.world);
  w.Key("nodes").Int(run.nodes).Key("gpus_per_node").Int(run.gpus_per_node).Key("hosts");
  w.StrArray(run.hosts).EndObject().Key("notes").StrArray(notes);
  // Summary: only what is known.
  w.Key("summary").BeginObject();
  auto num = [&](const char* key, const std::optional<double>& v) {
    if (v) Num(w.Key(key), *v);
  };
  if (summary.outcome) w.Key("outcome").Str(*summary.outcome);
  num("steps", summary.steps);
  num("planned_steps", summary.planned_steps);
  num("tokens", summary.tokens);
  num("tokens_per_s", summary.tokens_per_s);
  num("attempts", summary.attempts);
  num("gpu_hours_used", summary.gpu_hours_used);
  num("gpu_hours_lost", summary.gpu_hours_lost);
  num("evenfix_dropped_blocks", summary.evenfix_dropped_blocks);
  if (summary.final_checkpoint) w.Key("final_checkpoint").Str(*summary.final_checkpoint);
  if (summary.goodput) {
    w.Key("goodput");
    heartbeat::PutGoodput(*summary.goodput, &w);
  }
  w.EndObject();

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
  w.Key("time");
  if (any) {
    w.BeginObject().Key("start");
    Time(w, t_start).Key("end");
    Time(w, t_end + o.interval_s).EndObject();
  } else {
    w.Null();
  }

  w.Key("ranks").BeginArray();
  for (int r = 0; r < world; ++r) {
    w.BeginObject().Key("rank").Int(ranks_[r].rank).Key("host").Str(ranks_[r].host);
    w.Key("gpu").Int(ranks_[r].gpu).EndObject();
  }
  w.EndArray();

  // Heatmap levels within the byte budget. The band's levels go in "verdicts", further on.
  JsonWriter bands;
  bands.BeginArray();
  if (has_base_ && world > 0) {
    w.Key("heatmap").BeginObject().Key("scale").BeginObject().Key("util_max").Int(100);
    Num(w.Key("power_max_w"), power_max_w_).EndObject();
    w.Key("missing").Int(255).Key("levels").BeginArray();
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
      for (const Window& win : windows_) {
        // A window's verdict is about the readings up to its tick: the column holding the tick.
        int64_t col = static_cast<int64_t>(std::floor((win.time - first_) / dt));
        col = std::clamp<int64_t>(col, 0, c - 1);
        if (band[col] == kMissing || Severity(win.verdict) > Severity(band[col]))
          band[col] = win.verdict;
      }
      w.BeginObject().Key("cols").Int(c).Key("t0");
      Time(w, first_).Key("dt");
      Num(w, dt).Key("util_min").Str(Base64(umin)).Key("util_max").Str(Base64(umax));
      w.Key("power_min").Str(Base64(pmin)).Key("power_max").Str(Base64(pmax)).EndObject();
      bands.BeginObject().Key("cols").Int(c).Key("t0");
      Time(bands, first_).Key("dt");
      Num(bands, dt).Key("values").Str(Base64(band)).EndObject();
    }
    w.EndArray().EndObject();
  } else {
    w.Key("heatmap").Null();
  }
  bands.EndArray();

  // Verdicts: segments and the band.
  w.Key("verdicts").BeginObject().Key("names");
  w.StrArray(VerdictNames()).Key("colors").BeginObject();
  for (const std::string& name : VerdictNames()) w.Key(name).Str(VerdictColor(name));
  w.EndObject().Key("segments").BeginArray();
  for (size_t i = 0; i < windows_.size();) {
    size_t k = i;
    while (k + 1 < windows_.size() && windows_[k + 1].verdict == windows_[i].verdict) ++k;
    w.BeginObject().Key("t0");
    Time(w, windows_[i].time).Key("t1");
    Time(w, windows_[k].time + o.interval_s).Key("verdict");
    w.Str(VerdictNames()[windows_[i].verdict]);
    w.Key("ranks").IntArray(RanksOf(i, k)).Key("reason").Str(windows_[i].reason).EndObject();
    i = k + 1;
  }
  w.EndArray().Key("band").Raw(bands.str()).EndObject();

  // Series.
  static const char* kSeries[] = {"tokens_per_s", "step", "loss"};
  w.Key("series").BeginObject();
  for (int s = 0; s < 3; ++s) {
    w.Key(kSeries[s]).BeginArray();
    for (const auto& [t, v] : series_[s]) {
      w.BeginArray();
      Time(w, t);
      Num(w, v).EndArray();
    }
    w.EndArray();
  }
  w.EndObject();

  w.Key("checkpoints").BeginArray();
  for (const auto& c : checkpoints) {
    w.BeginObject().Key("step").Int(c.step).Key("time");
    Time(w, c.time).Key("path").Str(c.path).Key("ok").Bool(c.ok).Key("verdict").Str(c.verdict);
    w.EndObject();
  }
  w.EndArray().Key("attempts").BeginArray();
  for (const auto& a : attempts) {
    w.BeginObject().Key("attempt").Int(a.attempt).Key("start");
    Time(w, a.start).Key("end");
    Time(w, a.end).Key("outcome").Str(a.outcome).Key("decision").Str(a.decision);
    w.Key("exit_code");
    if (a.exit_code >= 0)
      w.Int(a.exit_code);
    else
      w.Null();
    w.Key("reason").Str(a.reason).Key("flight_recorder").Str(a.flight_recorder);
    // Absent when the launcher recorded none (an older one); [] when no rank failed.
    if (a.causes_recorded) {
      w.Key("causes").BeginArray();
      for (const auto& c : a.causes)
        w.BeginObject().Key("rank").Int(c.rank).Key("cause").Str(c.cause).EndObject();
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray().Key("incidents").BeginArray();
  std::vector<Incident> all = incidents;
  for (auto& inc : TriageIncidents()) all.push_back(std::move(inc));
  std::stable_sort(all.begin(), all.end(),
                   [](const Incident& a, const Incident& b) { return a.since < b.since; });
  for (const Incident& inc : all) IncidentJson(w, inc);
  w.EndArray().EndObject();
  return w.str();
}

}  // namespace ek::report
