// What an agent says about its node at one moment: the body of GET /status
// (JSON, docs/watch.md) and the source of GET /metrics. The watcher parses the
// same JSON back. Ages, not timestamps, cross the wire: the watcher places them
// on its own clock at receipt, so a node whose clock is off cannot move them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "heartbeat/goodput_account.h"
#include "heartbeat/heartbeat.h"

namespace ek::watch {

// The heartbeat format (heartbeat/heartbeat.h), under the names the agent and
// the watcher use.
using heartbeat::Heartbeat;
using heartbeat::KindOfPhase;
using heartbeat::PhaseKind;
using heartbeat::PositionOf;

// One checkpoint of the run's checkpoint dir as the agent reports it
// (checkpoint_scan.h says how each is judged).
struct CheckpointInfo {
  std::string name;  // the directory's name inside the checkpoint dir
  int64_t step = -1;
  bool complete = false;
  int files = 0;
  uint64_t bytes = 0;
  double mtime = 0;  // newest modification time inside (Unix seconds)
  std::string why;   // why it is not complete (ek_ckpt's verdict)
};

struct CheckpointScan {
  std::optional<CheckpointInfo> newest_complete;  // highest step among complete ones
  std::optional<CheckpointInfo> in_progress;      // a save under way
  int complete_count = 0;
};

struct GpuReading {
  int gpu = -1;
  std::optional<double> util_pct;
  std::optional<double> power_w;
  std::optional<double> mem_used_mib;
  double age_s = 0;  // how old the reading is on the agent's clock
};

struct RankReading {
  Heartbeat hb;
  bool alive = false;       // the heartbeat's pid is a live process on the node
  double beat_age_s = 0;    // now - hb.time
  double step_age_s = 0;    // now - hb.step_time: how long since this rank advanced
  double phase_age_s = -1;  // now - hb.phase_time: how long in this phase; -1 unknown
};

struct AgentStatus {
  std::string run;
  std::string host;
  double time = 0;     // the agent's clock, informational
  int rank_base = -1;  // global rank of GPU 0 when the run file places this host; -1 unknown
  std::vector<GpuReading> gpus;
  std::string telemetry;  // "ok", or why there are no GPU readings
  std::vector<RankReading> ranks;
  CheckpointScan checkpoint;
  double checkpoint_complete_age_s = -1;  // now - newest complete checkpoint's mtime
  double checkpoint_progress_age_s = -1;  // now - in-progress save's newest write
  std::vector<std::string> problems;      // unreadable heartbeat files, telemetry input problems
  // The launcher's goodput.json when the agent was given one and it could be read
  // (/metrics only: an unreadable one is a problem).
  std::optional<heartbeat::GoodputFile> goodput;
};

std::string AgentStatusToJson(const AgentStatus& s);
Result<AgentStatus> ParseAgentStatus(std::string_view json, std::string_view where);

// Prometheus text exposition format 0.0.4, metric names evenkeel_*.
std::string AgentStatusToMetrics(const AgentStatus& s);

}  // namespace ek::watch
