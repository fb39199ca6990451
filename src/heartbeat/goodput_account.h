// The goodput account: how a launch's wall time splits into productive training,
// work redone after failures, restart overhead and time blocked by saves
// (docs/launch.md "Goodput"). The launcher computes it (launch/goodput.h) from
// its attempt records and the ranks' heartbeats; it is written into summary.json
// ("goodput", per attempt and for the launch) and into the running goodput.json,
// read back by the agent (its Prometheus gauges) and the report. This is its one
// writer and its one reader, here beside the heartbeat format it is computed
// from, so that all three link it without linking the launcher.
#pragma once

#include <string>
#include <string_view>

#include "core/json_fields.h"
#include "core/json_out.h"
#include "core/status.h"

namespace ek::heartbeat {

struct GoodputAccount {
  double wall_s = 0;      // the span accounted for; every part below sums to it
  double training_s = 0;  // steps that were kept (not redone), less the time saves blocked
  double redone_s = 0;    // steps after the checkpoint the next attempt resumed from: trained again
  // Restart overhead: failure -> detection -> ranks stopped -> new ranks started -> first step.
  double detection_s = 0, stopping_s = 0, rendezvous_s = 0, startup_s = 0;
  double save_blocked_s = 0;  // training blocked by saves (the heartbeats' save_blocked_s)
  double other_s = 0;         // the gate, the first attempt's start-up, the end, anything else
  double RestartS() const { return detection_s + stopping_s + rendezvous_s + startup_s; }
  // training / wall; 0 for an empty span.
  double Ratio() const { return wall_s > 0 ? training_s / wall_s : 0; }
};

// The object {"ratio", "wall_s", "training_s", "redone_s", "restart_s": {"detection",
// "stopping", "rendezvous", "startup"}, "save_blocked_s", "other_s"} (seconds, 3 decimals).
void PutGoodput(const GoodputAccount& g, JsonWriter* w);
std::string GoodputToJson(const GoodputAccount& g);
// Reads the object `key` of `f` strictly: every field required, a number >= 0.
Status GoodputFromFields(const JsonFields& f, std::string_view key, GoodputAccount* out);

// goodput.json, the launcher's running account of the launch, rewritten whole
// (temp file, fsync, rename) after each attempt and every few seconds during one:
// {"v": 1, "run_id", "time" (when it was written, Unix s), "attempt" (the one
// running or last ended), "running" (an attempt is under way), "goodput": {...}}.
struct GoodputFile {
  std::string run_id;
  double time = 0;
  int attempt = 0;
  bool running = false;
  GoodputAccount goodput;
};
std::string GoodputFileToJson(const GoodputFile& f);
Result<GoodputFile> ParseGoodputFile(std::string_view text, const std::string& where);

// "goodput 91.2% (training 1h02m of 1h08m; redone 3m, restart 2m, saves blocked 40s)"
std::string GoodputLine(const GoodputAccount& g);
// "1h02m", "3m05s", "40s", "0.4s"
std::string ShortDuration(double seconds);

}  // namespace ek::heartbeat
