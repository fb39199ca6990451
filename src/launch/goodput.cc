#include "launch/goodput.h"

#include <algorithm>
#include <cmath>

namespace ek::launch {

namespace {

// Adds time to the parts of an account while a cursor moves forward: a moment
// before the cursor adds nothing, so the parts sum to the span walked.
class GoodputWalk {
 public:
  GoodputWalk(double start, double limit) : cursor_(start), limit_(limit) {}
  // Moves to `to` (clamped), returning the seconds moved.
  double To(double to) {
    to = std::min(to, limit_);
    if (!(to > cursor_)) return 0;
    double moved = to - cursor_;
    cursor_ = to;
    return moved;
  }
  double cursor() const { return cursor_; }

 private:
  double cursor_;
  double limit_;
};

// The blocked seconds and saves at `t`: the last mark at or before it.
const StepMark* GoodputMarkAt(const std::vector<StepMark>& marks, double t) {
  const StepMark* at = nullptr;
  for (const auto& m : marks) {
    if (m.time > t) break;
    at = &m;
  }
  return at;
}

// When step `k` was finished, interpolated between marks; `from`/`from_step`
// where the attempt's training began. `fallback` when no mark reaches it.
double GoodputTimeOfStep(const AttemptTimeline& a, int64_t k, double from, double fallback) {
  double prev_t = from;
  int64_t prev_step = a.resumed_from;
  for (const auto& m : a.marks) {
    if (m.step >= k) {
      if (m.step == k || m.step <= prev_step) return m.time;
      double f = static_cast<double>(k - prev_step) / static_cast<double>(m.step - prev_step);
      return prev_t + (m.time - prev_t) * f;
    }
    if (m.step > prev_step) {
      prev_step = m.step;
      prev_t = m.time;
    }
  }
  return fallback;
}

// One attempt from the walk's cursor to its end.
void GoodputAccountAttempt(const AttemptTimeline& a, bool after_failure, GoodputWalk* walk,
                           GoodputAccount* g) {
  double end = std::max(a.end, walk->cursor());
  const double started = a.started > 0 ? a.started : a.spawn;
  double train_start = a.train_start;
  if (!(train_start > 0)) train_start = a.marks.empty() ? end : a.marks.front().time;
  if (after_failure) {
    g->rendezvous_s += walk->To(std::max(started, a.spawn));
    g->startup_s += walk->To(train_start);
  } else {
    g->other_s += walk->To(train_start);
  }
  const double from = walk->cursor();
  end = std::max(end, from);
  double train_end = a.failed ? a.failed_at : (a.marks.empty() ? from : a.marks.back().time);
  train_end = std::clamp(train_end, from, end);
  // Where the kept steps end: after the kept step's save, when the heartbeats show it.
  double kept_end = train_end;
  if (a.kept_through != kAllStepsKept) {
    if (a.kept_through <= a.resumed_from) {
      kept_end = from;
    } else {
      kept_end = GoodputTimeOfStep(a, a.kept_through, from, train_end);
      const StepMark* at = GoodputMarkAt(a.marks, kept_end);
      const int64_t saves_then = at ? at->saves : 0;
      for (const auto& m : a.marks) {
        if (m.time <= kept_end || m.step != a.kept_through) continue;
        if (m.saves > saves_then) {
          kept_end = m.time;
          break;
        }
      }
    }
    kept_end = std::clamp(kept_end, from, train_end);
  }
  const StepMark* kept_mark = GoodputMarkAt(a.marks, kept_end);
  const StepMark* last_mark = GoodputMarkAt(a.marks, train_end);
  const double blocked_kept = kept_mark ? kept_mark->save_blocked_s : 0;
  const double blocked_all = std::max(blocked_kept, last_mark ? last_mark->save_blocked_s : 0);
  double kept = walk->To(kept_end);
  double b = std::min(blocked_kept, kept);
  g->training_s += kept - b;
  g->save_blocked_s += b;
  double rest = walk->To(train_end);
  b = std::min(blocked_all - blocked_kept, rest);
  g->redone_s += rest - b;
  g->save_blocked_s += b;
  if (a.failed) {
    g->detection_s += walk->To(std::max(a.detected_at, a.failed_at));
    g->stopping_s += walk->To(end);
  } else {
    g->other_s += walk->To(end);
  }
}

void GoodputAddTo(const GoodputAccount& x, GoodputAccount* sum) {
  sum->wall_s += x.wall_s;
  sum->training_s += x.training_s;
  sum->redone_s += x.redone_s;
  sum->detection_s += x.detection_s;
  sum->stopping_s += x.stopping_s;
  sum->rendezvous_s += x.rendezvous_s;
  sum->startup_s += x.startup_s;
  sum->save_blocked_s += x.save_blocked_s;
  sum->other_s += x.other_s;
}

}  // namespace

GoodputResult ComputeGoodput(double launch_start, double launch_end,
                             const std::vector<AttemptTimeline>& attempts) {
  GoodputResult r;
  launch_end = std::max(launch_end, launch_start);
  GoodputWalk walk(launch_start, launch_end);
  bool after_failure = false;
  for (const auto& a : attempts) {
    GoodputAccount g;
    const double from = walk.cursor();
    GoodputAccountAttempt(a, after_failure, &walk, &g);
    g.wall_s = walk.cursor() - from;
    r.attempts.push_back(g);
    GoodputAddTo(g, &r.launch);
    after_failure = a.failed;
  }
  r.launch.other_s += walk.To(launch_end);
  r.launch.wall_s = launch_end - launch_start;
  return r;
}

void FailureTimes(const std::vector<NodeRecord>& nodes, const std::vector<int>& hang_ranks,
                  double end, double* failed_at, double* detected_at) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double own_end = kNone, first_stop = kNone, hung_beat = 0;
  for (const auto& n : nodes) {
    for (const auto& r : n.ranks) {
      if (r.stop_signal != 0 && r.stop_time > 0) first_stop = std::min(first_stop, r.stop_time);
      const bool ok = r.exit_code == 0 && r.signal == 0;
      if (!ok && r.stop_signal == 0 && r.end > 0) own_end = std::min(own_end, r.end);
    }
    for (const auto& p : n.progress) {
      if (std::find(hang_ranks.begin(), hang_ranks.end(), p.rank) != hang_ranks.end())
        hung_beat = std::max(hung_beat, p.time);
    }
  }
  if (!hang_ranks.empty() && hung_beat > 0) {
    *failed_at = hung_beat;
    *detected_at = std::min({own_end, first_stop, end});
  } else {
    *failed_at = std::min({own_end, first_stop, end});
    *detected_at = first_stop < kNone ? std::max(first_stop, *failed_at) : *failed_at;
  }
  *detected_at = std::max(*detected_at, *failed_at);
}

