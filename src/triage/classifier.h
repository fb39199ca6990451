// The triage classifier: names the state of a training run from per-rank
// board power and utilization over a sliding window of samples, following the
// field report's decision procedure (docs/triage.md):
//
//   uniform power in the healthy band                      -> HEALTHY
//   floor power, rank 0 alone at ~0%, the rest waiting     -> CHECKPOINT
//                                  (flagged when it lasts far past the plan)
//   floor power, another rank (or a few) at ~0%, the rest
//     at ~100%, persisting across two samples              -> DEADLOCK_SUSPECT
//   mid power, rank-to-rank utilization scatter            -> STARVATION
//   mid power, every rank uniformly busy                   -> COMMUNICATION
//   floor power or less, every rank at ~0%                 -> IDLE
//   missing or stale data, or a shape no rule names        -> UNKNOWN
//
// Two extensions, both documented in docs/triage.md: every rank pinned busy at
// floor power (the report's "utilization stays at 100% while throughput is
// zero") is DEADLOCK_SUSPECT once it has lasted all_busy_hang_s; and a shape
// that needs persistence is UNKNOWN, never the previous verdict, until it has
// persisted. Missing data is never HEALTHY.
//
// Usage (replay, the CLI, `evenkeel watch`): Observe() every sample, then
// Evaluate() once per sample interval. Not thread-safe; one instance per run.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/sample.h"
#include "triage/profile.h"

namespace ek::triage {

enum class Verdict {
  kHealthy,
  kCheckpoint,
  kDeadlockSuspect,
  kStarvation,
  kCommunication,
  kIdle,
  kUnknown,
};
std::string_view VerdictName(Verdict v);  // "HEALTHY", "DEADLOCK_SUSPECT", ...

enum class Band { kNone, kFloor, kMid, kHealthy };
std::string_view BandName(Band b);  // "none", "floor", "mid", "healthy"

struct ClassifierOptions {
  double stale_after_s = 3;           // a rank whose newest value is older is missing
  int persist_samples = 2;            // report: "persisting across two samples"
  double all_busy_hang_s = 30;        // floor power with every rank pinned busy
  double idle_util_pct = 5;           // "at 0%"
  double busy_util_pct = 80;          // "at 100%"
  double scatter_util_pct = 15;       // cross-rank utilization s.d. that is scatter
  double checkpoint_planned_s = 120;  // report: ranks resume within ~2 min
  double checkpoint_overdue_factor = 3;
};

struct Assessment {
  double time = 0;
  Verdict verdict = Verdict::kUnknown;
  Band band = Band::kNone;
  // The ranks the verdict is about: the idle rank(s) of a deadlock or a
  // checkpoint, the under-busy ranks of starvation, the missing ranks of an
  // UNKNOWN for missing data; every rank for HEALTHY, COMMUNICATION, IDLE.
  std::vector<int> ranks;
  double since = 0;       // when the condition began (onset)
  double duration_s = 0;  // time - since
  int samples = 0;        // consecutive evaluations the condition has held
  double median_power_w = std::numeric_limits<double>::quiet_NaN();
  double util_min = std::numeric_limits<double>::quiet_NaN();
  double util_max = std::numeric_limits<double>::quiet_NaN();
  double util_sd = std::numeric_limits<double>::quiet_NaN();
  bool overdue = false;  // a checkpoint past checkpoint_overdue_factor x planned
  std::string reason;    // the numbers behind the verdict, for people
};

class Classifier {
 public:
  // `world` ranks, numbered 0..world-1.
  Classifier(Profile profile, ClassifierOptions options, int world);

  // Records `s` for `rank`. Values that are absent stay absent: the rank's
  // previous value of that field ages towards stale. A sample older than the
  // rank's newest is ignored. Out-of-range ranks are ignored.
  void Observe(int rank, const telemetry::Sample& s);

  // Classifies the window ending at `now` from each rank's newest values.
  Assessment Evaluate(double now);

  const Profile& profile() const { return profile_; }
  const ClassifierOptions& options() const { return options_; }
  int world() const { return world_; }

 private:
  struct RankState {
    double last_time = -std::numeric_limits<double>::infinity();
    double power_time = -std::numeric_limits<double>::infinity();
    double util_time = -std::numeric_limits<double>::infinity();
    double power_w = 0;
    double util_pct = 0;
  };
  struct Track {
    int condition = -1;
    std::vector<int> key;
    int count = 0;
    double since = 0;
  };
  // Fills the power and utilization statistics and the band; returns the
  // number of busy ranks and lists the idle ones.
  int Measure(Assessment* a, std::vector<int>* idle);
  // The window's condition (see classifier.cc); *key names the ranks it is about.
  int Shape(const Assessment& a, std::vector<int> idle, int busy, std::vector<int>* key) const;
  // Turns the tracked condition into a verdict with its reason.
  void Decide(Assessment* a);
  std::string BandText(const Assessment& a) const;

  Profile profile_;
  ClassifierOptions options_;
  int world_;
  std::vector<RankState> ranks_;
  std::vector<double> scratch_;
  Track track_;
};

// "45 s", "2m05s", "1h02m".
std::string FormatDuration(double seconds);

}  // namespace ek::triage
