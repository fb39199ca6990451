#include "watch/detectors.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/json_out.h"

namespace ek::watch {

std::string_view KindName(Kind k) {
  switch (k) {
    case Kind::kCompletion:
      return "completion";
    case Kind::kCrash:
      return "crash";
    case Kind::kHang:
      return "hang";
    case Kind::kDeadlock:
      return "deadlock";
    case Kind::kThroughput:
      return "throughput";
    case Kind::kBlind:
      return "blind";
  }
  return "unknown";
}

namespace {

std::vector<int64_t> AsInt64(const std::vector<int>& v) { return {v.begin(), v.end()}; }

std::string Dur(double s) { return triage::FormatDuration(std::max(0.0, s)); }

// A save, or the barrier before it: the step does not advance, and the hang
// limit allows for it.
bool Saving(const Heartbeat& hb) {
  PhaseKind k = KindOfPhase(hb.phase);
  return k == PhaseKind::kCheckpoint || k == PhaseKind::kBarrier;
}

// "forward of step 36", "save_barrier after step 35".
std::string PhaseText(const Heartbeat& hb) {
  int64_t pos = PositionOf(hb);
  return KindOfPhase(hb.phase) == PhaseKind::kTraining
             ? fmt::format("{} of step {}", hb.phase, pos)
             : fmt::format("{} after step {}", hb.phase, pos);
}

}  // namespace

Detectors::Detectors(WatchSettings settings, triage::Profile profile)
    : settings_(std::move(settings)), profile_(std::move(profile)) {}

int Detectors::world() const { return topology_.world(); }

int Detectors::HostIndex(const std::string& host, const std::string& target) {
  for (size_t i = 0; i < host_order_.size(); ++i) {
    if (host_order_[i] == (settings_.hosts.empty() ? target : host)) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Detectors::HostsOf(const std::vector<int>& ranks) const {
  std::set<std::string> hosts;
  for (int r : ranks) {
    auto it = ranks_.find(r);
    if (it != ranks_.end()) {
      hosts.insert(it->second.host);
    } else if (int node = topology_.NodeOf(r); node >= 0) {
      hosts.insert(topology_.HostOf(node));
    }
  }
  return {hosts.begin(), hosts.end()};
}

void Detectors::FeedTriage(double now, const AgentPoll& p) {
  (void)now;
  int hi = HostIndex(p.status.host, p.target);
  if (hi < 0) return;
  for (const GpuReading& g : p.status.gpus) {
    if (g.gpu < 0 || g.gpu >= topology_.gpus_per_node()) continue;
    telemetry::Sample s;
    s.time = p.received - g.age_s;
    s.host = p.status.host;
    s.gpu = g.gpu;
    s.util_pct = g.util_pct;
    s.power_w = g.power_w;
    s.mem_used_mib = g.mem_used_mib;
    classifier_->Observe(topology_.FirstRank(hi) + g.gpu, s);
  }
}

std::vector<Finding> Detectors::Evaluate(double now, const std::vector<AgentPoll>& polls) {
  if (host_order_.empty()) {
    if (!settings_.hosts.empty()) {
      host_order_ = settings_.hosts;
    } else {
      for (const auto& p : polls) host_order_.push_back(p.target);
    }
    topology_ = run::Topology::FromHosts(host_order_, settings_.gpus_per_node);
  }
  if (!classifier_) {
    triage::ClassifierOptions co;
    co.stale_after_s = std::max(3.0, 3 * settings_.poll_s);
    classifier_ = std::make_unique<triage::Classifier>(profile_, co, std::max(1, world()));
  }
  bool in_checkpoint = false;
  for (const auto& p : polls) {
    HostSeen& h = hosts_[p.target];
    if (h.first_poll == 0) h.first_poll = now;
    if (!p.ok) {
      h.last_error = p.error;
      continue;
    }
    h.last_ok = p.received;
    h.last_error.clear();
    FeedTriage(now, p);
    for (const RankReading& r : p.status.ranks) {
      RankSeen& seen = ranks_[r.hb.rank];
      seen.r = r;
      seen.host = p.status.host;
      seen.received = p.received;
      if (Saving(r.hb)) {
        in_checkpoint = true;
        seen.checkpoint_seen_at = now;
      }
    }
    const auto& ck = p.status.checkpoint;
    if (ck.newest_complete &&
        (!newest_complete_ || ck.newest_complete->step > newest_complete_->step)) {
      newest_complete_ = ck.newest_complete;
    }
    if (ck.in_progress && p.status.checkpoint_progress_age_s >= 0 &&
        p.status.checkpoint_progress_age_s < settings_.checkpoint_allowance_s) {
      in_checkpoint = true;
    }
  }
  // The last known phase counts too: a poll that timed out this round must not
  // turn a rank that is saving into a hang.
  for (const auto& [rank, seen] : ranks_) {
    if (Saving(seen.r.hb)) in_checkpoint = true;
  }
  triage::Assessment a = classifier_->Evaluate(now);
  last_assessment_ = a;
  if (a.verdict == triage::Verdict::kCheckpoint) in_checkpoint = true;

  if (first_rank_seen_ == 0 && !ranks_.empty()) first_rank_seen_ = now;
  std::vector<Finding> out;
  Blind(now, polls, &out);
  Missing(now, &out);
  bool done = Completion(now, &out);
  if (done) return out;
  bool crashed = Crash(now, &out);
  bool desync = !crashed && Desync(now, &out);
  if (!crashed && !desync) Hang(now, in_checkpoint, &out);
  if (!desync && a.verdict == triage::Verdict::kDeadlockSuspect) {
    Finding f;
    f.kind = Kind::kDeadlock;
    f.key = "deadlock";
    f.severity = "critical";
    f.ranks = a.ranks;
    f.hosts = HostsOf(a.ranks);
    f.since = a.since;
    f.summary = fmt::format(
        "deadlock suspected: rank(s) {} idle while the rest wait at floor power, {} samples",
        CompactRanges(AsInt64(a.ranks)), a.samples);
    f.evidence = a.reason;
    f.gpu_hours = world() * (now - a.since) / 3600;
    out.push_back(std::move(f));
  }
  Throughput(now, a, &out);
  return out;
}

void Detectors::Blind(double now, const std::vector<AgentPoll>& polls, std::vector<Finding>* out) {
  for (size_t i = 0; i < polls.size(); ++i) {
    const AgentPoll& p = polls[i];
    HostSeen& h = hosts_[p.target];
    if (!p.ok || p.status.telemetry == "ok") {
      h.no_telemetry_since = 0;
    } else if (h.no_telemetry_since == 0) {
      h.no_telemetry_since = p.received;
    }
    std::string why;
    double since = 0;
    if (!p.ok) {
      since = h.last_ok > 0 ? h.last_ok : h.first_poll;
      if (now - since < settings_.stale_after_s) continue;
      why = fmt::format("agent {} unreachable for {}: {}", p.target, Dur(now - since), p.error);
    } else {
      double oldest = 0;
      for (const auto& g : p.status.gpus) oldest = std::max(oldest, g.age_s);
      if (p.status.telemetry != "ok") {
        // An agent starting up has no readings for a moment: blind only once it lasts.
        if (p.received - h.no_telemetry_since < settings_.stale_after_s) continue;
        why = fmt::format("agent {} has no GPU telemetry: {}", p.target, p.status.telemetry);
        oldest = p.received - h.no_telemetry_since;
      } else if (oldest > settings_.stale_after_s) {
        why =
            fmt::format("agent {} GPU readings stale: the oldest is {} old", p.target, Dur(oldest));
      } else {
        continue;
      }
      since = p.received - oldest;
    }
    Finding f;
    f.kind = Kind::kBlind;
    // Agents are given in node order, so a silent one is still known by position.
    int hi = p.ok ? HostIndex(p.status.host, p.target)
                  : (i < host_order_.size() ? static_cast<int>(i) : -1);
    std::string host = p.ok ? p.status.host : hi >= 0 ? host_order_[hi] : p.target;
    f.key = "blind:" + host;
    f.severity = "warning";
    f.hosts = {host};
    if (hi >= 0) f.ranks = topology_.RanksOf(hi);
    f.since = since;
    f.summary = "blind: " + why + " (not known to be healthy)";
    f.evidence = why;
    f.gpu_hours = f.ranks.size() * (now - since) / 3600;
    out->push_back(std::move(f));
  }
}

// Ranks the run file promises (hosts x gpus_per_node) that never wrote a
// heartbeat, once the run has been beating for hang_floor_s: a rank that died
// before its first beat is otherwise invisible. Reported as blind (we cannot
// see it), per host.
void Detectors::Missing(double now, std::vector<Finding>* out) {
  if (first_rank_seen_ == 0 || now - first_rank_seen_ < settings_.hang_floor_s) return;
  for (size_t hi = 0; hi < host_order_.size(); ++hi) {
    std::vector<int> missing;
    for (int rank : topology_.RanksOf(static_cast<int>(hi))) {
      if (!ranks_.count(rank)) missing.push_back(rank);
    }
    if (missing.empty()) continue;
    Finding f;
    f.kind = Kind::kBlind;
    f.key = "missing:" + host_order_[hi];
    f.severity = "warning";
    f.ranks = missing;
    f.hosts = {host_order_[hi]};
    f.since = first_rank_seen_;
    f.summary = fmt::format("blind: rank(s) {} on {} never wrote a heartbeat",
                            CompactRanges(AsInt64(missing)), host_order_[hi]);
    f.evidence = fmt::format("{} of {} ranks reporting; run beating for {}", ranks_.size(), world(),
                             Dur(now - first_rank_seen_));
    f.gpu_hours = missing.size() * (now - first_rank_seen_) / 3600;
    out->push_back(std::move(f));
  }
}

bool Detectors::Completion(double now, std::vector<Finding>* out) {
  if (!completed_ && newest_complete_) {
    int64_t final_step = settings_.final_step;
    for (const auto& [rank, seen] : ranks_)
      final_step = std::max(final_step, seen.r.hb.total_steps);
    int64_t max_step = -1;
    bool all_done = !ranks_.empty();
    for (const auto& [rank, seen] : ranks_) {
      max_step = std::max(max_step, seen.r.hb.step);
      all_done = all_done && seen.r.hb.phase == "done";
    }
    if (final_step > 0 && newest_complete_->step >= final_step) {
      completion_evidence_ =
          fmt::format("checkpoint {} (step {}, {} files, {} bytes) is complete; final step {}",
                      newest_complete_->name, newest_complete_->step, newest_complete_->files,
                      newest_complete_->bytes, final_step);
      completed_ = true;
    } else if (final_step <= 0 && all_done && newest_complete_->step >= max_step) {
      completion_evidence_ =
          fmt::format("every rank finished at step {}; checkpoint {} is complete", max_step,
                      newest_complete_->name);
      completed_ = true;
    }
    if (completed_) completed_at_ = now;
  }
  if (!completed_) return false;
  Finding f;
  f.kind = Kind::kCompletion;
  f.key = "completion";
  f.severity = "info";
  for (const auto& [rank, seen] : ranks_) f.ranks.push_back(rank);
  f.hosts = HostsOf(f.ranks);
  f.since = completed_at_;
  f.summary = "run complete: " + completion_evidence_;
  f.evidence = completion_evidence_;
  out->push_back(std::move(f));
  return true;
}

bool Detectors::Crash(double now, std::vector<Finding>* out) {
  std::vector<int> dead;
  double since = now;
  std::string pids;
  for (const auto& [rank, seen] : ranks_) {
    if (seen.r.alive || seen.r.hb.phase == "done") continue;
    dead.push_back(rank);
    since = std::min(since, seen.received - seen.r.beat_age_s);
    if (pids.size() < 200)
      pids += fmt::format("{}rank {} pid {} at step {}", pids.empty() ? "" : ", ", rank,
                          seen.r.hb.pid, seen.r.hb.step);
  }
  if (dead.empty()) return false;
  Finding f;
  f.kind = Kind::kCrash;
  f.key = "crash";
  f.severity = "critical";
  f.ranks = dead;
  f.hosts = HostsOf(dead);
  f.since = since;
  f.summary = fmt::format("crash: rank(s) {} on {} gone without completion",
                          CompactRanges(AsInt64(dead)), fmt::join(f.hosts, ","));
  f.evidence =
      fmt::format("process gone: {}; last beat {} ago; newest complete checkpoint: {}", pids,
                  Dur(now - since), newest_complete_ ? newest_complete_->name : "none");
  f.gpu_hours = std::max<double>(world(), ranks_.size()) * (now - since) / 3600;
  out->push_back(std::move(f));
  return true;
}

void Detectors::Hang(double now, bool in_checkpoint, std::vector<Finding>* out) {
  if (ranks_.empty()) return;
  double progress_age = 1e300;
  std::vector<double> step_s;
  std::vector<int> stuck;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& [rank, seen] : ranks_) {
    double age = seen.r.step_age_s + (now - seen.received);
    // After a save ends the step has not advanced yet: count from the save's end,
    // so its length does not read as a hang (during the save the allowance applies).
    if (!Saving(seen.r.hb) && seen.checkpoint_seen_at > 0) {
      age = std::min(age, now - seen.checkpoint_seen_at);
    }
    progress_age = std::min(progress_age, age);
    if (seen.r.hb.step_s > 0) step_s.push_back(seen.r.hb.step_s);
    stuck.push_back(rank);
    lo = std::min(lo, seen.r.hb.step);
    hi = std::max(hi, seen.r.hb.step);
  }
  double median = 0;
  if (!step_s.empty()) {
    std::nth_element(step_s.begin(), step_s.begin() + step_s.size() / 2, step_s.end());
    median = step_s[step_s.size() / 2];
  }
  double threshold = std::max(settings_.hang_floor_s, settings_.hang_factor * median);
  double allowance = in_checkpoint ? settings_.checkpoint_allowance_s : 0;
  if (progress_age <= threshold + allowance) return;
  Finding f;
  f.kind = Kind::kHang;
  f.key = "hang";
  f.severity = "critical";
  f.ranks = stuck;
  f.hosts = HostsOf(stuck);
  f.since = now - progress_age;
  f.summary = fmt::format("hang: no rank advanced for {} (limit {}{}); steps {}", Dur(progress_age),
                          Dur(threshold), in_checkpoint ? " + checkpoint allowance" : "",
                          lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi));
  f.evidence = fmt::format(
      "no step advance for {:.1f} s; limit max(floor {:.0f} s, {:.0f} x step {:.2f} s) = {:.1f} "
      "s{}; "
      "ranks {} at step {}",
      progress_age, settings_.hang_floor_s, settings_.hang_factor, median, threshold,
      in_checkpoint ? fmt::format(" + {:.0f} s checkpoint allowance", allowance) : "",
      CompactRanges(AsInt64(stuck)), lo == hi ? std::to_string(lo) : fmt::format("{}..{}", lo, hi));
  f.gpu_hours = std::max<double>(world(), ranks_.size()) * progress_age / 3600;
  out->push_back(std::move(f));
}

// The field report's deadlock read from the ranks themselves: a rank has sat in
// the save barrier (or the save) for desync_s while other ranks are at another
// step or phase: they are training, it waits for them, and they will wait for
// it in their next collective. A healthy save has every rank in the barrier at
// the same step. Needs no GPU telemetry, and fires long before the hang limit
// or the collective timeout.
bool Detectors::Desync(double now, std::vector<Finding>* out) {
  struct Group {
    std::vector<int> ranks;
    Heartbeat hb;
  };
  std::map<std::pair<std::string, int64_t>, Group> groups;  // (phase, position) -> ranks
  double since = 0;
  bool waiting = false;
  for (const auto& [rank, seen] : ranks_) {
    if (!seen.r.alive || KindOfPhase(seen.r.hb.phase) == PhaseKind::kDone || seen.r.hb.step < 0)
      continue;
    Group& g = groups[{seen.r.hb.phase, PositionOf(seen.r.hb)}];
    g.ranks.push_back(rank);
    g.hb = seen.r.hb;
    if (Saving(seen.r.hb) && seen.r.phase_age_s >= 0) {
      double age = seen.r.phase_age_s + (now - seen.received);
      if (age >= settings_.desync_s) {
        waiting = true;
        since = since == 0 ? now - age : std::min(since, now - age);
      }
    }
  }
  if (!waiting || groups.size() < 2) return false;
  std::set<int64_t> positions;
  for (const auto& [key, g] : groups) positions.insert(key.second);
  if (positions.size() < 2) return false;  // same step everywhere: a save in progress, not a desync
  // The waiting groups first (the odd ranks), then the rest, largest first.
  std::vector<const Group*> order;
  for (const auto& [key, g] : groups) order.push_back(&g);
  std::sort(order.begin(), order.end(), [](const Group* x, const Group* y) {
    if (Saving(x->hb) != Saving(y->hb)) return Saving(x->hb);
    if (x->ranks.size() != y->ranks.size()) return x->ranks.size() < y->ranks.size();
    return x->ranks < y->ranks;
  });
  std::vector<std::string> parts;
  std::vector<int> odd;
  for (const Group* g : order) {
    parts.push_back(fmt::format("rank{} {} in {}", g->ranks.size() > 1 ? "s" : "",
                                CompactRanges(AsInt64(g->ranks)), PhaseText(g->hb)));
    if (Saving(g->hb)) odd.insert(odd.end(), g->ranks.begin(), g->ranks.end());
  }
  Finding f;
  f.kind = Kind::kDeadlock;
  f.key = "deadlock";
  f.severity = "critical";
  f.ranks = odd;
  f.hosts = HostsOf(odd);
  f.since = since;
  f.summary = fmt::format(
      "deadlock: {}; waiting {} (the save barrier's collective against a training collective)",
      fmt::join(parts, "; "), Dur(now - since));
  f.evidence = fmt::format(
      "ranks at {} different steps while rank(s) {} sat in {} for {:.1f} s (watch.desync_s {:.0f} "
      "s); "
      "a restart would meet the same uneven data: check evenfix",
      positions.size(), CompactRanges(AsInt64(odd)), order.front()->hb.phase, now - since,
      settings_.desync_s);
  f.gpu_hours = std::max<double>(world(), ranks_.size()) * (now - since) / 3600;
  out->push_back(std::move(f));
  return true;
}

void Detectors::Throughput(double now, const triage::Assessment& a, std::vector<Finding>* out) {
  double total = 0;
  int live = 0;
  for (const auto& [rank, seen] : ranks_) {
    if (!seen.r.alive || KindOfPhase(seen.r.hb.phase) != PhaseKind::kTraining || seen.r.hb.step < 0)
      continue;
    live++;
    total += seen.r.hb.tok_s;
  }
  bool low =
      settings_.throughput_floor_tok_s > 0 && live > 0 && total < settings_.throughput_floor_tok_s;
  if (low) {
    if (low_rounds_++ == 0) low_since_ = now;
  } else {
    low_rounds_ = 0;
  }
  if (a.verdict == triage::Verdict::kStarvation) {
    if (starved_rounds_++ == 0) starved_since_ = a.since;
  } else {
    starved_rounds_ = 0;
  }
  bool fire_low = low_rounds_ >= settings_.throughput_samples;
  bool fire_starved = starved_rounds_ >= settings_.throughput_samples;
  if (!fire_low && !fire_starved) return;
  Finding f;
  f.kind = Kind::kThroughput;
  f.key = "throughput";
  f.severity = "warning";
  std::vector<std::string> parts;
  if (fire_low) {
    for (const auto& [rank, seen] : ranks_) f.ranks.push_back(rank);
    f.since = low_since_;
    parts.push_back(
        fmt::format("{:.0f} tok/s over {} ranks, below the floor {:.0f} tok/s for {} samples",
                    total, live, settings_.throughput_floor_tok_s, low_rounds_));
  }
  if (fire_starved) {
    if (!fire_low) f.ranks = a.ranks;
    f.since = fire_low ? std::min(f.since, starved_since_) : starved_since_;
    parts.push_back(fmt::format("triage STARVATION for {} samples: {}", starved_rounds_, a.reason));
  }
  f.hosts = HostsOf(f.ranks);
  f.summary = fmt::format("throughput: {}", parts.front());
  f.evidence = fmt::format("{}", fmt::join(parts, "; "));
  // Throughput is not stopped progress: GPU-hours at stake are the share lost.
  double lost = settings_.throughput_floor_tok_s > 0 && fire_low
                    ? std::clamp(1 - total / settings_.throughput_floor_tok_s, 0.0, 1.0)
                    : 0.5;
  f.gpu_hours = std::max<double>(world(), ranks_.size()) * (now - f.since) / 3600 * lost;
  out->push_back(std::move(f));
}

std::string Detectors::SaveJson() const {
  JsonWriter w;
  w.BeginObject().Key("completed").Bool(completed_).Key("completed_at").Fixed(completed_at_, 3);
  w.Key("completion_evidence").Str(completion_evidence_).Key("low_rounds").Int(low_rounds_);
  w.Key("low_since").Fixed(low_since_, 3).Key("starved_rounds").Int(starved_rounds_);
  w.Key("starved_since").Fixed(starved_since_, 3).Key("hosts").BeginObject();
  for (const auto& [target, h] : hosts_) {
    w.Key(target).BeginObject().Key("first_poll").Fixed(h.first_poll, 3);
    w.Key("last_ok").Fixed(h.last_ok, 3).EndObject();
  }
  w.EndObject().EndObject();
  return w.str();
}

Status Detectors::LoadJson(std::string_view json, std::string_view where) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root))
    return CorruptError(fmt::format("{}: not JSON", where));
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, std::string(where)));
  return LoadFields(f);
}

