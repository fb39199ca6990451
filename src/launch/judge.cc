#include "launch/judge.h"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/process.h"

namespace ek::launch {

std::string_view FrVerdictName(FrVerdict v) {
  switch (v) {
    case FrVerdict::kNotRead:
      return "not read";
    case FrVerdict::kNoDumps:
      return "no dumps";
    case FrVerdict::kUnreadable:
      return "unreadable";
    case FrVerdict::kUndecided:
      return "undecided";
    case FrVerdict::kConclusive:
      return "conclusive";
  }
  return "?";
}

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "?";
}

NodeFacts FactsOf(const NodeRecord& n) {
  NodeFacts f;
  f.node = n.node;
  f.reported = true;
  f.error = n.error;
  f.torchrun_code = n.torchrun_code;
  f.torchrun_signal = n.torchrun_signal;
  f.cancelled = n.cancelled;
  for (const auto& r : n.ranks) {
    f.ranks.push_back(
        {r.rank, r.exit_code, r.signal, r.end, r.stop_signal, r.state_at_stop, r.inferred});
  }
  f.causes = n.causes;
  f.progress = n.progress;
  return f;
}

bool EveryProcessSucceeded(const JudgeFacts& f) {
  return !f.nodes.empty() && std::all_of(f.nodes.begin(), f.nodes.end(), [](const NodeFacts& n) {
    return n.reported && n.unreadable.empty() && n.error.empty() && !n.cancelled &&
           n.torchrun_code == 0 && n.torchrun_signal == 0;
  });
}

namespace {

// What went wrong with the processes, at most six items: "node 1: cannot
// start torchrun ...", "rank 3 killed by SIGKILL", "node 1 did not report".
std::string ProcessFailures(const JudgeFacts& f) {
  std::vector<std::string> why;
  for (const auto& n : f.nodes) {
    if (!n.reported) {
      why.push_back(fmt::format("node {} did not report", n.node));
      continue;
    }
    if (!n.error.empty()) why.push_back(fmt::format("node {}: {}", n.node, n.error));
    bool rank_failed = false;
    for (const auto& r : n.ranks) {
      ExitStatus es{r.exit_code, r.signal};
      if (!es.ok()) {
        auto c = std::find_if(n.causes.begin(), n.causes.end(),
                              [&](const RankCause& x) { return x.rank == r.rank; });
        why.push_back(c != n.causes.end() ? fmt::format("rank {}: {}", r.rank, c->cause)
                                          : fmt::format("rank {} {}", r.rank, es.ToString()));
        rank_failed = true;
      }
    }
    ExitStatus torchrun{n.torchrun_code, n.torchrun_signal};
    if (!rank_failed && n.error.empty() && !torchrun.ok()) {
      why.push_back(fmt::format("node {}: torchrun {}", n.node, torchrun.ToString()));
    }
  }
  if (f.nodes.empty()) why.push_back("no node reported");
  if (why.empty()) return "torchrun failed";
  return fmt::format(
      "{}",
      fmt::join(why.begin(),
                why.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(why.size(), 6)), ", "));
}

// The trainer refused the configuration (exit 2: usage, run file, data, tokenizer)
// on some rank, and nothing else failed but ranks torchrun then stopped with SIGTERM.
bool ConfigurationRefused(const JudgeFacts& f) {
  if (f.nodes.empty()) return false;
  bool refused = false;
  for (const auto& n : f.nodes) {
    if (!n.reported || !n.error.empty()) return false;
    for (const auto& r : n.ranks) {
      if (r.signal == 0 && r.exit_code == 2) {
        refused = true;
      } else if (!(r.signal == 0 && r.exit_code == 0) && r.signal != SIGTERM) {
        return false;
      }
    }
  }
  return refused;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Failed on its own: not stopped by torchrun first, not an inference.
bool FailedOnItsOwn(const RankFacts& r) {
  return !ExitStatus{r.exit_code, r.signal}.ok() && r.stop_signal == 0 && !r.inferred;
}

}  // namespace

