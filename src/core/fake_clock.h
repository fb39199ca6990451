// FakeClock: a Clock for tests. Time moves only when the test moves it
// (Advance, Set) or when code under test sleeps: SleepFor returns at once,
// having moved both clocks on by the time asked, so a 30 s timeout or a 2 s
// backoff runs in microseconds and a test asserts the exact times. Code that
// waits for another thread or a process in a loop of short sleeps spins
// through fake time: give such a loop a real clock, or make its condition
// hold first. Thread-safe. Test-only (ek_core_testing).
#pragma once

#include <mutex>

#include "core/clock.h"

namespace ek {

class FakeClock final : public Clock {
 public:
  // `now`: the wall time to start at; the monotonic clock starts at 1000.
  explicit FakeClock(double now = 1'700'000'000) : now_(now) {}

  double Now() override;
  double Monotonic() override;
  void SleepFor(double seconds) override;
  // Moves time to exactly `t` (when later), as a sleep would.
  void SleepUntil(double t) override;

  // Moves both clocks on by `seconds` (>= 0).
  void Advance(double seconds);
  // Sets the wall clock alone, as NTP stepping it would; the monotonic clock
  // does not move.
  void Set(double now);
  // Sleeps so far, and the seconds they asked for in all.
  int sleeps() const;
  double slept() const;

 private:
  mutable std::mutex mu_;
  double now_;
  double mono_ = 1000;
  int sleeps_ = 0;
  double slept_ = 0;
};

}  // namespace ek