void BeatTracker::Observe(const std::vector<heartbeat::Heartbeat>& beats) {
  for (const auto& hb : beats) {
    if (hb.time < since_ || (hb.started > 0 && hb.started < since_)) continue;
    latest_[hb.rank] = hb;
  }
  if (latest_.empty()) return;
  if (followed_ < 0) followed_ = latest_.begin()->first;
  auto it = latest_.find(followed_);
  if (it == latest_.end()) return;
  const heartbeat::Heartbeat& hb = it->second;
  StepMark last = marks_.empty() ? StepMark{} : marks_.back();
  if (hb.step < 0) return;
  if (marks_.empty() || hb.step != last.step) {
    // The step changed at step_time; a save counted in the same poll ended later (at time).
    marks_.push_back({hb.step, hb.step_time, last.save_blocked_s, last.saves});
    last = marks_.back();
  }
  if (hb.saves != last.saves || hb.save_blocked_s != last.save_blocked_s)
    marks_.push_back({hb.step, std::max(hb.time, last.time), hb.save_blocked_s, hb.saves});
}

double BeatTracker::started() const {
  double t = 0;
  for (const auto& [rank, hb] : latest_) t = std::max(t, hb.started);
  return t;
}

double BeatTracker::train_start() const {
  double t = 0;
  for (const auto& [rank, hb] : latest_) t = std::max(t, hb.train_start);
  return t;
}

}  // namespace ek::launch
