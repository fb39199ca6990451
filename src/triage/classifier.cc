#include "triage/classifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/json_out.h"

namespace ek::triage {

namespace {

// What the window shows, before persistence turns it into a verdict. The
// deadlock and checkpoint shapes do not depend on the band, so that a shape
// first seen while power is still falling counts towards "two samples".
enum Condition {
  kMissing,
  kAllIdle,
  kHealthy,
  kHealthyUneven,
  kAllBusyFloor,
  kAllBusyMid,
  kMixedPower,
  kAboveProfile,
  kRank0Off,
  kHangShape,
  kScatter,
  kOther,
};

std::string Ranks(const std::vector<int>& ranks) {
  std::vector<int64_t> v(ranks.begin(), ranks.end());
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", CompactRanges(std::move(v)));
}

std::vector<int> Complement(const std::vector<int>& ranks, int world) {
  std::vector<int> out;
  size_t j = 0;
  for (int r = 0; r < world; ++r) {
    if (j < ranks.size() && ranks[j] == r) {
      ++j;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<int> AllRanks(int world) {
  std::vector<int> out(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) out[static_cast<size_t>(r)] = r;
  return out;
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kHealthy:
      return "HEALTHY";
    case Verdict::kCheckpoint:
      return "CHECKPOINT";
    case Verdict::kDeadlockSuspect:
      return "DEADLOCK_SUSPECT";
    case Verdict::kStarvation:
      return "STARVATION";
    case Verdict::kCommunication:
      return "COMMUNICATION";
    case Verdict::kIdle:
      return "IDLE";
    case Verdict::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

std::string_view BandName(Band b) {
  switch (b) {
    case Band::kNone:
      return "none";
    case Band::kFloor:
      return "floor";
    case Band::kMid:
      return "mid";
    case Band::kHealthy:
      return "healthy";
  }
  return "none";
}

std::string FormatDuration(double s) {
  if (!(s >= 0)) s = 0;
  long t = std::lround(s);
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
}

Classifier::Classifier(Profile profile, ClassifierOptions options, int world)
    : profile_(std::move(profile)),
      options_(options),
      world_(std::max(world, 0)),
      ranks_(static_cast<size_t>(world_)) {
  scratch_.reserve(static_cast<size_t>(world_));
}

void Classifier::Observe(int rank, const telemetry::Sample& s) {
  if (rank < 0 || rank >= world_) return;
  RankState& r = ranks_[static_cast<size_t>(rank)];
  if (s.time < r.last_time) return;
  r.last_time = s.time;
  if (s.power_w) {
    r.power_w = *s.power_w;
    r.power_time = s.time;
  }
  if (s.util_pct) {
    r.util_pct = *s.util_pct;
    r.util_time = s.time;
  }
}

std::string Classifier::BandText(const Assessment& a) const {
  const Profile& p = profile_;
  switch (a.band) {
    case Band::kFloor:
      return fmt::format("floor band: median {:.0f} W <= {:.0f} W ({} floor ~{:.0f} W)",
                         a.median_power_w, p.floor_max_w(), p.name, p.floor_w);
    case Band::kMid:
      return fmt::format(
          "mid band: median {:.0f} W ({} starvation ~{:.0f} W, communication ~{:.0f} W)",
          a.median_power_w, p.name, p.starvation_w, p.communication_w);
    case Band::kHealthy:
      return fmt::format("healthy band: median {:.0f} W >= {:.0f} W ({} healthy {:.0f}-{:.0f} W)",
                         a.median_power_w, p.healthy_min_w(), p.name, p.healthy_lo_w,
                         p.healthy_hi_w);
    case Band::kNone:
      break;
  }
  return "no band";
}

Assessment Classifier::Evaluate(double now) {
  Assessment a;
  a.time = now;
  const double stale = options_.stale_after_s + 1e-9;
  std::vector<int> missing;
  double oldest = now;
  for (int r = 0; r < world_; ++r) {
    const RankState& s = ranks_[static_cast<size_t>(r)];
    double seen = std::min(s.power_time, s.util_time);
    if (now - seen > stale) {
      missing.push_back(r);
      oldest = std::min(oldest, seen);
    }
  }
  int condition = kMissing;
  std::vector<int> key = missing;
  if (world_ > 0 && missing.empty()) {
    std::vector<int> idle;
    int busy = Measure(&a, &idle);
    key.clear();
    condition = Shape(a, std::move(idle), busy, &key);
  }
  if (condition == track_.condition && key == track_.key) {
    ++track_.count;
  } else {
    track_ = Track{condition, key, 1, now};
  }
  a.since = track_.since;
  a.duration_s = now - track_.since;
  a.samples = track_.count;
  if (condition != kMissing) {
    Decide(&a);
    return a;
  }
  a.ranks = missing;
  if (world_ == 0) {
    a.reason = "no ranks to classify";
  } else if (std::isinf(oldest)) {
    a.reason = fmt::format(
        "no power/utilization yet from {} of {} ranks ({}); missing data is never healthy",
        missing.size(), world_, Ranks(missing));
  } else {
    a.reason = fmt::format(
        "no fresh power/utilization from {} of {} ranks ({}) for {} (stale after {:g} s); "
        "missing data is never healthy",
        missing.size(), world_, Ranks(missing), FormatDuration(now - oldest),
        options_.stale_after_s);
  }
  return a;
}

int Classifier::Measure(Assessment* a, std::vector<int>* idle) {
  // Power: the median resists one noisy board; utilization: the spread.
  scratch_.clear();
  double usum = 0, usq = 0;
  a->util_min = 101;
  a->util_max = -1;
  int busy = 0;
  for (int r = 0; r < world_; ++r) {
    const RankState& s = ranks_[static_cast<size_t>(r)];
    scratch_.push_back(s.power_w);
    usum += s.util_pct;
    usq += s.util_pct * s.util_pct;
    a->util_min = std::min(a->util_min, s.util_pct);
    a->util_max = std::max(a->util_max, s.util_pct);
    if (s.util_pct <= options_.idle_util_pct) idle->push_back(r);
    if (s.util_pct >= options_.busy_util_pct) ++busy;
  }
  size_t mid = scratch_.size() / 2;
  std::nth_element(scratch_.begin(), scratch_.begin() + static_cast<long>(mid), scratch_.end());
  a->median_power_w = scratch_[mid];
  if (scratch_.size() % 2 == 0) {
    double lower = *std::max_element(scratch_.begin(), scratch_.begin() + static_cast<long>(mid));
    a->median_power_w = (a->median_power_w + lower) / 2;
  }
  double mean = usum / world_;
  a->util_sd = std::sqrt(std::max(0.0, usq / world_ - mean * mean));
  a->band = a->median_power_w <= profile_.floor_max_w()     ? Band::kFloor
            : a->median_power_w >= profile_.healthy_min_w() ? Band::kHealthy
                                                            : Band::kMid;
  return busy;
}

int Classifier::Shape(const Assessment& a, std::vector<int> idle, int busy,
                      std::vector<int>* key) const {
  const int n_idle = static_cast<int>(idle.size());
  if (a.median_power_w > profile_.ceiling_w()) return kAboveProfile;
  if (n_idle == world_) return kAllIdle;
  if (busy == world_) {
    if (a.band == Band::kFloor) return kAllBusyFloor;
    // Uniform power too: a mid-band median made of floored and healthy ranks
    // is two nodes caught at different moments of a transition, and a
    // healthy median with a floored rank is not healthy.
    double lo = a.band == Band::kMid ? profile_.floor_max_w() : profile_.healthy_min_w();
    double hi = a.band == Band::kMid ? profile_.healthy_min_w() : profile_.ceiling_w();
    for (int r = 0; r < world_; ++r) {
      double p = ranks_[static_cast<size_t>(r)].power_w;
      if (p <= lo || p >= hi) key->push_back(r);
    }
    if (a.band == Band::kMid) return key->empty() ? kAllBusyMid : kMixedPower;
    return key->empty() ? kHealthy : kHealthyUneven;
  }
  if (n_idle > 0 && n_idle + busy == world_) {
    bool rank0_alone = n_idle == 1 && idle[0] == 0;
    *key = std::move(idle);
    return rank0_alone ? kRank0Off : kHangShape;
  }
  if (a.util_sd >= options_.scatter_util_pct) return kScatter;
  return kOther;
}

void Classifier::Decide(Assessment* a) {
  const int condition = track_.condition;
  const std::vector<int>& key = track_.key;
  const bool persisted = track_.count >= options_.persist_samples;
  const std::string band = BandText(*a);
  const std::string util =
      fmt::format("utilization {:.0f}-{:.0f}% (s.d. {:.0f})", a->util_min, a->util_max, a->util_sd);
  const std::string held = fmt::format("{} sample{}, {}", track_.count,
                                       track_.count == 1 ? "" : "s", FormatDuration(a->duration_s));
  const std::string confirming =
      fmt::format("seen {} of the {} samples needed", track_.count, options_.persist_samples);
  a->verdict = Verdict::kUnknown;
  switch (condition) {
    case kAllIdle:
      if (a->band == Band::kFloor) {
        a->verdict = Verdict::kIdle;
        a->ranks = AllRanks(world_);
        a->reason = fmt::format("{}; all {} ranks at <= {:g}% for {}: no work running", band,
                                world_, options_.idle_util_pct, held);
      } else {
        a->reason = fmt::format(
            "{}; all ranks at <= {:g}% but power is above the floor: no rule "
            "names this",
            band, options_.idle_util_pct);
      }
      return;
    case kHealthy:
      a->verdict = Verdict::kHealthy;
      a->ranks = AllRanks(world_);
      a->reason = fmt::format("{}; all {} ranks busy, {}; for {}", band, world_, util, held);
      return;
    case kHealthyUneven:
      a->ranks = key;
      a->reason = fmt::format("{} but {} outside {:.0f}-{:.0f} W: power is not uniform", band,
                              Ranks(key), profile_.healthy_min_w(), profile_.ceiling_w());
      return;
    case kAllBusyFloor:
      a->ranks = AllRanks(world_);
      if (persisted && a->duration_s >= options_.all_busy_hang_s) {
        a->verdict = Verdict::kDeadlockSuspect;
        a->reason = fmt::format(
            "{}; all {} ranks pinned at >= {:g}% for {}: kernels scheduled, no "
            "work done; suspected hang in a collective (confirm with the NCCL "
            "flight recorder)",
            band, world_, options_.busy_util_pct, held);
      } else {
        a->reason =
            fmt::format("{}; all ranks pinned at >= {:g}% for {}: a hang if it lasts {}", band,
                        options_.busy_util_pct, held, FormatDuration(options_.all_busy_hang_s));
      }
      return;
    case kAllBusyMid:
      a->ranks = AllRanks(world_);
      if (persisted) {
        a->verdict = Verdict::kCommunication;
        a->reason = fmt::format("{}; all {} ranks uniformly busy, {}; for {}: communication-bound",
                                band, world_, util, held);
      } else {
        a->reason = fmt::format(
            "{}; all ranks uniformly busy: communication-bound if it persists "
            "({})",
            band, confirming);
      }
      return;
    case kAboveProfile:
      a->reason = fmt::format(
          "median {:.0f} W is above anything a {} board draws (ceiling {:.0f} "
          "W): wrong --profile?",
          a->median_power_w, profile_.name, profile_.ceiling_w());
      return;
    case kMixedPower:
      a->ranks = key;
      a->reason = fmt::format(
          "{}; all ranks busy but {} outside the mid band: power is not "
          "uniform (a transition?)",
          band, Ranks(key));
      return;
    case kRank0Off: {
      a->ranks = key;
      std::string others = Ranks(Complement(key, world_));
      if (a->band != Band::kFloor) {
        a->reason = fmt::format(
            "{}; rank 0 alone at {:.0f}% while {} wait: a checkpoint starting "
            "or ending, not yet at the floor",
            band, ranks_[0].util_pct, others);
        return;
      }
      a->verdict = Verdict::kCheckpoint;
      double overdue_s = options_.checkpoint_planned_s * options_.checkpoint_overdue_factor;
      a->overdue = a->duration_s > overdue_s;
      a->reason = fmt::format(
          "{}; rank 0 alone at {:.0f}% while {} wait: checkpoint write, for {} "
          "(planned {})",
          band, ranks_[0].util_pct, others, held, FormatDuration(options_.checkpoint_planned_s));
      if (a->overdue) {
        a->reason += fmt::format(
            "; OVERDUE: more than {:g}x the planned write, check rank 0's "
            "writer and the storage",
            options_.checkpoint_overdue_factor);
      }
      return;
    }
    case kHangShape: {
      a->ranks = key;
      std::string shape =
          fmt::format("{} at <= {:g}% while {} at >= {:g}%", Ranks(key), options_.idle_util_pct,
                      Ranks(Complement(key, world_)), options_.busy_util_pct);
      if (a->band == Band::kFloor && persisted) {
        a->verdict = Verdict::kDeadlockSuspect;
        a->reason = fmt::format(
            "{}; {}, for {} since onset: suspected deadlock (ranks in different "
            "collectives; confirm with the NCCL flight recorder)",
            band, shape, held);
      } else if (a->band == Band::kFloor || a->band == Band::kMid) {
        a->reason = fmt::format("{}; {}: deadlock shape, {}", band, shape, confirming);
      } else {
        a->reason = fmt::format("{}; {}: power is healthy but ranks are idle", band, shape);
      }
      return;
    }
    case kScatter: {
      for (int r = 0; r < world_; ++r) {
        if (ranks_[static_cast<size_t>(r)].util_pct < options_.busy_util_pct) a->ranks.push_back(r);
      }
      if (a->band == Band::kMid && persisted) {
        a->verdict = Verdict::kStarvation;
        a->reason = fmt::format(
            "{}; rank-to-rank scatter, {}, {} below {:g}%; for {}: input-"
            "starved (bottleneck upstream of the GPUs)",
            band, util, Ranks(a->ranks), options_.busy_util_pct, held);
      } else if (a->band == Band::kMid) {
        a->reason = fmt::format("{}; rank-to-rank scatter, {}: starvation if it persists ({})",
                                band, util, confirming);
      } else {
        a->reason = fmt::format("{}; rank-to-rank scatter, {}: no rule names this", band, util);
      }
      return;
    }
    default:
      a->reason = fmt::format("{}; {}: the per-rank shape matches no rule", band, util);
      return;
  }
}

}  // namespace ek::triage
