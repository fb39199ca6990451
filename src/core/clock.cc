#include "core/clock.h"

#include <chrono>
#include <ctime>
#include <thread>

namespace ek {

namespace {

class RealClock final : public Clock {
 public:
  double Now() override {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  double Monotonic() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepFor(double seconds) override {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
};

}  // namespace

Clock* Clock::Default() {
  static RealClock* clock = new RealClock();  // never destroyed: usable from static destructors
  return clock;
}

std::string UtcNowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace ek
