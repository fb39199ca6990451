#include "core/fake_clock.h"

namespace ek {

double FakeClock::Now() {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

double FakeClock::Monotonic() {
  std::lock_guard<std::mutex> lock(mu_);
  return mono_;
}

void FakeClock::SleepFor(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++sleeps_;
  if (seconds <= 0) return;
  slept_ += seconds;
  now_ += seconds;
  mono_ += seconds;
}

void FakeClock::SleepUntil(double t) {
  std::lock_guard<std::mutex> lock(mu_);
  ++sleeps_;
  if (t <= now_) return;
  slept_ += t - now_;
  mono_ += t - now_;
  now_ = t;
}

void FakeClock::Advance(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seconds <= 0) return;
  now_ += seconds;
  mono_ += seconds;
}

void FakeClock::Set(double now) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ = now;
}

int FakeClock::sleeps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleeps_;
}

double FakeClock::slept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slept_;
}

}  // namespace ek
