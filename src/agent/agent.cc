#include "agent/agent.h"

#include <fmt/format.h>

#include <algorithm>

#include "agent/checkpoint_scan.h"
#include "core/env.h"
#include "core/process.h"
#include "telemetry/replay.h"

namespace ek::watch {

namespace {

class SourceFeed : public GpuFeed {
 public:
  SourceFeed(std::unique_ptr<telemetry::Source> source, Clock* clock)
      : source_(std::move(source)), clock_(clock) {}

  Status Update(double, double deadline) override {
    telemetry::Batch batch;
    Status st = source_->Poll(deadline, &batch);
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : batch.samples) {
      if (s.gpu < 0 || s.gpu >= telemetry::kMaxGpusPerHost) continue;
      latest_[s.gpu] = s;
    }
    problems_.clear();
    for (const auto& p : batch.problems) problems_.push_back(p.ToString());
    error_ = st.ok() ? "" : st.message();
    return st;
  }

  std::vector<GpuReading> Latest(double now, std::string* state) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<GpuReading> out;
    for (const auto& [gpu, s] : latest_) {
      GpuReading r;
      r.gpu = gpu;
      r.util_pct = s.util_pct;
      r.power_w = s.power_w;
      r.mem_used_mib = s.mem_used_mib;
      r.age_s = std::max(0.0, now - s.time);
      out.push_back(r);
    }
    *state = !error_.empty() ? error_ : out.empty() ? "no GPU readings yet" : "ok";
    return out;
  }

 private:
  std::unique_ptr<telemetry::Source> source_;
  Clock* clock_;
  std::mutex mu_;
  std::map<int, telemetry::Sample> latest_;
  std::vector<std::string> problems_;
  std::string error_;
};

class ReplayFeed : public GpuFeed {
 public:
  ReplayFeed(std::vector<telemetry::Sample> samples, double start, double from_s, bool hold)
      : samples_(std::move(samples)), start_(start), from_s_(from_s), hold_(hold) {
    t0_ = samples_.empty() ? 0 : samples_.front().time;
  }
  Status Update(double, double) override { return Status::Ok(); }

  std::vector<GpuReading> Latest(double now, std::string* state) override {
    double at = t0_ + from_s_ + (now - start_);  // recording time now
    std::map<int, const telemetry::Sample*> latest;
    for (const auto& s : samples_) {
      if (s.time > at) break;
      latest[s.gpu] = &s;
    }
    bool ended = !samples_.empty() && at > samples_.back().time;
    std::vector<GpuReading> out;
    for (const auto& [gpu, s] : latest) {
      GpuReading r;
      r.gpu = gpu;
      r.util_pct = s->util_pct;
      r.power_w = s->power_w;
      r.mem_used_mib = s->mem_used_mib;
      r.age_s = ended && hold_ ? 0 : std::max(0.0, at - s->time);
      out.push_back(r);
    }
    *state = out.empty() ? "replay has not reached its first sample" : "ok";
    return out;
  }

 private:
  std::vector<telemetry::Sample> samples_;
  double start_, from_s_, t0_ = 0;
  bool hold_;
};

}  // namespace

std::unique_ptr<GpuFeed> MakeSourceFeed(std::unique_ptr<telemetry::Source> source, Clock* clock) {
  return std::make_unique<SourceFeed>(std::move(source), clock);
}

Result<std::unique_ptr<GpuFeed>> MakeReplayFeed(const std::vector<std::string>& files,
                                                const std::string& host, double start,
                                                double from_s, bool hold) {
  EK_ASSIGN_OR_RETURN(auto source,
                      telemetry::ReplaySource::Open(files, telemetry::ReplayOptions{}));
  telemetry::Batch batch;
  EK_RETURN_IF_ERROR(source->Poll(0, &batch));
  std::string want = host;
  if (want.empty() && !source->hosts().empty()) want = source->hosts().front();
  std::vector<telemetry::Sample> mine;
  for (auto& s : batch.samples) {
    if (s.host == want) mine.push_back(std::move(s));
  }
  if (mine.empty()) {
    return InvalidArgumentError(fmt::format("replay: no samples for host '{}' (hosts: {})", want,
                                            fmt::join(source->hosts(), ", ")));
  }
  std::stable_sort(
      mine.begin(), mine.end(),
      [](const telemetry::Sample& a, const telemetry::Sample& b) { return a.time < b.time; });
  return std::unique_ptr<GpuFeed>(
      std::make_unique<ReplayFeed>(std::move(mine), start, from_s, hold));
}

Agent::Agent(AgentOptions options, std::unique_ptr<GpuFeed> feed, std::string no_feed_reason,
             Clock* clock)
    : options_(std::move(options)),
      feed_(std::move(feed)),
      no_feed_reason_(std::move(no_feed_reason)),
      clock_(clock) {}

void Agent::Sample() {
  if (!feed_) return;
  double now = clock_->Now();
  Status st = feed_->Update(now, now + 0.5);
  std::lock_guard<std::mutex> lock(mu_);
  feed_error_ = st.ok() ? "" : st.message();
}

AgentStatus Agent::Snapshot() {
  AgentStatus s;
  double now = clock_->Now();
  s.run = options_.run;
  s.host = options_.host;
  s.time = now;
  s.rank_base = options_.rank_base;
  if (feed_) {
    s.gpus = feed_->Latest(now, &s.telemetry);
  } else {
    s.telemetry = no_feed_reason_.empty() ? "no telemetry source" : no_feed_reason_;
  }
  for (auto& hb : heartbeat::ReadHeartbeatDir(options_.heartbeat_dir, &s.problems)) {
    RankReading r;
    r.alive = ProcessAlive(hb.pid);
    r.beat_age_s = std::max(0.0, now - hb.time);
    // A rank that has not finished a step yet (starting up) counts from its
    // last beat, not from the epoch: otherwise every start looks like a hang.
    r.step_age_s = std::max(0.0, now - (hb.step_time > 0 ? hb.step_time : hb.time));
    r.phase_age_s = hb.phase_time > 0 ? std::max(0.0, now - hb.phase_time) : -1;
    r.hb = std::move(hb);
    s.ranks.push_back(std::move(r));
  }
  s.checkpoint = ScanCheckpoints(options_.checkpoint_dir);
  if (s.checkpoint.newest_complete)
    s.checkpoint_complete_age_s = std::max(0.0, now - s.checkpoint.newest_complete->mtime);
  if (s.checkpoint.in_progress)
    s.checkpoint_progress_age_s = std::max(0.0, now - s.checkpoint.in_progress->mtime);
  // Written by node 0's launcher from the first attempt on: absent before, not a problem.
  if (!options_.goodput_path.empty()) {
    if (Env::Default()->Exists(options_.goodput_path)) {
      auto text = Env::Default()->ReadFile(options_.goodput_path);
      auto g = text.ok() ? heartbeat::ParseGoodputFile(*text, options_.goodput_path)
                         : Result<heartbeat::GoodputFile>(text.status());
      if (g.ok()) {
        s.goodput = std::move(*g);
      } else {
        s.problems.push_back(g.status().message());
      }
    }
  }
  return s;
}

}  // namespace ek::watch
