// Turning an Assessment into output: a line for people, a JSON object for
// scripts, and the exit status for the last window.
#pragma once

#include <string>

#include "telemetry/sample.h"
#include "triage/classifier.h"

namespace ek::triage {

// Exit statuses of `evenkeel triage` (1 and 2 are error and usage).
inline constexpr int kExitHealthy = 0;
inline constexpr int kExitCheckpoint = 10;
inline constexpr int kExitCheckpointOverdue = 11;
inline constexpr int kExitIdle = 12;
inline constexpr int kExitCommunication = 13;
inline constexpr int kExitStarvation = 14;
inline constexpr int kExitDeadlockSuspect = 15;
inline constexpr int kExitUnknown = 16;
int ExitCode(const Assessment& a);

// "2026-11-29T14:03:05.000Z  DEADLOCK_SUSPECT  floor band: ... (node-a:3)".
// `topology` (may be empty) names up to four involved GPUs as host:index.
std::string FormatLine(const Assessment& a, const telemetry::Topology& topology);

// One JSON object on one line (no newline): time, time_utc, verdict, ranks,
// rank_ranges, gpus (host:index, when not every rank), band, median_power_w,
// util_min, util_max, util_sd, since, duration_s, samples, overdue, reason.
std::string FormatJson(const Assessment& a, const telemetry::Topology& topology);

}  // namespace ek::triage
