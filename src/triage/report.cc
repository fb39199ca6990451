#include "triage/report.h"

#include <fmt/format.h>

#include <cmath>

#include "core/json_out.h"
#include "telemetry/nvidia_smi_csv.h"

namespace ek::triage {

namespace {

// Three decimals; NaN (no reading) as null.
void Number(JsonWriter& w, std::string_view key, double v) {
  w.Key(key);
  if (std::isfinite(v))
    w.Fixed(v, 3);
  else
    w.Null();
}

bool AllRanks(const Assessment& a, const telemetry::Topology& topology) {
  return static_cast<int>(a.ranks.size()) == topology.world();
}

}  // namespace

int ExitCode(const Assessment& a) {
  switch (a.verdict) {
    case Verdict::kHealthy:
      return kExitHealthy;
    case Verdict::kCheckpoint:
      return a.overdue ? kExitCheckpointOverdue : kExitCheckpoint;
    case Verdict::kIdle:
      return kExitIdle;
    case Verdict::kCommunication:
      return kExitCommunication;
    case Verdict::kStarvation:
      return kExitStarvation;
    case Verdict::kDeadlockSuspect:
      return kExitDeadlockSuspect;
    case Verdict::kUnknown:
      return kExitUnknown;
  }
  return kExitUnknown;
}

std::string FormatLine(const Assessment& a, const telemetry::Topology& topology) {
  std::string line = fmt::format("{}  {:<16}  {}", telemetry::FormatTimestamp(a.time),
                                 VerdictName(a.verdict), a.reason);
  if (!a.ranks.empty() && a.ranks.size() <= 4 && topology.world() > 0 && !AllRanks(a, topology)) {
    line += " [";
    for (size_t i = 0; i < a.ranks.size(); ++i) {
      if (i) line += ", ";
      line += topology.RankName(a.ranks[i]);
    }
    line += "]";
  }
  return line;
}

std::string FormatJson(const Assessment& a, const telemetry::Topology& topology) {
  JsonWriter w;
  w.BeginObject();
  Number(w, "time", a.time);
  w.Key("time_utc").Str(telemetry::FormatTimestamp(a.time));
  w.Key("verdict").Str(VerdictName(a.verdict));
  w.Key("ranks").IntArray(a.ranks);
  w.Key("rank_ranges").Str(CompactRanges(std::vector<int64_t>(a.ranks.begin(), a.ranks.end())));
  if (topology.world() > 0 && !AllRanks(a, topology)) {
    w.Key("gpus").BeginArray();
    for (int r : a.ranks) w.Str(topology.RankName(r));
    w.EndArray();
  }
  w.Key("band").Str(BandName(a.band));
  Number(w, "median_power_w", a.median_power_w);
  Number(w, "util_min", a.util_min);
  Number(w, "util_max", a.util_max);
  Number(w, "util_sd", a.util_sd);
  Number(w, "since", a.since);
  Number(w, "duration_s", a.duration_s);
  w.Key("samples").Int(a.samples).Key("overdue").Bool(a.overdue).Key("reason").Str(a.reason);
  w.EndObject();
  return w.str();
}

}  // namespace ek::triage
