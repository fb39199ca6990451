// Time, behind one seam: the wall clock records are stamped with, a monotonic
// clock for deadlines and durations, and sleeping. Code that waits for
// something (a timeout, a backoff, a poll interval) takes a Clock*, normally
// Env::Default()->clock() or Clock::Default(), so that a test runs it on a
// FakeClock (core/fake_clock.h, ek_core_testing) whose sleeps return at once
// and move time on, the way Abseil's Clock and RocksDB's SystemClock serve
// their tests. Thread safety: every method may be called from any thread.
#pragma once

#include <string>

namespace ek {

class Clock {
 public:
  virtual ~Clock() = default;
  // The real clocks (CLOCK_REALTIME, CLOCK_MONOTONIC) and a real sleep.
  // Never null; lives for the whole program.
  static Clock* Default();

  // Wall time: seconds since the Unix epoch. It may step (NTP, an operator).
  virtual double Now() = 0;
  // Monotonic seconds from an arbitrary origin: never steps back. For
  // deadlines and elapsed times.
  virtual double Monotonic() = 0;
  // Blocks the calling thread for `seconds`; returns at once when <= 0.
  virtual void SleepFor(double seconds) = 0;
  // Blocks until Now() >= t (wall time).
  virtual void SleepUntil(double t) { SleepFor(t - Now()); }
};

// The current UTC time as ISO 8601 with seconds, e.g. "2026-11-29T15:40:00Z".
std::string UtcNowIso8601();

}  // namespace ek
