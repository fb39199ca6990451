// Drives a Classifier from a telemetry Source: maps samples to global ranks,
// keeps the sample-interval clock, and yields one assessed window per tick.
// Replay runs on the recording's time line as fast as it can; live sources run
// on the Clock. This is what `evenkeel triage` runs; `evenkeel watch` can run
// the same loop or drive a Classifier directly.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "telemetry/sample.h"
#include "triage/classifier.h"
#include "triage/profile.h"

namespace ek::triage {

struct SessionOptions {
  double interval_s = 1;  // one window per sample interval
  int gpus_per_host = 0;  // 0: from the data (largest GPU index + 1)
  ClassifierOptions classifier;
};

struct Window {
  Assessment assessment;
  std::vector<telemetry::Problem> problems;  // bad input met while filling this window
};

class Session {
 public:
  // `source` and `clock` must outlive the session.
  Session(telemetry::Source* source, Clock* clock, Profile profile, SessionOptions options);

  // The next window, or nullopt once the source has ended (replay exhausted,
  // child exited). An error when the source itself fails, and
  // (InvalidArgument) when a replay holds no usable sample at all.
  Result<std::optional<Window>> Next();

  // Known once the first samples have arrived.
  const telemetry::Topology& topology() const { return topology_; }
  const Classifier* classifier() const { return classifier_.get(); }

 private:
  Result<std::optional<Window>> NextReplay();
  Result<std::optional<Window>> NextLive();
  void SetTopology(const std::vector<telemetry::Sample>& samples);
  void Feed(const telemetry::Sample& s, std::vector<telemetry::Problem>* problems);
  Assessment Evaluate(double now);

  telemetry::Source* source_;
  Clock* clock_;
  Profile profile_;
  SessionOptions options_;
  telemetry::Topology topology_;
  std::unique_ptr<Classifier> classifier_;
  bool started_ = false;
  bool ended_ = false;
  double next_tick_ = 0;
  std::vector<telemetry::Sample> replay_;
  size_t replay_next_ = 0;
  std::vector<telemetry::Problem> pending_problems_;
  std::set<std::pair<std::string, int>> reported_outside_;
};

}  // namespace ek::triage