Status Detectors::LoadFields(const JsonFields& f) {
  EK_RETURN_IF_ERROR(f.Bool("completed", &completed_));
  EK_RETURN_IF_ERROR(f.Num("completed_at", &completed_at_));
  EK_RETURN_IF_ERROR(f.Str("completion_evidence", &completion_evidence_));
  EK_RETURN_IF_ERROR(f.IntIn("low_rounds", 0, std::numeric_limits<int>::max(), &low_rounds_));
  EK_RETURN_IF_ERROR(f.Num("low_since", &low_since_));
  EK_RETURN_IF_ERROR(
      f.IntIn("starved_rounds", 0, std::numeric_limits<int>::max(), &starved_rounds_));
  EK_RETURN_IF_ERROR(f.Num("starved_since", &starved_since_));
  JsonFields hosts = f;
  EK_RETURN_IF_ERROR(f.Object("hosts", &hosts));
  for (std::string_view target : hosts.Keys()) {
    JsonFields h = hosts;
    EK_RETURN_IF_ERROR(hosts.Object(target, &h));
    HostSeen seen;
    EK_RETURN_IF_ERROR(h.Num("first_poll", &seen.first_poll));
    EK_RETURN_IF_ERROR(h.Num("last_ok", &seen.last_ok));
    hosts_[std::string(target)] = seen;
  }
  return Status::Ok();
}

}  // namespace ek::watch
