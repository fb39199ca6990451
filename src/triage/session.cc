#include "triage/session.h"

#include <fmt/format.h>

#include <algorithm>

namespace ek::triage {

Session::Session(telemetry::Source* source, Clock* clock, Profile profile, SessionOptions options)
    : source_(source), clock_(clock), profile_(std::move(profile)), options_(options) {}

void Session::SetTopology(const std::vector<telemetry::Sample>& samples) {
  int gpus = options_.gpus_per_host;
  if (gpus <= 0) {
    for (const auto& s : samples) gpus = std::max(gpus, s.gpu + 1);
  }
  if (gpus <= 0) return;
  topology_ = telemetry::Topology::FromHosts(source_->hosts(), gpus);
  classifier_ = std::make_unique<Classifier>(profile_, options_.classifier, topology_.world());
}

void Session::Feed(const telemetry::Sample& s, std::vector<telemetry::Problem>* problems) {
  int rank = topology_.Rank(s.host, s.gpu);
  if (rank < 0) {
    if (reported_outside_.emplace(s.host, s.gpu).second) {
      problems->push_back(
          {s.host, fmt::format("GPU {} is outside the rank layout ({} hosts x {} "
                               "GPUs); its samples are ignored",
                               s.gpu, topology_.hosts().size(), topology_.gpus_per_node())});
    }
    return;
  }
  classifier_->Observe(rank, s);
}

Assessment Session::Evaluate(double now) {
  if (classifier_) return classifier_->Evaluate(now);
  Assessment a;
  a.time = now;
  a.reason = "no samples yet from any host; missing data is never healthy";
  return a;
}

Result<std::optional<Window>> Session::Next() {
  if (ended_) return std::optional<Window>();
  return source_->live() ? NextLive() : NextReplay();
}

Result<std::optional<Window>> Session::NextReplay() {
  Window w;
  if (!started_) {
    started_ = true;
    telemetry::Batch batch;
    EK_RETURN_IF_ERROR(source_->Poll(0, &batch));
    replay_ = std::move(batch.samples);
    w.problems = std::move(batch.problems);
    if (replay_.empty()) {
      // Nothing to classify is bad input, not an UNKNOWN verdict: a verdict
      // says something about the run, and this says nothing.
      ended_ = true;
      if (w.problems.empty())
        return InvalidArgumentError("the recording holds no usable sample (no data rows)");
      return InvalidArgumentError(
          fmt::format("the recording holds no usable sample ({} bad row(s); the first: {})",
                      w.problems.size(), w.problems.front().ToString()));
    }
    SetTopology(replay_);
    // The first window closes one interval after the first sample.
    next_tick_ = replay_.front().time + options_.interval_s;
  }
  const double slack = 1e-6;  // timestamps are printed to the millisecond
  while (replay_next_ < replay_.size() && replay_[replay_next_].time <= next_tick_ + slack) {
    Feed(replay_[replay_next_++], &w.problems);
  }
  w.assessment = Evaluate(next_tick_);
  next_tick_ += options_.interval_s;
  if (replay_next_ == replay_.size()) ended_ = true;
  return std::optional<Window>(std::move(w));
}

Result<std::optional<Window>> Session::NextLive() {
  if (!started_) {
    started_ = true;
    next_tick_ = clock_->Now() + options_.interval_s;
  }
  telemetry::Batch batch;
  EK_RETURN_IF_ERROR(source_->Poll(next_tick_, &batch));
  clock_->SleepUntil(next_tick_);
  Window w;
  w.problems = std::move(batch.problems);
  if (!classifier_ && !batch.samples.empty()) SetTopology(batch.samples);
  if (classifier_ && options_.gpus_per_host <= 0) {
    // A live source's first batch can hold part of a round: grow the layout
    // (the classifier starts over, which costs at most the first windows).
    int widest = 0;
    for (const auto& s : batch.samples) {
      if (topology_.Rank(s.host, 0) >= 0) widest = std::max(widest, s.gpu + 1);
    }
    if (widest > topology_.gpus_per_node()) SetTopology(batch.samples);
  }
  if (classifier_) {
    for (const auto& s : batch.samples) Feed(s, &w.problems);
  }
  w.assessment = Evaluate(next_tick_);
  double now = clock_->Now();
  next_tick_ += options_.interval_s;
  // Fell behind (a slow scrape): skip the missed ticks rather than burst.
  if (next_tick_ < now) next_tick_ = now + options_.interval_s;
  if (batch.end) ended_ = true;
  return std::optional<Window>(std::move(w));
}

}  // namespace ek::triage
