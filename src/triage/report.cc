#include "triage/report.h"

#include <fmt/format.h>

#include <cmath>

#include "core/json_out.h"
#include "telemetry/nvidia_smi_csv.h"

namespace ek::triage {

namespace {

void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
  } else {
    out->append(fmt::format("{:.3f}", v));
  }
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
  std::string out = "{\"time\":";
  AppendNumber(&out, a.time);
  out += ",\"time_utc\":";
  AppendJsonString(&out, telemetry::FormatTimestamp(a.time));
  out += ",\"verdict\":";
  AppendJsonString(&out, VerdictName(a.verdict));
  out += ",\"ranks\":[";
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    if (i) out.push_back(',');
    AppendInt(&out, a.ranks[i]);
  }
  out += "],\"rank_ranges\":";
  AppendJsonString(&out, CompactRanges(std::vector<int64_t>(a.ranks.begin(), a.ranks.end())));
  if (topology.world() > 0 && !AllRanks(a, topology)) {
    out += ",\"gpus\":[";
    for (size_t i = 0; i < a.ranks.size(); ++i) {
      if (i) out.push_back(',');
      AppendJsonString(&out, topology.RankName(a.ranks[i]));
    }
    out += "]";
  }
  out += ",\"band\":";
  AppendJsonString(&out, BandName(a.band));
  out += ",\"median_power_w\":";
  AppendNumber(&out, a.median_power_w);
  out += ",\"util_min\":";
  AppendNumber(&out, a.util_min);
  out += ",\"util_max\":";
  AppendNumber(&out, a.util_max);
  out += ",\"util_sd\":";
  AppendNumber(&out, a.util_sd);
  out += ",\"since\":";
  AppendNumber(&out, a.since);
  out += ",\"duration_s\":";
  AppendNumber(&out, a.duration_s);
  out += ",\"samples\":";
  AppendInt(&out, a.samples);
  out += a.overdue ? ",\"overdue\":true" : ",\"overdue\":false";
  out += ",\"reason\":";
  AppendJsonString(&out, a.reason);
  out += "}";
  return out;
}

}  // namespace ek::triage