Hang FindHang(const JudgeFacts& f) {
  struct Seen {
    const RankFacts* rank;
    const NodeFacts* node;
  };
  std::vector<Seen> ranks;
  for (const auto& n : f.nodes) {
    if (!n.reported || !n.unreadable.empty()) continue;
    for (const auto& r : n.ranks) ranks.push_back({&r, &n});
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const Seen& a, const Seen& b) { return a.rank->rank < b.rank->rank; });
  // When the others failed: the first rank to fail on its own, and whether it timed out.
  double failed_at = 0;
  int first_failed = -1;
  bool timed_out = false, failed_dumped = false;
  for (const auto& s : ranks) {
    if (!FailedOnItsOwn(*s.rank)) continue;
    if (s.rank->end > 0 && (failed_at == 0 || s.rank->end < failed_at)) {
      failed_at = s.rank->end;
      first_failed = s.rank->rank;
    }
    for (const auto& c : s.node->causes) {
      std::string lc = Lower(c.cause);
      if (c.rank == s.rank->rank &&
          (lc.find("timed out") != std::string::npos || lc.find("timeout") != std::string::npos)) {
        timed_out = true;
      }
    }
    if (f.fr_dumps.count(s.rank->rank)) failed_dumped = true;
  }
  auto stuck = [](const RankFacts& r) {
    return r.state_at_stop == "T" || r.state_at_stop == "t" || r.state_at_stop == "D";
  };
  std::vector<Seen> named;
  for (const auto& s : ranks) {
    if (!FailedOnItsOwn(*s.rank) && stuck(*s.rank)) named.push_back(s);
  }
  if (named.empty() && timed_out && failed_dumped) {
    for (const auto& s : ranks) {
      const RankFacts& r = *s.rank;
      if (!FailedOnItsOwn(r) && !ExitStatus{r.exit_code, r.signal}.ok() &&
          !f.fr_dumps.count(r.rank))
        named.push_back(s);
    }
  }
  Hang h;
  bool have_step = false;
  std::vector<std::string> clauses;
  for (const auto& s : named) {
    const RankFacts& r = *s.rank;
    auto hb = std::find_if(s.node->progress.begin(), s.node->progress.end(),
                           [&](const RankProgress& p) { return p.rank == r.rank; });
    const bool beat = hb != s.node->progress.end();
    std::vector<std::string> evidence;
    std::string at = "at an unknown step";
    if (beat) {
      at = hb->step >= 0 ? fmt::format("at step {}", hb->step) : "before its first step";
      if (!have_step || hb->step < h.step) h.step = hb->step;
      have_step = true;
      if (failed_at > 0) {
        evidence.push_back(fmt::format(
            "last heartbeat {:.0f} s before {}", std::max(0.0, failed_at - hb->time),
            timed_out ? "the others' timeout" : fmt::format("rank {} failed", first_failed)));
      }
    } else {
      evidence.push_back("no heartbeat in this attempt");
    }
    if (!r.state_at_stop.empty()) {
      evidence.push_back(DescribeProcessState(r.state_at_stop));
    } else if (r.inferred) {
      evidence.push_back("its wrapper was killed before the trainer's end was seen");
    } else if (r.stop_signal) {
      evidence.push_back("alive when torchrun stopped it");
    }
    if (auto d = f.fr_dumps.find(r.rank); d != f.fr_dumps.end()) {
      evidence.push_back(fmt::format("its dump ends at seq {}", d->second));
    } else if (!f.fr_dumps.empty() || f.fr == FrVerdict::kNoDumps) {
      evidence.push_back("no dump");
    }
    h.ranks.push_back(r.rank);
    if (clauses.size() < 4) {
      clauses.push_back(fmt::format("rank {} stopped progressing {} ({})", r.rank, at,
                                    fmt::join(evidence, "; ")));
    }
  }
  if (h.ranks.size() > clauses.size())
    clauses.push_back(fmt::format("{} more", h.ranks.size() - clauses.size()));
  h.line = fmt::format("{}", fmt::join(clauses, "; "));
  return h;
}

namespace {

// The first failed rank's cause that names a storage error, "" when none does. Matched
// on the C library's message (strerror), which Python's OSError ("[Errno 28] No space
// left on device: ..."), our C++ core and Rust's std::io (safetensors: "Os { code: 28,
// kind: StorageFull, message: \"No space left on device\" }") all carry.
std::string StorageCause(const JudgeFacts& f) {
  static constexpr std::string_view kStorage[] = {"No space left on device", "Disk quota exceeded",
                                                  "Read-only file system",   "Input/output error",
                                                  "Operation not permitted", "Permission denied"};
  for (const auto& n : f.nodes) {
    for (const auto& c : n.causes) {
      for (std::string_view what : kStorage) {
        if (c.cause.find(what) != std::string::npos)
          return fmt::format("rank {}: {}", c.rank, what);
      }
    }
  }
  return "";
}

Judgement Stop(Judgement j, Branch branch, int exit_code, std::string reason) {
  j.branch = branch;
  j.decision = {Action::kStop, exit_code, std::move(reason), 0, 0};
  return j;
}

}  // namespace

