// The run report's data model (docs/report_format.md), built from what a run
// leaves behind (evenkeel report) or accumulated round by round (evenkeel
// watch --http). The Recorder holds every GPU reading, quantized to a byte
// per metric (utilization in percent; power in 1/254ths of power_max_w) with
// its time as a float offset: 8 bytes a reading, 180 MB for 1,024 GPUs x 6 h
// at 1 Hz. ToJson downsamples into min/max levels within a byte budget.
//
// Not thread-safe: one writer, and ToJson called from the same thread (the
// watcher serializes its own access).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "heartbeat/goodput_account.h"
#include "run/rank_cause.h"
#include "triage/classifier.h"

namespace ek::report {

struct RankInfo {
  int rank = 0;
  std::string host;
  int gpu = 0;
};

struct RunInfo {
  std::string name, run_file, xxh3;
  int world = 0, nodes = 0, gpus_per_node = 0;
  std::vector<std::string> hosts;
};

// Every field optional: what the launcher's summary and the checkpoints say.
struct Summary {
  std::optional<std::string> outcome, final_checkpoint;
  std::optional<double> steps, planned_steps, tokens, tokens_per_s, attempts, gpu_hours_used,
      gpu_hours_lost, evenfix_dropped_blocks;
  // summary.json's "goodput" (docs/launch.md "Goodput"); unset for an older launcher's.
  std::optional<heartbeat::GoodputAccount> goodput;
};

struct CheckpointMark {
  int64_t step = -1;
  double time = 0;
  std::string path;
  bool ok = false;
  std::string verdict;
};

// One failed rank of an attempt and its first error, as the launcher read it from
// the rank's log ("OSError: [Errno 28] No space left on device: ... (in save (step 30))")
// or its exit status ("killed by SIGKILL").
using AttemptCause = run::RankCause;  // read by run/rank_cause.h, as the launcher reads it

struct AttemptMark {
  int attempt = 0;
  double start = 0, end = 0;
  std::string outcome, decision, reason, flight_recorder;
  int exit_code =
      -1;  // the decision's: the launch's exit code when it ended there (done, stop); -1 not known
  // false: the launcher that wrote the records read no causes (older than "The cause, named").
  bool causes_recorded = false;
  std::vector<AttemptCause> causes;  // in rank order
};

struct Incident {
  std::string source;  // "triage", "watcher"
  std::string kind;    // "deadlock", "starvation", "hang", ...
  std::string summary;
  std::vector<int> ranks;
  std::vector<std::string> hosts;
  double since = 0;
  std::optional<double> until;  // nullopt: still open
  std::string evidence;
  double gpu_hours = 0;
};

struct ModelOptions {
  size_t byte_budget = 12u << 20;  // heatmap + band bytes before base64 (x 4/3 in the file)
  int max_cols = 2048;             // the widest level: about a screen
  double power_max_w = 1500;       // power's byte scale
  double interval_s = 1;           // the sampling interval (the finest column)
  bool live = false;
  double poll_s = 1;
};

class Recorder {
 public:
  explicit Recorder(std::vector<RankInfo> ranks, double power_max_w = 1500);

  const std::vector<RankInfo>& ranks() const { return ranks_; }
  // One reading of one rank; times of one rank should arrive in order (they
  // are sorted before output otherwise). Absent values are "missing", never 0.
  void AddReading(int rank, double time, std::optional<double> util_pct,
                  std::optional<double> power_w);
  // The triage classifier's assessment of one window, in time order.
  void AddAssessment(const triage::Assessment& a);
  enum class Series { kTokensPerS, kStep, kLoss };
  void AddPoint(Series series, double time, double value);

  RunInfo run;
  Summary summary;
  std::vector<std::string> notes;
  std::vector<CheckpointMark> checkpoints;
  std::vector<AttemptMark> attempts;
  std::vector<Incident> incidents;  // besides the ones derived from the assessments

  // Incidents the verdict timeline implies: each run of DEADLOCK_SUSPECT,
  // STARVATION or UNKNOWN of at least two windows, with its ranks and reason.
  std::vector<Incident> TriageIncidents() const;
  size_t readings() const { return readings_; }
  std::string ToJson(const ModelOptions& options) const;

 private:
  struct Reading {
    float dt;       // seconds after base_
    uint8_t util;   // 0-100, 255 missing
    uint8_t power;  // 0-254, 255 missing
  };
  struct Window {
    double time;
    uint8_t verdict;
    std::vector<int> ranks;
    std::string reason;  // on a run's first window only (AddAssessment)
  };
  // The ranks windows [first, last] are about; empty when that is every rank.
  std::vector<int> RanksOf(size_t first, size_t last) const;

  std::vector<RankInfo> ranks_;
  double power_max_w_;
  double base_ = 0;
  bool has_base_ = false;
  double first_ = 0, last_ = 0;
  size_t readings_ = 0;
  std::vector<std::vector<Reading>> by_rank_;
  std::vector<Window> windows_;
  size_t run_start_ = 0;  // the first window of the newest run of one verdict
  std::vector<std::pair<double, double>> series_[3];
};

// "DEADLOCK_SUSPECT" ... in the order of docs/report_format.md, and their colors.
const std::vector<std::string>& VerdictNames();
std::string VerdictColor(const std::string& name);

}  // namespace ek::report
