// Node 0 after an attempt: its facts (every node's records, the checkpoints, the
// flight recorder) gathered for Judge (judge.h), the pure function that decides.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/file.h"
#include "flightrec/analyzer.h"
#include "flightrec/loader.h"
#include "flightrec/report.h"
#include "launch/cause.h"
#include "launch/launcher_internal.h"

namespace ek::launch::detail {

AttemptSummary Launcher::JudgeAttempt(int attempt, const std::vector<NodeFacts>& nodes,
                                      const std::vector<NodeRecord>& records,
                                      const Checkpoint& before, int restarts, int* no_progress) {
  AttemptSummary a;
  a.attempt = attempt;
  a.nodes = records;
  a.start = 1e300;
  for (const auto& n : records) {
    a.causes.insert(a.causes.end(), n.causes.begin(), n.causes.end());
    a.start = std::min(a.start, n.start);
    a.end = std::max(a.end, n.end);
    a.step_reached = std::max(a.step_reached, n.step_reached);
  }
  if (records.empty()) a.start = a.end = Now();
  // The newest checkpoint that verifies with checksums: progress, done, and the next attempt's
  // resume point.
  Checkpoint after;
  if (auto pick = ResumePoint(paths_.ckpt_dir, WantedResume()); pick.ok()) {
    after = *pick;
    resume_ = after;
  } else {
    say_("launch: warning: " +
         pick.status().message());  // the next attempt asks again, and stops on it
  }
  auto facts_of = [](const Checkpoint& c) { return CheckpointFacts{c.step, c.final, c.path}; };
  JudgeFacts f;
  f.attempt = attempt;
  f.nodes = nodes;
  f.planned_steps = has_plan_ ? static_cast<int64_t>(plan_.total_steps) : 0;
  f.before = facts_of(before);
  f.after = facts_of(after);
  f.verified = f.after;  // `after` is verified with checksums
  f.skipped = after.skipped;
  f.restarts = restarts;
  f.no_progress = *no_progress;
  f.max_restarts = run_.max_restarts;
  f.max_no_progress = run_.max_no_progress;
  f.backoff_s = run_.retry_backoff_s;
  f.backoff_max_s = run_.retry_backoff_max_s;
  // Why it failed, if it did: the flight recorder, as `evenkeel fr` reads it.
  const std::string fr_dir = paths_.Attempt(attempt) + "/fr";
  if (ListNames(o_.files, fr_dir).empty()) {
    f.fr = FrVerdict::kNoDumps;
    f.fr_line = "no flight-recorder dumps";
  } else {
    auto load = flightrec::LoadDumps(fr_dir, {});
    if (load.ok() && !load->dumps.empty()) {
      flightrec::Analysis analysis = flightrec::Analyze(load->dumps);
      f.fr = flightrec::Conclusive(analysis) ? FrVerdict::kConclusive : FrVerdict::kUndecided;
      f.fr_line = flightrec::VerdictLine(*load, analysis);
      for (const auto& d : load->dumps) {
        int64_t last = -1;
        for (const auto& e : d.entries) last = std::max(last, e.collective_seq_id);
        if (d.rank >= 0 && d.rank <= std::numeric_limits<int>::max())
          f.fr_dumps[static_cast<int>(d.rank)] = last;
      }
    } else {
      f.fr = FrVerdict::kUnreadable;
      f.fr_line = load.ok() ? "no readable flight-recorder dump" : load.status().message();
    }
  }
  Judgement j = Judge(f);
  *no_progress = j.no_progress;
  a.outcome = j.outcome;
  a.decision = j.decision;
  a.hang = j.hang;
  a.checkpoint_before = before.step;
  a.checkpoint_after = after.step;
  const int world = run_.world();
  a.gpu_hours = world * std::max(0.0, a.end - a.start) / 3600;
  if (j.outcome == Outcome::kFailed) {
    a.fr_verdict = f.fr_line;
    a.fr_conclusive = f.fr == FrVerdict::kConclusive;
    double saved_at = after.step > before.step ? std::max(a.start, after.mtime) : a.start;
    a.gpu_hours_lost = world * std::max(0.0, a.end - saved_at) / 3600;
  }
  return a;
}

}  // namespace ek::launch::detail
