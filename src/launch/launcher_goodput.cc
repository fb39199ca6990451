// Node 0's goodput account (docs/launch.md "Goodput"): the heartbeats polled while
// an attempt runs, each ended attempt's timeline (launch/goodput.h computes the
// split), and the running goodput.json the agent exports.
#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/file.h"
#include "heartbeat/goodput_account.h"
#include "heartbeat/heartbeat.h"
#include "launch/goodput.h"
#include "launch/launcher_internal.h"

namespace ek::launch::detail {

namespace {

inline constexpr double kBeatPollS = 0.5;      // how often the heartbeats are read
inline constexpr double kGoodputEveryS = 5.0;  // how often goodput.json is rewritten

}  // namespace

void Launcher::TrackBeats(int attempt, double spawn, bool force) {
  if (attempt != tracked_attempt_) {
    tracker_ = BeatTracker(spawn - 1);  // a beat before the spawn is an earlier attempt's
    tracked_attempt_ = attempt;
    tracked_spawn_ = spawn;
    beats_read_at_ = goodput_written_at_ = 0;
  }
  const double now = Now();
  if (!force && now - beats_read_at_ < kBeatPollS) return;
  beats_read_at_ = now;
  std::vector<std::string> problems;  // a beat being rewritten: the next poll reads it
  tracker_.Observe(heartbeat::ReadHeartbeatDir(paths_.heartbeat, &problems, o_.files));
  if (force || now - goodput_written_at_ < kGoodputEveryS) return;
  goodput_written_at_ = now;
  AttemptTimeline running;
  running.attempt = attempt;
  running.spawn = tracked_spawn_;
  running.started = tracker_.started();
  running.train_start = tracker_.train_start();
  running.marks = tracker_.marks();
  running.end = now;
  WriteGoodputFile(attempt, true, LaunchGoodput(now, &running));
}

void Launcher::CountGoodput(AttemptSummary* a, const std::vector<NodeRecord>& records,
                            const Checkpoint& before) {
  AttemptTimeline t;
  t.attempt = a->attempt;
  t.spawn = a->start;
  t.end = a->end;
  if (tracked_attempt_ == a->attempt) {
    t.started = tracker_.started();
    t.train_start = tracker_.train_start();
    t.marks = tracker_.marks();
  }
  if (!(t.started > 0)) {
    // An older trainer's heartbeats say nothing of it: the wrappers' starts.
    for (const auto& n : records) {
      for (const auto& r : n.ranks) t.started = std::max(t.started, r.start);
    }
  }
  t.resumed_from = before.step;
  if (a->outcome != Outcome::kCompleted) {
    // What the next attempt resumes from; work after it is done again.
    t.kept_through = a->checkpoint_after;
  }
  t.failed = a->outcome == Outcome::kFailed;
  if (t.failed) FailureTimes(records, a->hang.ranks, a->end, &t.failed_at, &t.detected_at);
  timelines_.push_back(t);
  GoodputResult r = ComputeGoodput(started_, a->end, timelines_);
  if (!r.attempts.empty()) a->goodput = r.attempts.back();
  WriteGoodputFile(a->attempt, false, r.launch);
}

GoodputAccount Launcher::LaunchGoodput(double now, const AttemptTimeline* running) const {
  std::vector<AttemptTimeline> all = timelines_;
  if (running) all.push_back(*running);
  return ComputeGoodput(started_, now, all).launch;
}

void Launcher::WriteGoodputFile(int attempt, bool running, const GoodputAccount& g) {
  heartbeat::GoodputFile f{cluster_.run_id, Now(), attempt, running, g};
  const std::string path = paths_.session + "/goodput.json";
  // The agent's gauges only: a launch does not stop for it.
  if (Status st = WriteFileAtomic(path, heartbeat::GoodputFileToJson(f), o_.files); !st.ok())
    say_("launch: warning: goodput not written: " + st.message());
}

}  // namespace ek::launch::detail
