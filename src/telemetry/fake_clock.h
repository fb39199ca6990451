// A manual clock for tests: Now() returns what the test set; SleepUntil jumps.
#pragma once

#include "telemetry/sample.h"

namespace ek::telemetry {

class FakeClock : public Clock {
 public:
  explicit FakeClock(double now = 1'700'000'000) : now_(now) {}
  double Now() override { return now_; }
  void SleepUntil(double t) override {
    if (t > now_) now_ = t;
  }
  void Advance(double s) { now_ += s; }
  void Set(double t) { now_ = t; }

 private:
  double now_;
};

}  // namespace ek::telemetry