Judgement Judge(const JudgeFacts& f) {
  Judgement j;
  j.no_progress = f.no_progress;
  if (std::any_of(f.nodes.begin(), f.nodes.end(), [](const NodeFacts& n) { return n.cancelled; })) {
    j.outcome = Outcome::kCancelled;
    return Stop(j, Branch::kCancelled, kExitCancelled, "cancelled by a signal");
  }
  std::vector<std::string> unreadable;
  for (const auto& n : f.nodes) {
    if (!n.unreadable.empty()) unreadable.push_back(n.unreadable);
  }
  if (!unreadable.empty()) {
    // Not a failure a restart can mend: every node stops, as for any bad input.
    j.failure = Failure::kUnreadableRecord;
    return Stop(j, Branch::kUnreadableRecord, kExitBadInput,
                fmt::format("unreadable node record(s): {}", fmt::join(unreadable, " | ")));
  }
  std::string why;
  if (EveryProcessSucceeded(f)) {
    const CheckpointFacts& c = f.verified;
    const bool planned = f.planned_steps <= 0 || c.step == f.planned_steps;
    if (c.step >= 0 && c.final && planned) {
      j.outcome = Outcome::kCompleted;
      j.branch = Branch::kDone;
      j.decision = {
          Action::kDone, kExitCompleted,
          fmt::format("the final checkpoint {} (step {}) verifies with checksums", c.path, c.step),
          0, 0};
      return j;
    }
    const std::string plan =
        f.planned_steps > 0 ? fmt::format(" ({} steps planned)", f.planned_steps) : "";
    if (c.step < 0) {
      j.failure = Failure::kNoCheckpoint;
      why = "every rank exited 0 but no checkpoint verifies";
    } else if (!c.final) {
      j.failure = Failure::kNotFinal;
      why = fmt::format(
          "every rank exited 0 but the newest verified checkpoint (step {}) is not the final one{}",
          c.step, plan);
    } else {
      j.failure = Failure::kNotAtPlannedStep;
      why = fmt::format(
          "every rank exited 0 but the final checkpoint is at step {}, not the planned last step{}",
          c.step, plan);
    }
  } else {
    j.failure = Failure::kProcesses;
    why = ProcessFailures(f);
    j.hang = FindHang(f);
    if (!j.hang.ranks.empty()) why = j.hang.line + "; " + why;
  }
  j.outcome = Outcome::kFailed;
  const bool progress = f.after.step > f.before.step;
  j.no_progress = progress ? 0 : f.no_progress + 1;
  if (ConfigurationRefused(f)) {
    return Stop(
        j, Branch::kRefused, kExitBadInput,
        "the trainer refused the configuration (exit 2; a restart would refuse again): " + why);
  }
  if (f.fr == FrVerdict::kConclusive) {
    return Stop(j, Branch::kDesync, kExitDoNotRequeue,
                "deterministic collective desync (a restart would deadlock again): " + f.fr_line);
  }
  if (j.no_progress >= f.max_no_progress) {
    // Storage that refuses the trainer's writes (full, read-only, not permitted) fails every
    // attempt the same way until someone fixes it, and then a requeue works: an I/O error
    // (74, "after a fix"), not a do-not-requeue.
    if (std::string storage = StorageCause(f); !storage.empty()) {
      return Stop(j, Branch::kNoProgress, kExitIoError,
                  fmt::format("{} attempt(s) in a row without a new verified checkpoint "
                              "(retry.max_no_progress = {}), "
                              "failing on storage ({}): fix the storage, then requeue; last: {}",
                              j.no_progress, f.max_no_progress, storage, why));
    }
    return Stop(j, Branch::kNoProgress, kExitDoNotRequeue,
                fmt::format("{} attempt(s) in a row without a new verified checkpoint "
                            "(retry.max_no_progress = {}); last: {}",
                            j.no_progress, f.max_no_progress, why));
  }
  if (f.restarts >= f.max_restarts) {
    return Stop(j, Branch::kBudgetSpent, kExitBudgetSpent,
                fmt::format("restart budget spent (retry.max_restarts = {}); last: {}",
                            f.max_restarts, why));
  }
  // 2^restarts may overflow to inf, which the cap takes (0 x inf would be NaN: no wait is no wait).
  const double backoff =
      f.backoff_s <= 0 ? 0.0 : std::min(f.backoff_max_s, f.backoff_s * std::pow(2.0, f.restarts));
  j.branch = Branch::kRestart;
  j.decision = {
      Action::kRestart, kExitCompleted,
      fmt::format("{}; restarting from {}{} after {:.0f} s", why,
                  f.after.step >= 0 ? fmt::format("checkpoint step {}", f.after.step)
                                    : std::string("the start"),
                  f.skipped.empty() ? "" : fmt::format(" ({})", fmt::join(f.skipped, "; ")),
                  backoff),
      f.attempt + 1, backoff};
  return j;
}

}  // namespace ek::launch
